// rerun_state.h: how a re-run program tells `replay rerun` how it went.
//
// `replay rerun` creates a small file and names it in REPLAY_RERUN_STATE; the
// preload in the re-run program maps it and keeps in it the index of the last
// recorded event it served, and, when it stops, its verdict and message. The
// mapping is shared, so the last index survives a crash of the program.
#pragma once

#include <cstdint>

namespace replay {

inline constexpr char kRerunStateMagic[8] = {'R', 'E', 'R', 'U', 'N', 'S', 'T', '1'};
// The exit status of a re-run program the preload stopped (a divergence, the
// end of the recording, --stop-at); the verdict says which.
inline constexpr int kRerunExitStopped = 86;

struct RerunState {
  char magic[8];
  int64_t last_index;   // last recorded event served, -1 before any
  int32_t verdict;      // rerun::Verdict; 0 while running
  int32_t reserved;
  int64_t diverged_index;    // --all: the recorded event of the first divergence
  int64_t diverged_time_ns;  // its time in the recording (ns since the rank started)
  char message[4056];        // NUL-terminated
};
static_assert(sizeof(RerunState) == 4096);

}  // namespace replay
