#include "replay/settings.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>

#include "support/temp_dir.h"

namespace replay {
namespace {

TEST_CASE("settings take their defaults when unset", "[util]") {
  Settings s = Settings::From([](const char*) -> const char* { return nullptr; });
  CHECK(s.dir == "replay-trace");
  CHECK(s.level == "hash");
  CHECK(*s.ParsedLevel() == Level::kHash);
  CHECK(*s.Integer("flush_ms") == 1000);
}

TEST_CASE("malformed settings are refused with the variable's name", "[util]") {
  std::map<std::string, std::string> env = {{"REPLAY_LEVEL", "everything"}, {"REPLAY_FLUSH_MS", "soon"}};
  Settings s = Settings::From([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  CHECK(s.ParsedLevel().status().message().find("REPLAY_LEVEL=everything") != std::string::npos);
  CHECK(s.Integer("flush_ms").status().message().find("REPLAY_FLUSH_MS=soon") != std::string::npos);
}

TEST_CASE("environment prefixes split on commas", "[util]") {
  Settings s;
  s.env_prefixes = "OMPI_,,NCCL_,RANK";
  CHECK(s.EnvPrefixes() == std::vector<std::string>{"OMPI_", "NCCL_", "RANK"});
}

TEST_CASE("the README lists every setting with its default", "[util]") {
  std::string readme = testing::ReadFile(std::string(REPLAY_SOURCE_DIR) + "/README.md");
  REQUIRE_FALSE(readme.empty());
  for (const SettingInfo& s : AllSettings()) {
    INFO(s.name);
    std::string def = *s.default_value ? std::string("`") + s.default_value + "`" : "(empty)";
    CHECK(readme.find(std::string("| `") + s.name + "` | " + def + " |") != std::string::npos);
  }
}

}  // namespace
}  // namespace replay
