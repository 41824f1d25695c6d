// check.h: cross-rank analysis of a trace, the library behind `replay check`.
//
// CheckTrace reads every rank of a trace once, rank by rank (in parallel), keeps
// a compact summary per collective (communicator identity, sequence number) and
// per point-to-point channel, and from those reports what is wrong with the
// job: collectives whose ranks disagree on op, count, datatype, root or
// reduction; ranks missing from a collective the others entered (with what each
// missing rank was doing instead); collectives every member entered and some
// never finished; sends and receives without a partner; MPI errors, aborts and
// fatal signals; the first rank that sent NaN or Inf into a collective; ranks
// whose outputs of one collective differ; configuration that differs across
// ranks; two ranks on one device; and ranks that are consistently late.
//
// Each Finding names the ranks, communicator, sequence number and call site
// involved, the symptom category of the fault study it belongs to and the fix
// that usually works (docs/check.md; taxonomy in the project's design notes).
// Findings are ordered most likely cause first.
//
// Memory is bounded by the collectives of the job, not by its events: no rank's
// events are kept after its summary is taken.
//
// Thread safety: CheckTrace may be called from several threads at once (it uses
// its own worker threads inside); the progress callback is called from one
// thread at a time. Reports are plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

// Kinds of finding, in the order they are ranked when nothing else tells which
// came first: a disagreement on arguments causes hangs, crashes and errors, and
// those cause missing ranks, and so on. Names (FindingKindName) are stable:
// they are the `kind` of the JSON output.
enum class FindingKind : uint8_t {
  kMismatch = 0,    // same (communicator, seq), different call; or opposite orders
  kError,           // MPI/NCCL error code, MPI_Abort, fatal signal
  kMissingRanks,    // members that never entered a collective others entered
  kUnmatchedP2p,    // a send or receive with no partner
  kNeverCompleted,  // every member entered, some never returned or completed
  kNanInf,          // first NaN/Inf sent into a collective or message
  kOutputsDiffer,   // ranks received different results of one collective
  kDevice,          // two ranks of one communicator on one device
  kConfig,          // environment or versions differ across ranks
  kStraggler,       // one rank is consistently the last to arrive
};
inline constexpr int kFindingKindCount = 10;
std::string_view FindingKindName(FindingKind kind);

// Where in the program a call was made: the return address resolved against
// the modules the rank had loaded, to a symbol when the module is readable on
// this machine, and to a source line where it has debug information; in a
// Python process, the innermost Python frames that made the call.
struct CallSite {
  uint64_t address = 0;  // the native return address (0: unknown)
  std::string module;    // path; empty when no loaded module contains it
  uint64_t offset = 0;   // from the module's load address
  std::string symbol;    // demangled function name; empty when unresolved
  uint64_t symbol_offset = 0;
  std::string file;      // source file of the call, from debug information; empty when none
  int32_t line = 0;
  std::vector<SourceFrame> python;  // innermost first; empty outside Python
  bool known() const { return address != 0 || !python.empty(); }
};
// One line: the innermost Python frames, then the native site:
// "step (train.py:42) < main (train.py:80) via Allreduce+0x4c (MPI.cpython-311-x86_64-linux-gnu.so+0x1a2b)",
// "train_step+0x1c at train.cpp:120 (mpi_train+0x4a2c)", "mpi_train+0x4a2c",
// "0x7f…" or "unknown".
std::string FormatCallSite(const CallSite& site);

struct CommRef {
  uint64_t id = 0;
  std::string name;               // from lineage: "WORLD", "dup(WORLD)", "split(WORLD, color=1)"
  std::vector<int32_t> members;   // world ranks in communicator-rank order; empty if unknown
};

struct Finding {
  FindingKind kind = FindingKind::kMismatch;
  std::string title;                  // one line, says what and where
  std::vector<std::string> details;   // further lines: evidence, per-rank states
  std::vector<std::string> categories;  // symptom categories of the fault study
  std::string fix;                    // the fix pattern that usually works
  std::optional<CommRef> comm;
  uint64_t seq = 0;                   // collective sequence number; 0 when not one
  std::string op;                     // API of the call concerned, e.g. "MPI_Allreduce"
  std::vector<int32_t> ranks;         // the ranks at fault, most likely first
  // Where the call concerned was made: by the odd rank of a mismatch, by the
  // ranks that did make a collective others are missing from.
  std::optional<CallSite> call_site;
  std::string data = "{}";  // kind-specific facts: a JSON object (docs/check.md)
};

// What a rank was doing when its trace ends.
struct RankState {
  int32_t rank = -1;
  std::string status;        // complete, salvaged, running, failed, unreadable
  std::string close_reason;  // exit, finalize, signal, abort, ... or empty
  int signal = 0;            // fatal signal recorded, 0 none
  bool blocked = false;      // inside a communication call that never returned
  std::string doing;         // "blocked in MPI_Allreduce on dup(WORLD) #3 for 4.1 s"
  uint64_t events = 0;
};

struct CheckOptions {
  // The job may still be running (a hang right now): a rank that is still
  // recording is read as far as it got, its calls in progress timed against
  // the wall clock. Implied when some rank is still recording.
  bool live = false;
  // How long a call must have stayed in progress (until now for a running
  // rank, else until the rank died or closed its trace) to count as stuck, so
  // that a job stopped while healthy is not reported as hung. A rank killed
  // without a trace of when (SIGKILL) counts as stuck. < 0: 500 ms.
  int64_t min_wait_ns = -1;
  // Worker threads reading ranks; 0: one per core, at most 8.
  int threads = 0;
  // Stragglers: a rank must be the last to arrive at >= `straggler_fraction`
  // of at least `straggler_min_samples` blocking collectives, keep the others
  // waiting >= `straggler_min_margin_ns` (median), and cost them >=
  // `straggler_min_share` of the job's span in total.
  int straggler_min_samples = 20;
  double straggler_fraction = 0.6;
  int64_t straggler_min_margin_ns = 1'000'000;
  double straggler_min_share = 0.05;
  // Told how far reading the ranks has got.
  ReadProgressFn progress;
  // Settings that differ across ranks show values that look like secrets as
  // placeholders, as `replay bundle` redacts them ([REDACTED:N], equal values
  // equal): for what is shared, such as `replay report`.
  bool redact = false;
};

struct CheckReport {
  std::string trace;
  bool live = false;
  int32_t world_size = -1;             // ranks the job had, as far as known
  std::vector<Finding> findings;       // most likely cause first
  std::vector<RankState> ranks;        // by rank
  std::vector<std::string> notes;      // limits of this analysis (unreadable ranks, dropped events)
  // What the check could not read, one line each: ranks whose trace is
  // unreadable, events lost to damage. "No findings" with some of these is no
  // verdict on the whole job.
  std::vector<std::string> unread;
};

// Analyses every rank of `trace`. Fails only when no rank can be read at all;
// unreadable ranks become notes.
Result<CheckReport> CheckTrace(const TraceReader& trace, const CheckOptions& options = {});

// The `replay check --json` document (schema in docs/check.md), `indent`
// spaces per level (-1: one line).
std::string CheckReportJson(const CheckReport& report, int indent = -1);

}  // namespace replay
