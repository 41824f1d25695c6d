// trace_input.h: opening the trace a command was given, the same way everywhere.
//
// Every command that reads a trace takes any of:
//   - a trace directory (what `replay record` writes);
//   - a bundle file (what `replay bundle` writes), unpacked into a private
//     temporary directory;
//   - PyTorch Flight Recorder dumps: one dump file, a directory of dumps named
//     <prefix><rank>, or that prefix ("dumps/nccl_trace_rank_"), imported into a
//     private temporary directory (replay/flight_recorder.h).
// Temporary directories are removed when the process exits. Input that is none
// of these is a Status whose message says what the path is and what to give
// instead.
//
// Not thread-safe: call from the command's main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "replay/trace_reader.h"

namespace replay::cli {

// Opens the trace given on the command line as `path`.
Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path);

// The directory that holds the trace `path` names: `path` itself for a trace
// directory, else a temporary directory it was unpacked or imported into.
Result<std::string> ResolveTraceDir(const std::string& path);

// A command's callback on a trace: `run(options)` with options.dir resolved
// by ResolveTraceDir (a bundle or Flight Recorder dumps are read from a
// temporary directory); what cannot be resolved is refused under `command`'s
// name. Returns the exit status.
template <typename Options, typename Run>
int RunOnTrace(const std::string& command, Options options, Run&& run) {
  auto dir = ResolveTraceDir(options.dir);
  if (!dir.ok()) return Fail(command, dir.status());
  options.dir = *dir;
  return run(options);
}

// Adds the required DIR argument of a command that takes any of the inputs
// above, into `*dir`, which must outlive `cmd`.
void AddTraceArgument(CLI::App* cmd, std::string* dir);

// Parses a list of world ranks as given to --ranks: "0,2,5-7". Sorted, without
// duplicates; InvalidArgument saying what is wrong otherwise.
Result<std::vector<int32_t>> ParseRankList(const std::string& text);

}  // namespace replay::cli
