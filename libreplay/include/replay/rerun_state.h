// rerun_state.h: the contract between `replay rerun` and the program it re-runs.
//
// Two things pass between them, and both are declared here only:
//
// - The request, down: `replay rerun` puts a RerunRequest in the environment
//   of the command it starts (Export), and the preload in each process of that
//   command reads it when it loads (FromEnvironment). The variables are not
//   settings a user sets; REPLAY_RERUN_VARIABLES names them.
// - The outcome, up: `replay rerun` creates a small file (one rank) or a
//   directory with one file per rank (--all) and names it in the request; the
//   preload maps it and keeps in it the index of the last recorded event it
//   served and, when it stops, its verdict and message. The mapping is shared,
//   so the last index survives a crash of the program.
//
// Thread safety: Export and FromEnvironment touch the process environment
// (call them before starting threads that read it); the rest is stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "replay/status.h"

namespace replay {

// How a re-run ended, as the preload saw it.
enum class RerunVerdict : int32_t {
  kRunning = 0,
  kReproduced = 1,      // the program finished consistent with the recording
  kDiverged = 2,        // the program did something the recording did not
  kRecordingEnded = 3,  // the program reached the point where the recording stops
  kStoppedAt = 4,       // --stop-at reached
  kFailed = 5,          // the re-run could not be set up (bad trace, missing payloads)
};

// The exit status of a re-run program the preload stopped (a divergence, the
// end of the recording, --stop-at); the verdict says which.
inline constexpr int kRerunExitStopped = 86;

enum class RerunMode : int32_t {
  kNone = 0,   // not a re-run
  kOneRank,    // one rank alone, every call answered from its recording
  kAllRanks,   // every rank, really communicating, held to its recording
};

// The request, one variable a row: X(field, type, "NAME", what it holds). An
// empty variable is the field's default: kNone, "", -1.
#define REPLAY_RERUN_VARIABLES(X)                                                                      \
  X(mode, RerunMode, "REPLAY_MODE", "rerun (one rank alone) or rerun-all (every rank)")                \
  X(trace_dir, std::string, "REPLAY_RERUN_TRACE", "the trace directory, absolute")                     \
  X(rank, int64_t, "REPLAY_RERUN_RANK", "one rank alone: which")                                       \
  X(state, std::string, "REPLAY_RERUN_STATE", "the state file (one rank) or directory (every rank)")   \
  X(programs, std::string, "REPLAY_RERUN_PROGRAMS",                                                    \
    "the recorded programs (record/program_identity.h); processes running none pass through")          \
  X(args, std::string, "REPLAY_RERUN_ARGS", "the arguments the user gave the program, which also count")  \
  X(stop_at, int64_t, "REPLAY_RERUN_STOP_AT", "the recorded event to stop at")                         \
  X(from_mark, std::string, "REPLAY_RERUN_FROM_MARK", "NAME=VALUE: the recording is served from that mark on")

// A field's value when its variable is unset or empty.
template <typename T>
T RerunUnset() {
  if constexpr (std::is_same_v<T, int64_t>) {
    return -1;
  } else {
    return T{};
  }
}

struct RerunRequest {
#define REPLAY_RERUN_FIELD_(field, type, name, doc) type field = RerunUnset<type>();
  REPLAY_RERUN_VARIABLES(REPLAY_RERUN_FIELD_)
#undef REPLAY_RERUN_FIELD_

  bool all_ranks() const { return mode == RerunMode::kAllRanks; }

  // Sets the request's variables in this process's environment (to be
  // inherited by the command it starts) and unsets those at their default.
  // Returns the names it set, for a launcher that forwards only named
  // variables.
  std::vector<std::string> Export() const;
  // The request in this process's environment; mode kNone when it asks for
  // no re-run.
  static RerunRequest FromEnvironment();
};

inline constexpr char kRerunStateMagic[8] = {'R', 'E', 'R', 'U', 'N', 'S', 'T', '1'};

struct RerunState {
  char magic[8];
  int64_t last_index;   // last recorded event served, -1 before any
  int32_t verdict;      // RerunVerdict; 0 while running
  int32_t pid;          // the served process; 0 until one starts serving
  int64_t diverged_index;    // --all: the recorded event of the first divergence
  int64_t diverged_time_ns;  // its time in the recording (ns since the rank started)
  char message[4056];        // NUL-terminated
};
static_assert(sizeof(RerunState) == 4096);

// The state file of `rank` in the directory of an all-ranks re-run.
std::string RerunStatePath(const std::string& dir, int32_t rank);

// `replay rerun`'s side: creates an initialised state file (one rank) or an
// empty directory for the ranks' files (every rank) in /tmp; returns its path.
Result<std::string> CreateRerunStateFile();
Result<std::string> CreateRerunStateDir();

// Processes of the command that do not run the recorded program are not
// served; each appends a line "PID<TAB>WHY<TAB>PROGRAM" to this file (beside
// the state file, or in the state directory with --all), so that a re-run that
// served nothing can say what ran instead.
std::string RerunNotServedPath(const std::string& state, bool all_ranks);

// Reads a state file and removes it; nullopt when there is none (the program
// never started serving) or it is short.
std::optional<RerunState> TakeRerunState(const std::string& path);

// The re-run program's side: maps the state file at `path` (creating it),
// stamped and with no event served yet; null when it cannot. The mapping is
// never unmapped.
RerunState* MapRerunState(const std::string& path);

}  // namespace replay
