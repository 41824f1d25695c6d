// diff.h: the first point where two recordings of the same job part ways, the
// library behind `replay diff`.
//
// DiffTraces pairs the ranks of two traces by world rank and walks each rank's
// events thread by thread, in recorded order, comparing every field that a
// re-run of the same program with the same inputs must reproduce: calls and
// their arguments, sequence numbers, request ids, received and sent
// fingerprints, matched sources of wildcard receives, test outcomes, random
// bytes and seeds, marks, errors. Fields that legitimately change from run to
// run are ignored: timestamps, buffer addresses and other process-local
// handles (communicator, stream, event and RNG-state handles, fault
// addresses), and call sites are compared as module + offset so that address
// space randomisation does not count. Recorder drop markers are skipped.
//
// For each rank it reports the first divergence with a few events of context,
// and which rank diverged first: the one whose divergent event came first on
// the wall clock of the run (ranks of one run share it; times shown are
// relative to each rank's start, which is what compares across runs).
//
// Thread safety: DiffTraces may be called from several threads at once; the
// progress callback is called from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

struct DiffOptions {
  int context = 3;               // events shown before and after a divergence
  std::vector<int32_t> ranks;    // compare only these; empty: all
  bool compare_call_sites = true;
  int threads = 0;               // 0: one per core, at most 8
  ReadProgressFn progress;  // how far reading the ranks has got
};

struct DiffEvent {
  uint64_t index = 0;
  int64_t time_ns = 0;           // since the rank's start
  std::string text;              // as `replay dump` prints it
  std::string json;              // as `replay dump --json` prints it (one line)
};

struct RankDiff {
  int32_t rank = -1;
  bool diverged = false;
  uint32_t thread = 0;               // the recording thread where it diverged
  uint64_t matched = 0;              // events equal before the divergence (that thread)
  int64_t time_ns = -1;              // rank-relative time of the divergence
  int64_t realtime_ns = 0;           // the same on the wall clock of the run (A's, or B's where A ended)
  std::string what;                  // "getrandom returned different bytes", "trace B ends here"
  std::vector<std::string> fields;   // fields that differ (JSON names)
  std::vector<DiffEvent> before;     // common context, oldest first (from A)
  std::optional<DiffEvent> a, b;     // the divergent events; absent where a trace ended
  std::vector<DiffEvent> after_a, after_b;
  uint64_t events_a = 0, events_b = 0;
};

struct DiffReport {
  std::string trace_a, trace_b;
  std::vector<RankDiff> ranks;           // ranks present in both, by rank
  std::optional<int32_t> first_rank;     // the rank that diverged earliest (wall clock)
  std::vector<int32_t> only_in_a, only_in_b;
  std::vector<std::string> settings;     // environment / versions that differ between the runs
  std::vector<std::string> notes;
  // Ranks in both traces that could not be compared (a trace unreadable):
  // "no divergence" with some of these is no verdict on them.
  std::vector<int32_t> not_compared;
  // What of either trace could not be read besides (a manifest, received
  // bytes): "no divergence" with some of these is no clean verdict either.
  std::vector<std::string> unread;
  bool diverged() const;
};

// Compares two traces of the same job. Fails when either cannot be read at all.
Result<DiffReport> DiffTraces(const TraceReader& a, const TraceReader& b, const DiffOptions& options = {});

// The `replay diff --json` document (schema in docs/check.md), `indent`
// spaces per level (-1: one line).
std::string DiffReportJson(const DiffReport& report, int indent = -1);

}  // namespace replay
