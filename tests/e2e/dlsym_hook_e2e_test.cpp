// End-to-end: the preload's dlsym (interpose/dlsym_hook.h) changes no lookup
// but those of the CUDA driver functions it wraps. tests/e2e/programs/
// dlsym_program prints what its lookups found, by object; it must print the
// same with the preload as without.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e.h"

namespace replay {
namespace {

std::string Program() { return TestProgram("dlsym_program"); }

// What the program printed, run plainly and under the preload (recording, if
// anything, to `trace_dir`); both runs must succeed.
struct Printed {
  std::string plain;
  std::string preloaded;
};

Printed RunPlainAndPreloaded(const std::string& trace_dir) {
  Printed out;
  out.plain = Succeeded(Program());
  out.preloaded = Succeeded("REPLAY_DIR=" + trace_dir + " LD_PRELOAD=" + testing::Preload() + " " + Program());
  return out;
}

TEST_CASE("dlsym(RTLD_NEXT) from a library finds the next library's definition under the preload", "[e2e][dlsym]") {
  TempDir tmp;
  const Printed out = RunPlainAndPreloaded(tmp / "t");
  INFO("plain:\n" << out.plain << "preloaded:\n" << out.preloaded);
  REQUIRE(Grep(out.plain, "who 102").size() == 1);
  // 102: the first library's answer over the second's. Resolved against the
  // wrong caller, RTLD_NEXT would find the first library's own definition.
  CHECK(Grep(out.preloaded, "who 102").size() == 1);
  // The error names the library that asked.
  CHECK(Grep(out.preloaded, "next-error libdlsym_first.so: undefined symbol: replay_test_nowhere").size() == 1);
}

TEST_CASE("every lookup of a program without CUDA finds under the preload what it finds without", "[e2e][dlsym]") {
  TempDir tmp;
  const Printed out = RunPlainAndPreloaded(tmp / "t");
  CHECK(out.preloaded == out.plain);
  CheckOneLineEach(out.plain, {"default replay_test_who libdlsym_first.so error=none", "default-is-linked yes",
                               "next replay_test_who libdlsym_first.so error=none",
                               "handle replay_test_who libdlsym_second.so error=none",
                               "default cuGetProcAddress_v2 null error=",
                               "error=dlsym_program: undefined symbol: replay_test_nowhere"});
  // Nothing was recorded: the program made no call that starts a recording.
  CHECK(Run("test -e " + (tmp / "t")).exit_code != 0);
}

}  // namespace
}  // namespace replay
