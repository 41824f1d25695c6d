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

Progress::~Progress() { Clear(); }

void Progress::Clear() {
  if (active_ && shown_) std::fprintf(stderr, "\r\033[K");
  shown_ = false;
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
  shown_ = true;
}

namespace {
// "12.4 M", "830 k", "512".
std::string Count(uint64_t n) {
  char buf[32];
  if (n >= 1000000) {
    std::snprintf(buf, sizeof(buf), "%.1f M", static_cast<double>(n) / 1e6);
  } else if (n >= 10000) {
    std::snprintf(buf, sizeof(buf), "%.0f k", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(n));
  }
  return buf;
}
}  // namespace

void Progress::Update(const ReadProgress& p) {
  if (!active_) return;
  long long now = NowMs();
  if (now - last_ms_ < 100 && p.ranks_done < p.ranks) return;
  last_ms_ = now;
  std::string events = Count(p.events_done) + (p.events > 0 ? "/" + Count(p.events) : "") + " events";
  std::fprintf(stderr, "\r\033[K%s %zu/%zu ranks, %s", what_.c_str(), p.ranks_done, p.ranks, events.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Phase(const std::string& what) {
  what_ = what;
  last_ms_ = 0;
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
