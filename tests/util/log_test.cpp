// The levels REPLAY_LOG names (util/log.h).
#include <catch2/catch.hpp>

#include "util/log.h"

namespace replay::log {
namespace {

TEST_CASE("REPLAY_LOG's level names parse, and an unknown one does not", "[util]") {
  struct Row {
    const char* name;
    Level level;
  };
  for (Row r : {Row{"trace", Level::kTrace}, Row{"debug", Level::kDebug}, Row{"info", Level::kInfo},
                Row{"warn", Level::kWarn}, Row{"warning", Level::kWarn}, Row{"error", Level::kError},
                Row{"off", Level::kOff}}) {
    INFO(r.name);
    Level got = Level::kTrace;
    CHECK(ParseLevel(r.name, &got));
    CHECK(got == r.level);
  }
  Level kept = Level::kError;
  for (const char* bad : {"", "WARN", "loud", "warn "}) {
    INFO(bad);
    CHECK_FALSE(ParseLevel(bad, &kept));
    CHECK(kept == Level::kError);
  }
}

TEST_CASE("the levels order from the most said to nothing", "[util]") {
  CHECK(Level::kTrace < Level::kDebug);
  CHECK(Level::kDebug < Level::kInfo);
  CHECK(Level::kInfo < Level::kWarn);
  CHECK(Level::kWarn < Level::kError);
  CHECK(Level::kError < Level::kOff);
}

}  // namespace
}  // namespace replay::log
