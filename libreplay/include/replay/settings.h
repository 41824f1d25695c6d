// settings.h: every REPLAY_* environment variable, declared once.
//
// The recorder reads its settings from the environment of the recorded process
// (`replay record` sets them; so can a user by hand). Each row of
// REPLAY_SETTINGS is one variable: its name without the prefix, its default and
// one line for users. The README's settings table lists the same rows; a test
// keeps the two in step.
//
// Settings are read once per process (Settings::Load) and are immutable after.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replay/status.h"
#include "replay/trace_header.h"

namespace replay {

// X(Field, "NAME", "default", "documentation")
#define REPLAY_SETTINGS(X)                                                                      \
  X(dir, "DIR", "replay-trace",                                                                 \
    "Trace directory; each rank writes DIR/rank-NNNNN/. Created with mode 0700.")              \
  X(level, "LEVEL", "hash",                                                                     \
    "What is recorded: meta (calls and arguments), hash (+ buffer fingerprints), data (+ received bytes).") \
  X(disable, "DISABLE", "0",                                                                    \
    "1 leaves the process as if nothing were preloaded: every intercepted function only forwards, no CUDA driver function is wrapped, nothing is recorded.") \
  X(flush_ms, "FLUSH_MS", "1000",                                                               \
    "Longest time appended events wait before the writer compresses them into the trace (ms).") \
  X(ring_kb, "RING_KB", "1024",                                                                 \
    "Per-thread recording ring (KiB), kept in a shared file mapping so a killed rank loses nothing.") \
  X(block_events, "BLOCK_EVENTS", "8192", "Events per compressed block at most.")               \
  X(zstd_level, "ZSTD_LEVEL", "1", "zstd compression level of event blocks.")                   \
  X(full_wait_ms, "FULL_WAIT_MS", "200",                                                        \
    "How long an appending thread waits for the writer when its ring is full before dropping (and counting) events (ms).") \
  X(env_prefixes, "ENV_PREFIXES", "OMPI_,PMIX_,PMI_,UCX_,NCCL_,CUDA_,SLURM_,TORCHELASTIC_,MASTER_,LOCAL_RANK,RANK,WORLD_SIZE,REPLAY_,OMP_,HOROVOD_,MV2_,I_MPI_,HYDRA_", \
    "Comma-separated prefixes of environment variables stored in each rank's header.")          \
  X(data_window, "DATA_WINDOW", "all",                                                          \
    "At level data, which received bytes to keep: all, or marks:K (only those since the K-th last replay_mark, so a long job stays affordable and re-runs from its last checkpoints).") \
  X(hash_limit_kb, "HASH_LIMIT_KB", "64",                                                       \
    "Buffers up to this size (KiB) are fingerprinted whole; larger ones through an evenly spaced sample of this size.") \
  X(nan_scan, "NAN_SCAN", "sent",                                                               \
    "NaN/Inf counting of floating buffers: sent (every element of what a call sends, the fingerprinted sample of what it receives: where a NaN enters the job is never missed), all (every element of both) or hashed (only the fingerprinted bytes).") \
  X(device_hash, "DEVICE_HASH", "kernel",                                                       \
    "How device (GPU) buffers are fingerprinted: kernel (on the operation's stream, no copy) or copy (page-locked copies hashed on the host, up to REPLAY_HASH_LIMIT_KB). Same fingerprints.") \
  X(cuda_kernels, "CUDA_KERNELS", "0",                                                          \
    "1 records every CUDA kernel launch; 0 counts them per stream, written before the stream's next recorded operation.") \
  X(cuda_driver, "CUDA_DRIVER", "1",                                                            \
    "1 records CUDA driver calls (stream ordering, kernel counts) by answering the program's dlsym and cuGetProcAddress of driver functions with wrappers; 0 leaves every driver lookup as it was (NCCL operations are still recorded and completed).") \
  X(cuda_linked, "CUDA_LINKED", "1",                                                            \
    "1 also records the driver calls of programs and modules linked against libcuda itself (Triton's kernel launchers, for one), by pointing their imports of the recorded functions at the recorder; 0 leaves them untouched.") \
  X(nccl_profiler_plugin, "NCCL_PROFILER_PLUGIN", "",                                           \
    "The NCCL profiler plugin NCCL would load if NCCL_PROFILER_PLUGIN did not name the recorder (`replay record` moves the user's choice here): the recorder passes NCCL's profiler calls on to it. Empty: libnccl-profiler.so if there is one; none: no plugin.") \
  X(log, "LOG", "warn",                                                                          \
    "What the preload and the command say on stderr besides their results: off, error, warn (what went wrong and what the program does about it), info (also which process records or re-runs which rank, where), debug, trace.") \
  X(trace_uuid, "TRACE_UUID", "",                                                               \
    "Identity shared by all ranks of one recording; `replay record` sets it. Empty: derived from the launcher's job id.")

// Each variable's full name as a constant, setting_names::dir == "REPLAY_DIR",
// for code that must read one before it may allocate (the preload's dlsym).
namespace setting_names {
#define REPLAY_SETTINGS_NAME_(field, name, def, doc) inline constexpr char field[] = "REPLAY_" name;
REPLAY_SETTINGS(REPLAY_SETTINGS_NAME_)
#undef REPLAY_SETTINGS_NAME_
}  // namespace setting_names

struct Settings {
#define REPLAY_SETTINGS_FIELD_(field, name, def, doc) std::string field;
  REPLAY_SETTINGS(REPLAY_SETTINGS_FIELD_)
#undef REPLAY_SETTINGS_FIELD_

  // Reads REPLAY_* from the environment, with the defaults above for unset ones.
  static Settings FromEnvironment();
  // Reads from `lookup(name)` (null for unset); for tests.
  template <typename Lookup>
  static Settings From(Lookup lookup);

  // Typed views; each fails with a message naming the variable when malformed.
  Result<Level> ParsedLevel() const;
  Result<int64_t> Integer(std::string_view field_name) const;
  std::vector<std::string> EnvPrefixes() const;
  // REPLAY_DATA_WINDOW as a number of marks; 0 for all.
  Result<uint32_t> DataWindowMarks() const;
};

struct SettingInfo {
  const char* name;           // full name, e.g. "REPLAY_DIR"
  const char* default_value;
  const char* doc;
};
// Every setting, in declaration order.
const std::vector<SettingInfo>& AllSettings();

template <typename Lookup>
Settings Settings::From(Lookup lookup) {
  Settings s;
#define REPLAY_SETTINGS_READ_(field, name, def, doc)      \
  {                                                       \
    const char* v = lookup("REPLAY_" name);               \
    s.field = v != nullptr ? std::string(v) : std::string(def); \
  }
  REPLAY_SETTINGS(REPLAY_SETTINGS_READ_)
#undef REPLAY_SETTINGS_READ_
  return s;
}

}  // namespace replay
