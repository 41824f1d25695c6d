// term.h: terminal niceties, only when stdout is a terminal.
#pragma once

#include <string>

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
  Progress(std::string what, size_t total);
  ~Progress();
  void Update(size_t done);

 private:
  std::string what_;
  size_t total_;
  bool active_;
  long long last_ms_ = 0;
};

}  // namespace replay::cli
