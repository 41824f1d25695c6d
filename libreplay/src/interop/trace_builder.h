// trace_builder.h: writing a trace directory from events that were not
// recorded by replay (imports of other tools' dumps), with their own times.
//
// The recorder's TraceWriter stamps each event with the time it is appended;
// an import knows when each thing happened and must keep that. A
// RankTraceBuilder collects one rank's events with absolute times and writes
// its rank directory in the trace format (header, events stream of checksummed
// zstd blocks), closed and complete, so that every reader and `replay check`
// read it like a recorded one.
//
// Not thread-safe; one builder per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_header.h"

namespace replay::interop {

class RankTraceBuilder {
 public:
  // `header` says who the rank is; its start_realtime_ns is the time origin.
  explicit RankTraceBuilder(RankHeader header) : header_(std::move(header)) {}

  // Adds `e` at wall-clock time `realtime_ns`; events are indexed in the
  // order they are added.
  void Add(Event e, int64_t realtime_ns);
  size_t size() const { return events_.size(); }

  // Writes DIR/rank-NNNNN/ (header and events) for a rank that closed with
  // `reason` at `close_realtime_ns`; with `complete` false, for one that died
  // without closing its trace (readers then take it as salvaged).
  Status Write(const std::string& dir, CloseReason reason, int64_t close_realtime_ns, bool complete = true);

 private:
  RankHeader header_;
  std::vector<Event> events_;
};

// Writes DIR/manifest.
Status WriteTraceManifest(const std::string& dir, JobManifest manifest);

}  // namespace replay::interop
