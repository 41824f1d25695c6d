// perfetto.h: a trace as a timeline for the Perfetto UI (ui.perfetto.dev,
// which runs in the browser without uploading) and trace_processor, in
// either of two forms with the same content:
//
//  - WritePerfetto: Chrome's Trace Event Format (JSON), which chrome://tracing
//    also opens;
//  - WritePerfettoProto: Perfetto's own binary format (a protobuf Trace, the
//    .pftrace of Perfetto's tools), under half the JSON's size and written in
//    half the time.
//
// The picture: one process per rank, named after rank, host and pid, one
// track per communicator on each rank with a slice per operation from its call
// to its completion, and one track per thread for calls that belong to no
// communicator (waits, init, finalize). Overlapping operations of one
// communicator (non-blocking ones) are spread over extra tracks ("WORLD (2)")
// so that slices on a track never overlap. Operations that never completed
// run to the end of their rank's trace and say so in their name ("never
// completed", "never returned"). Arrows join the operations of one collective
// across ranks (same communicator and sequence number: from the first rank
// that called it to each other) and each message's send to its receive.
// Marks, errors and signals are instants on their thread's track. Each slice
// carries its arguments (event index, thread, communicator, sequence number,
// peer, tag, count, type, bytes, root, return code, state, and the call
// site, Python frames first, where one was recorded). Memory stays far below
// the trace's decoded size: the ranks are read twice, first to lay them out
// and match the arrows, then to write each operation as it is read.
//
// JSON: pid = rank, a track is a thread (tid), arrows are flow events ("s",
// "f"), times are microseconds from the earliest rank start, and otherData
// says which trace and window it shows.
//
// Protobuf: one sequence of TracePackets written one at a time, so memory
// does not grow with the output. A rank is a process track whose pid is
// rank + 1 (Perfetto takes pid 0 for the kernel's idle task, and the pids of
// ranks on different hosts may coincide; the recorded pid is in its name),
// with its tracks as child tracks in the JSON's order; a slice is a begin and
// an end event, its arguments debug annotations; an arrow is a flow id that
// starts at the begin event of one slice and terminates at the end event of
// the other, so that Perfetto, which reads events in time order and drops an
// arrow whose end it reads first, reads the start first (unless the two
// ranks' clocks disagree by more than a message took: a send that seems to
// start after its receive completed). Times are nanoseconds
// from the earliest rank start on Perfetto's default clock. Names and
// strings that recur are interned. The messages are declared in
// libreplay/src/interop/perfetto_trace.proto, a subset of Perfetto's.
//
// A window narrows the picture to a stretch of time: the operations that
// overlap it, the instants inside it, the arrows whose two ends are both kept,
// and the processes and tracks those need. Times stay counted from the start
// of the whole trace, so a window lines up with an export of everything.
//
// Thread safety: each writer reads the trace and writes `out`; call it from
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
  uint64_t events = 0;  // JSON: trace events written, metadata included; protobuf: packets
  uint64_t slices = 0;
  uint64_t flows = 0;   // arrows
  uint64_t ranks = 0;
  uint64_t left_out = 0;  // operations outside the window
  std::optional<PerfettoWindow> window;  // the window written, if any
  int finding = -1;       // the finding of `around` it is centred on, if any
};

// Trace Event Format (JSON).
Result<PerfettoSummary> WritePerfetto(const TraceReader& trace, std::ostream& out,
                                      const PerfettoOptions& options = {});

// Perfetto's protobuf trace format. `out` should be opened in binary mode.
Result<PerfettoSummary> WritePerfettoProto(const TraceReader& trace, std::ostream& out,
                                           const PerfettoOptions& options = {});

}  // namespace replay
