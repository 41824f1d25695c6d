#include "term.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "replay/event_format.h"

namespace replay::cli {

bool UseColor() {
  static const bool use = isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
  return use;
}

std::string Paint(Color c, const std::string& text) {
  if (!UseColor()) return text;
  const char* code = "";
  switch (c) {
    case Color::kRed: code = "\033[31m"; break;
    case Color::kYellow: code = "\033[33m"; break;
    case Color::kGreen: code = "\033[32m"; break;
    case Color::kBold: code = "\033[1m"; break;
    case Color::kDim: code = "\033[2m"; break;
  }
  return code + text + "\033[0m";
}

namespace {
long long NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Progress::Progress(std::string what, size_t total, bool bytes)
    : what_(std::move(what)), total_(total), bytes_(bytes), active_(isatty(STDERR_FILENO) != 0) {
  last_ms_ = NowMs();
}

Progress::~Progress() {
  if (active_) std::fprintf(stderr, "\r\033[K");
}

void Progress::Update(size_t done) {
  if (!active_) return;
  long long now = NowMs();
  if (now - last_ms_ < 100) return;
  last_ms_ = now;
  if (bytes_) {
    std::fprintf(stderr, "\r\033[K%s %s/%s", what_.c_str(), HumanBytes(done).c_str(), HumanBytes(total_).c_str());
  } else {
    std::fprintf(stderr, "\r\033[K%s %zu/%zu", what_.c_str(), done, total_);
  }
  std::fflush(stderr);
}

void Progress::Update(const std::string& what, size_t done, size_t total, bool bytes) {
  if (!active_) return;
  if (what != what_) last_ms_ = 0;  // a new phase shows at once
  what_ = what;
  total_ = total;
  bytes_ = bytes;
  Update(done);
}

}  // namespace replay::cli
