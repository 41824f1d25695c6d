// replay.h: the application-facing API of replay. C and C++.
//
// An application marks points in its own timeline (checkpoints, epochs) so that a
// recording can be re-run from that point (`replay rerun --from-mark NAME=VALUE`)
// and payload storage can be bounded to recent checkpoints (REPLAY_DATA_WINDOW).
//
// The preload library (libreplay_interpose.so) provides replay_mark. The
// declaration below is weak, so a program that includes this header links and
// runs without replay: call REPLAY_MARK, which does nothing when the preload is
// absent. replay_mark is thread-safe and async-signal-unsafe.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Records a mark named `name` (at most 63 bytes are kept; copied before return)
// with `value` (typically a step number). Null when the preload is not loaded.
void replay_mark(const char* name, int64_t value) __attribute__((weak));

#ifdef __cplusplus
}
#endif

// Records a mark when running under replay; a no-op otherwise.
#define REPLAY_MARK(name, value)                       \
  do {                                                 \
    if (replay_mark) replay_mark((name), (value));     \
  } while (0)
