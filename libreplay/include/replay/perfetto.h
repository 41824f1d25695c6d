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
// Thread safety: WritePerfetto reads the trace and writes `out`; call it from
// one thread per stream.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <vector>

#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

struct PerfettoOptions {
  std::vector<int32_t> ranks;  // world ranks; empty: all
  bool flows = true;           // arrows between matched operations
  ReadProgressFn progress;  // how far reading the ranks has got
};

struct PerfettoSummary {
  uint64_t events = 0;  // trace events written, metadata included
  uint64_t slices = 0;
  uint64_t flows = 0;   // arrows
  uint64_t ranks = 0;
};

Result<PerfettoSummary> WritePerfetto(const TraceReader& trace, std::ostream& out,
                                      const PerfettoOptions& options = {});

}  // namespace replay
