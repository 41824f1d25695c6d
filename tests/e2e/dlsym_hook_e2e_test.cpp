// End-to-end: the preload's dlsym (interpose/dlsym_hook.h) changes no lookup
// but those of the CUDA driver functions it wraps. tests/e2e/programs/
// dlsym_program prints what its lookups found, by object; it must print the
// same with the preload as without.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e.h"

namespace replay {
namespace {

std::string Program() { return testing::TestProgram("dlsym_program"); }

RunResult Preloaded(const std::string& trace_dir) {
  return Run("REPLAY_DIR=" + trace_dir + " LD_PRELOAD=" + testing::Preload() + " " + Program());
}

TEST_CASE("dlsym(RTLD_NEXT) from a library finds the next library's definition under the preload", "[e2e][dlsym]") {
  TempDir tmp;
  RunResult plain = Run(Program());
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(Grep(plain.output, "who 102").size() == 1);
  RunResult pre = Preloaded(tmp / "t");
  INFO(pre.output);
  REQUIRE(pre.exit_code == 0);
  // 102: the first library's answer over the second's. Resolved against the
  // wrong caller, RTLD_NEXT would find the first library's own definition.
  CHECK(Grep(pre.output, "who 102").size() == 1);
  // The error names the library that asked.
  CHECK(Grep(pre.output, "next-error libdlsym_first.so: undefined symbol: replay_test_nowhere").size() == 1);
}

TEST_CASE("every lookup of a program without CUDA finds under the preload what it finds without", "[e2e][dlsym]") {
  TempDir tmp;
  RunResult plain = Run(Program());
  REQUIRE(plain.exit_code == 0);
  RunResult pre = Preloaded(tmp / "t");
  REQUIRE(pre.exit_code == 0);
  CHECK(pre.output == plain.output);
  CHECK(Grep(plain.output, "default replay_test_who libdlsym_first.so error=none").size() == 1);
  CHECK(Grep(plain.output, "default-is-linked yes").size() == 1);
  CHECK(Grep(plain.output, "next replay_test_who libdlsym_first.so error=none").size() == 1);
  CHECK(Grep(plain.output, "handle replay_test_who libdlsym_second.so error=none").size() == 1);
  CHECK(Grep(plain.output, "default cuGetProcAddress_v2 null error=").size() == 1);
  CHECK(Grep(plain.output, "error=dlsym_program: undefined symbol: replay_test_nowhere").size() == 1);
  // Nothing was recorded: the program made no call that starts a recording.
  CHECK(Run("test -e " + (tmp / "t")).exit_code != 0);
}

}  // namespace
}  // namespace replay
