// Recognising the recorded program among the processes of a re-run
// (record/program_identity.h).
#include <limits.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "record/program_identity.h"

namespace replay {
namespace {

ProgramIdentity Python(std::vector<std::string> argv) {
  return ProgramIdentity{"/usr/bin/python3.11", "5f0c1b6e8a2d", std::move(argv)};
}

TEST_CASE("this process is named by its resolved executable, build id and arguments", "[record]") {
  ProgramIdentity me = ThisProcess();
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  REQUIRE(n > 0);
  CHECK(me.executable == std::string(exe, static_cast<size_t>(n)));
  // The toolchain gives every program a build id; it is hex.
  REQUIRE(me.build_id.size() >= 16);
  CHECK(me.build_id.find_first_not_of("0123456789abcdef") == std::string::npos);
  REQUIRE_FALSE(me.argv.empty());
  CHECK(me.argv[0].find("program_identity_test") != std::string::npos);
}

TEST_CASE("a program started through a symlink or another name is the recorded one", "[record]") {
  ProgramIdentity recorded = Python({"python3", "train.py", "--steps", "3"});
  CHECK(RunsRecordedProgram(Python({"/usr/bin/python3", "train.py", "--steps", "3"}), recorded, {}));
  CHECK(RunsRecordedProgram(Python({"/venv/bin/python", "train.py", "--steps", "3"}), recorded, {}));
  CHECK(WhyNotRecordedProgram(Python({"python3", "train.py", "--steps", "3"}), recorded, {}).empty());
}

TEST_CASE("the same interpreter running something else is not the recorded program", "[record]") {
  ProgramIdentity recorded = Python({"python3", "train.py"});
  ProgramIdentity launcher = Python({"python3", "launch.py", "train.py"});
  CHECK_FALSE(RunsRecordedProgram(launcher, recorded, {}));
  CHECK(WhyNotRecordedProgram(launcher, recorded, {}) == "other arguments");
  ProgramIdentity module = Python({"python3", "-m", "mpi4py.bench", "ringtest"});
  CHECK_FALSE(RunsRecordedProgram(module, recorded, {}));
  CHECK(RunsRecordedProgram(module, Python({"python3", "-m", "mpi4py.bench", "ringtest"}), {}));
}

TEST_CASE("the arguments the user gave the re-run count as well as the recorded ones", "[record]") {
  ProgramIdentity recorded{"/work/build/train", "aa01", {"./train", "--lr", "0.1"}};
  ProgramIdentity changed{"/work/build/train", "aa01", {"./train", "--lr", "0.3"}};
  CHECK_FALSE(RunsRecordedProgram(changed, recorded, {}));
  CHECK(RunsRecordedProgram(changed, recorded, {"--lr", "0.3"}));
}

TEST_CASE("a rebuilt program is recognised by its name, another program with the same arguments is not",
          "[record]") {
  ProgramIdentity recorded{"/work/build/train", "aa01", {"./train", "--steps", "3"}};
  ProgramIdentity rebuilt{"/work/build-debug/train", "bb02", {"build-debug/train", "--steps", "3"}};
  CHECK(RunsRecordedProgram(rebuilt, recorded, {}));
  ProgramIdentity wrapper{"/usr/bin/bash", "cc03", {"bash", "--steps", "3"}};
  CHECK_FALSE(RunsRecordedProgram(wrapper, recorded, {"--steps", "3"}));
  CHECK(WhyNotRecordedProgram(wrapper, recorded, {}) == "another executable");
}

TEST_CASE("a recording without its executable is recognised by the name it was started by", "[record]") {
  ProgramIdentity recorded{"", "", {"/usr/bin/python3", "train.py"}};
  ProgramIdentity resolved{"/usr/bin/python3.11", "5f0c", {"python3", "train.py"}};
  CHECK(RunsRecordedProgram(resolved, recorded, {}));
  ProgramIdentity other{"/usr/bin/perl", "77", {"perl", "train.py"}};
  CHECK_FALSE(RunsRecordedProgram(other, recorded, {}));
}

TEST_CASE("identities and arguments survive the environment encoding", "[record]") {
  std::vector<ProgramIdentity> ids = {Python({"python3", "train.py", "--name", "a b", ""}),
                                      ProgramIdentity{"/bin/x", "", {}}, ProgramIdentity{"", "", {"./y"}}};
  std::vector<ProgramIdentity> back = DecodeIdentities(EncodeIdentities(ids));
  REQUIRE(back.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(back[i].executable == ids[i].executable);
    CHECK(back[i].build_id == ids[i].build_id);
    CHECK(back[i].argv == ids[i].argv);
  }
  CHECK(DecodeIdentities("").empty());
  std::vector<std::string> args = {"--lr", "0.3", "a b"};
  CHECK(DecodeArgs(EncodeArgs(args)) == args);
  CHECK(DecodeArgs(EncodeArgs({})).empty());
}

}  // namespace
}  // namespace replay
