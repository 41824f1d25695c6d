// flight_recorder.h: PyTorch's NCCL Flight Recorder dumps, both ways.
//
// Flight Recorder (torch.distributed, "FR") keeps the last N collectives of
// each rank in a ring and dumps them, one file per rank
// (TORCH_FR_DUMP_TEMP_FILE<rank>), as a pickle or JSON document: version,
// pg_config (process groups and their ranks), pg_status and entries (record_id,
// pg_id, process_group, collective_seq_id, p2p_seq_id, op_id, profiling_name,
// time_created_ns, input/output sizes and dtypes, state, time_discovered_*,
// retired, timeout_ms, is_p2p, frames). The field meanings are summarised in
// docs/flight-recorder.md.
//
// ImportFlightRecorder turns a job's dumps into a trace directory, so that
// every replay command reads them: each process group becomes a communicator
// (members from pg_config), each entry an operation on it, numbered by its
// collective_seq_id (point-to-point operations by channel), enqueued at
// time_created_ns and completed when FR saw it complete. Entries not completed
// when the dump was taken are still in progress at the end of the rank's trace,
// and, since FR dumps when its watchdog times out, count as stuck from the
// time they were enqueued. Pickles are read without Python and without
// running anything (interop/pickle.h).
//
// ExportFlightRecorder writes a trace's collectives and messages as FR dumps
// that PyTorch's analyzer (torchfrtrace / fr_trace) reads.
//
// Thread safety: independent functions; call each from one thread per output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

// Whether `path`, a file, starts like a Flight Recorder dump (pickle or JSON).
bool LooksLikeFlightRecorderDump(const std::string& path);

// The dump files that `path` names: a dump file, a directory of dumps named
// <prefix><rank> (as FR writes them), or such a prefix ("dumps/nccl_trace_rank_").
// NotFound when there are none.
Result<std::vector<std::string>> FindFlightRecorderDumps(const std::string& path);

struct FlightRecorderImport {
  size_t ranks = 0;
  size_t entries = 0;
  std::string version;              // of the dumps
  std::vector<std::string> notes;   // what could not be mapped
};

// Converts the dumps `files` (one per rank; the rank is the number the file
// name ends in) into a trace directory at `dest`.
Result<FlightRecorderImport> ImportFlightRecorder(const std::vector<std::string>& files, const std::string& dest);

struct FlightRecorderExportOptions {
  bool json = false;                        // JSON documents instead of pickles
  std::string prefix = "nccl_trace_rank_";  // file names: <prefix><rank>[.json]
  std::vector<int32_t> ranks;               // empty: all
  ReadProgressFn progress;  // how far reading the ranks has got
};

// Writes one dump per rank of `trace` into the directory `out_dir` (created if
// missing) and returns their paths.
Result<std::vector<std::string>> ExportFlightRecorder(const TraceReader& trace, const std::string& out_dir,
                                                      const FlightRecorderExportOptions& options = {});

}  // namespace replay
