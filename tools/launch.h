// launch.h: running a program under the preload, for record and rerun.
#pragma once

#include <string>
#include <vector>

namespace replay::cli {

// libreplay_interpose.so: REPLAY_INTERPOSE_LIB, next to this binary (build
// tree), or in ../lib (installed); empty if none is there.
std::string FindInterposer();

// Prepends `value` to the environment variable `var`, separated by `sep`.
void PrependEnv(const char* var, const std::string& value, char sep);

// Puts the interposer `lib` first in LD_PRELOAD (after the sanitizer runtime
// in a sanitizer build of replay, which must come before everything).
void PreloadInterposer(const std::string& lib);

// An absolute form of `path`.
std::string AbsolutePath(const std::string& path);

// Runs `argv` (searched in PATH), forwarding SIGINT, SIGTERM, SIGHUP and
// SIGQUIT to it, and returns its wait status; -1 if it could not start.
int RunAndWait(const std::vector<std::string>& argv);

// The shell-like exit code of a wait status: the code, or 128+signal.
int ExitCodeOf(int wait_status);

// Waits, at most `seconds`, until no rank of the trace in `dir` is still
// recording: ranks close their traces after their launcher has gone.
void WaitForRanksToClose(const std::string& dir, double seconds = 5);

}  // namespace replay::cli
