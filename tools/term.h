// term.h: terminal niceties, only when stdout is a terminal.
#pragma once

#include <string>

#include "replay/trace_reader.h"

namespace replay::cli {

// Whether to colour output: stdout is a terminal, NO_COLOR is unset.
bool UseColor();

enum class Color { kRed, kYellow, kGreen, kBold, kDim };
// `text` wrapped in the colour's escape codes when UseColor().
std::string Paint(Color c, const std::string& text);

// A one-line progress indicator on stderr for long commands; silent when stderr
// is not a terminal. Not thread-safe.
class Progress {
 public:
  // With `bytes`, counts are shown as sizes ("12.0 MiB/40.0 MiB").
  Progress(std::string what, size_t total, bool bytes = false);
  ~Progress();
  void Update(size_t done);
  // Updates what is being done and how much there is in all, for commands
  // whose phases have totals (and units) known only as they start.
  void Update(const std::string& what, size_t done, size_t total, bool bytes);
  // Ranks and events read: "reading 3/8 ranks, 12.4 M/40.1 M events".
  void Update(const ReadProgress& p);
  // Starts a new phase, shown at the next update whatever the time.
  void Phase(const std::string& what);
  // Takes the line off the terminal, so that what is printed next starts clean.
  void Clear();

 private:
  std::string what_;
  size_t total_;
  bool bytes_;
  bool active_;
  bool shown_ = false;
  long long last_ms_ = 0;
};

}  // namespace replay::cli
