// finding_key.h: when a reduced job fails "the same way" as the recorded one.
//
// A FindingKey is what of a finding must survive a reduction: its kind, the
// call (API) and communicator it is about (by lineage, "split(WORLD,
// color=1)", so a split stays a split), the field a mismatch differs in, the
// error or signal of an error, the ranks at fault, and for a hang which ranks
// wait and in which call each missing rank waits. Ranks are the recording's:
// a reduced job's ranks are mapped back through the list of where each came
// from. Sequence numbers, counts, times and the sizes of communicators are
// not part of it: a reduction changes them.
//
// Plain values.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "replay/check.h"

namespace replay::shrink {

struct FindingKey {
  FindingKind kind = FindingKind::kMismatch;
  std::string op;     // API, e.g. "MPI_Allreduce"
  std::string comm;   // lineage name without "@N" disambiguation
  std::string field;  // mismatch: the first field that differs
  std::string error;  // error: "signal SIGSEGV", "MPI 15", "abort"
  std::set<int32_t> ranks;                      // at fault
  std::set<int32_t> stuck;                      // blocked in the call concerned
  std::map<int32_t, std::string> blocked_in;    // missing rank -> "API on comm" it waits in
};

// `origin[i]` is the recording's rank of rank i of the job `finding` is from
// (empty: the recording itself).
FindingKey KeyOf(const Finding& finding, const std::vector<int32_t>& origin);

// How calls are compared: by API, or (when NCCL calls were re-issued as the
// MPI calls that stand for them) by what they do, whatever their API and
// communicator.
enum class CallMatch { kApi, kOperation };

// Whether `got`, from a job that kept the recording's ranks `kept`, is the
// finding `target`: same kind, call, communicator, field or error; its ranks
// at fault those of the target that were kept (at least one); for a hang,
// its waiting ranks among the target's, each missing rank waiting where it did.
// When not, `why` (if given) says what differs.
bool SameFinding(const FindingKey& target, const FindingKey& got, const std::set<int32_t>& kept, CallMatch match,
                 std::string* why = nullptr);

// Kinds a re-issued job can show: a hang, a mismatch, an error.
bool DrivableKind(FindingKind kind);

// The finding of `report` a reduction keeps: the first of kind `keep` when
// given (FindingKindName), else the first of a drivable kind that is not the
// program calling MPI_Abort; null if none.
const Finding* PickFinding(const CheckReport& report, const std::string& keep);

// The finding of `report` (from a job whose rank i is the recording's
// origin[i]) that is `target`, or null. The first finding `PickFinding`
// takes must be of the target's kind (no other fault comes first); among
// the findings of that kind, one must be the target. Several findings of one
// kind can tell one fault: the two ranks of a deadlock each miss the other's
// collective, and which is listed first can depend on timing.
const Finding* MatchingFinding(const CheckReport& report, const std::string& keep, const FindingKey& target,
                               const std::vector<int32_t>& origin, CallMatch match, std::string* why);

// The findings of `report` that tell the fault `picked` (a finding of it):
// `picked` first, then every other finding of its kind (for an error, not
// the program calling MPI_Abort unless `picked` is that).
std::vector<const Finding*> TargetFindings(const CheckReport& report, const Finding& picked);

// MatchingFinding for the first of `targets` that `report` shows; `which`
// (if given) is set to its index. `why` says why the first target is not.
const Finding* MatchingTarget(const CheckReport& report, const std::string& keep,
                              const std::vector<FindingKey>& targets, const std::vector<int32_t>& origin,
                              CallMatch match, std::string* why, size_t* which = nullptr);

// "MPI_Iallreduce", "ncclAllReduce" -> "allreduce": what a call does.
std::string OperationOf(const std::string& api);

// "split(dup(WORLD)@3, color=1)@5" -> "split(dup(WORLD), color=1)".
std::string PlainCommName(const std::string& name);

}  // namespace replay::shrink
