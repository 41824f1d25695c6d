// spdlog is compiled into this file alone, header-only with fmt header-only
// (libreplay/CMakeLists.txt), so neither the command nor the preload needs a
// shared library more: a preloaded process loads nothing it did not before.
#include "util/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include "replay/settings.h"

namespace replay::log {
namespace {

// stderr through write(2), one write per line.
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t out;
    formatter_->format(msg, out);
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t n = ::write(STDERR_FILENO, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  void flush_() override {}
};

spdlog::level::level_enum ToSpdlog(Level level) {
  switch (level) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: break;
  }
  return spdlog::level::off;
}

struct State {
  Level threshold = Level::kWarn;
  bool unknown = false;
  std::string name;
  spdlog::logger* logger = nullptr;
};

State& Get() {
  // Never destroyed: a rank may log while the process exits.
  static State* s = [] {
    auto* st = new State();
    const char* env = std::getenv(setting_names::log);
    if (env != nullptr && *env != '\0' && !ParseLevel(env, &st->threshold)) {
      st->unknown = true;
      st->name = env;
    }
    auto sink = std::make_shared<StderrSink>();
    st->logger = new spdlog::logger("replay", std::move(sink));
    st->logger->set_pattern("%v");
    st->logger->set_level(ToSpdlog(st->threshold));
    return st;
  }();
  return *s;
}

}  // namespace

bool ParseLevel(std::string_view name, Level* level) {
  struct Row {
    std::string_view name;
    Level level;
  };
  static constexpr Row kRows[] = {{"trace", Level::kTrace}, {"debug", Level::kDebug}, {"info", Level::kInfo},
                                  {"warn", Level::kWarn},   {"warning", Level::kWarn}, {"error", Level::kError},
                                  {"off", Level::kOff}};
  for (const Row& r : kRows) {
    if (r.name == name) {
      *level = r.level;
      return true;
    }
  }
  return false;
}

Level Threshold() { return Get().threshold; }

void Write(Level level, std::string_view line) {
  State& s = Get();
  if (s.unknown) {
    static std::once_flag told;
    std::call_once(told, [&] {
      s.logger->log(spdlog::level::warn, "replay: REPLAY_LOG={} is not one of off, error, warn, info, debug, trace; "
                                         "warn is used",
                    s.name);
    });
  }
  if (!Enabled(level)) return;
  s.logger->log(ToSpdlog(level), "{}", line);
}

}  // namespace replay::log
