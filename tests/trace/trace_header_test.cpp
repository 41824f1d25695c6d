#include "replay/trace_header.h"

#include <catch2/catch.hpp>

namespace replay {
namespace {

TEST_CASE("a recorded command reads as a person would type it", "[trace]") {
  const std::vector<std::string> words = {"mpirun", "-np", "4", "./train", "--name", "two words", "it's", ""};
  CHECK(SplitCommand(JoinCommand(words)) == std::vector<std::string>(words.begin(), words.end() - 1));
  CHECK(CommandText({"mpirun", "-np", "4", "./train", "--lr=0.5"}) == "mpirun -np 4 ./train --lr=0.5");
  CHECK(CommandText({"python3", "-c", "print(1)"}) == "python3 -c 'print(1)'");
  CHECK(CommandText({"echo", "it's", ""}) == "echo 'it'\\''s' ''");
  // REPLAY_COMMAND as `replay record` sets it, and any other variable as it is.
  CHECK(EnvValueText("REPLAY_COMMAND", JoinCommand({"mpirun", "-np", "4"})) == "mpirun -np 4");
  CHECK(EnvValueText("NCCL_ALGO", "ring") == "ring");
}

}  // namespace
}  // namespace replay
