// jsonl.h: a trace as JSON Lines, one event per line, for pandas, DuckDB, jq
// and anything else that reads a stream of records.
//
// Each line is one event as `replay dump --json` writes it (docs/trace-format.md:
// index, time_ns, thread, kind and the kind's fields, hashes as hex strings),
// with what a reader of a single line needs besides: the world `rank`,
// `realtime_ns` (the rank's start plus time_ns, so that ranks on one host line
// up), and communicators by name as `replay check` names them (`comm_name`,
// `parent_name`), with peers and roots as world ranks where the communicator's
// members are known (`peer_world`, `root_world`). A communicator creation's
// rank in the new communicator, `rank` in dump's form, is `comm_rank` here.
// An event with a call site says where it was made in `site`, as `replay
// check` prints call sites: the innermost Python frames of a Python program,
// then the native function and source line where debug information exists.
// Ranks follow one another in rank order; within a rank, events are in index
// order.
//
// Memory is bounded whatever the size of the trace: each rank is read as a
// stream twice, once to name its communicators and once to write its events,
// and nothing of its events is kept.
//
// Thread safety: WriteJsonLines reads the trace and writes `out`; call it from
// one thread per stream.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

struct JsonLinesOptions {
  std::vector<int32_t> ranks;  // world ranks; empty: all
  // How far reading has got: once over the ranks naming communicators, then
  // once more writing their events.
  ReadProgressFn progress;
};

struct JsonLinesSummary {
  uint64_t events = 0;  // lines written
  uint64_t ranks = 0;
  // Ranks that could not be read and damage skipped while reading, one line each.
  std::vector<std::string> notes;
};

// Fails when no rank chosen can be read, or when writing `out` fails.
Result<JsonLinesSummary> WriteJsonLines(const TraceReader& trace, std::ostream& out,
                                        const JsonLinesOptions& options = {});

}  // namespace replay
