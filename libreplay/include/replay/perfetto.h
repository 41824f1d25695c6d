// perfetto.h: a trace as Chrome/Perfetto trace events (JSON), for the Perfetto
// UI (ui.perfetto.dev, which runs in the browser without uploading) and
// chrome://tracing.
//
// The document follows the Trace Event Format: one process per rank (pid =
// rank, named after rank, host and pid), one track per communicator on each
// rank with a complete slice ("X") per operation from its call to its
// completion, and one track per thread for calls that belong to no
// communicator (waits, init, finalize). Overlapping operations of one
// communicator (non-blocking ones) are spread over extra tracks so that slices
// on a track always nest. Operations that never completed run to the end of
// their rank's trace and say so. Flow arrows ("s"/"f") join the operations of
// one collective across ranks (same communicator and sequence number: from the
// first rank that called it to each other) and each message's send to its
// receive. Marks, errors and signals are instant events. Times are in
// microseconds from the earliest rank start.
//
// A window narrows the document to a stretch of time: the operations that
// overlap it, the instants inside it, the arrows whose two ends are both kept,
// and the processes and tracks those need. Times stay counted from the start
// of the whole trace, so a window lines up with an export of everything.
//
// Thread safety: WritePerfetto reads the trace and writes `out`; call it from
// one thread per stream.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <vector>

#include "replay/check.h"
#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

// A stretch of the trace, in nanoseconds from its start (the earliest rank's start).
struct PerfettoWindow {
  int64_t start_ns = 0;
  int64_t end_ns = std::numeric_limits<int64_t>::max();  // the end of the trace
};

struct PerfettoOptions {
  std::vector<int32_t> ranks;  // world ranks; empty: all
  bool flows = true;           // arrows between matched operations
  ReadProgressFn progress;  // how far reading the ranks has got
  // Only this stretch of time; none: all of it.
  std::optional<PerfettoWindow> window;
  // Instead of `window`, when not empty: `around_ns` centred on when the first
  // of these findings (in the order CheckTrace ranks them) that can be placed
  // in time happened (a finding about the job as a whole cannot). Fails with
  // kNotFound when none can.
  std::vector<Finding> around;
  int64_t around_ns = 1'000'000'000;
};

struct PerfettoSummary {
  uint64_t events = 0;  // trace events written, metadata included
  uint64_t slices = 0;
  uint64_t flows = 0;   // arrows
  uint64_t ranks = 0;
  uint64_t left_out = 0;  // operations outside the window
  std::optional<PerfettoWindow> window;  // the window written, if any
  int finding = -1;       // the finding of `around` it is centred on, if any
};

Result<PerfettoSummary> WritePerfetto(const TraceReader& trace, std::ostream& out,
                                      const PerfettoOptions& options = {});

}  // namespace replay
