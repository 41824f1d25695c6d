// log.h: what the preload and the command say on stderr besides their results.
//
// Diagnostics go through spdlog at a level that REPLAY_LOG chooses (off,
// error, warn, info, debug, trace; default warn): warnings say what went wrong
// and what the program does about it, info and debug what the recorder
// decided (rank, trace directory, level, the process a re-run serves). Each
// line is written to stderr in one write(2), so that lines of ranks sharing a
// terminal never interleave and nothing is buffered at a crash. Never called
// on a call's hot path: only where something is decided or goes wrong.
//
// Thread-safe. Not for signal handlers (it formats and allocates).
#pragma once

#include <string_view>

namespace replay::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// The level REPLAY_LOG named, read once; an unknown name keeps the default
// and says so once.
Level Threshold();
// Parses a level's name; false for an unknown one.
bool ParseLevel(std::string_view name, Level* level);
inline bool Enabled(Level level) { return level != Level::kOff && level >= Threshold(); }

// Writes `line` (its own prefix included, "replay rerun: ...") at `level`.
void Write(Level level, std::string_view line);
inline void Error(std::string_view line) { Write(Level::kError, line); }
inline void Warn(std::string_view line) { Write(Level::kWarn, line); }
inline void Info(std::string_view line) { Write(Level::kInfo, line); }
inline void Debug(std::string_view line) { Write(Level::kDebug, line); }

}  // namespace replay::log
