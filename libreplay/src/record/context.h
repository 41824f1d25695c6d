// context.h: facts about the recording process for its rank header.
//
// Read once when recording starts (and modules again at close). Only
// functions of the C library and /proc are used, so this is safe to call from
// inside an intercepted call. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/trace_header.h"

namespace replay {

struct LauncherInfo {
  int32_t rank = -1;        // world rank the launcher assigned, -1 if none says
  int32_t world_size = -1;
  int32_t local_rank = -1;
  std::string launcher;     // "openmpi", "slurm", "torchrun", "pmi", or empty
  std::string job_id;       // launcher's job identity, empty if unknown
};

// Reads the launcher's variables (Open MPI, PMIx, PMI, Slurm, torchrun).
LauncherInfo DetectLauncher();

// The trace UUID: REPLAY_TRACE_UUID if valid; else derived from the launcher's
// job id and the trace directory, so that every rank of one job agrees without
// communicating; else random.
Uuid ChooseTraceUuid(const std::string& setting, const LauncherInfo& launcher,
                     const std::string& trace_dir);

// Environment variables whose names start with one of `prefixes`, sorted.
KeyValues EnvironmentSnapshot(const std::vector<std::string>& prefixes);

std::vector<std::string> CommandLine();
std::string HostName();
uint32_t OnlineCores();
std::vector<Module> LoadedModules();
// Absolute form of `path` (made from the working directory if relative).
std::string AbsolutePath(const std::string& path);

}  // namespace replay
