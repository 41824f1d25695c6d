// End-to-end: a trace's communication re-issued without the application (`replay drive`).
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e.h"

namespace replay {
namespace {

RunResult RecordTrainer(const TempDir& tmp, int ranks, const std::string& args, int timeout_s = 60) {
  return Run("timeout -s TERM " + std::to_string(timeout_s) + " " + Replay() + " record -o " + (tmp / "t") +
                 " -- " + Mpirun(ranks) + " " + MpiTrain() + " " + args,
             timeout_s + 30);
}

TEST_CASE("drive re-issues a clean trace to completion", "[e2e]") {
  TempDir tmp;
  REQUIRE(RecordTrainer(tmp, 4, "--steps 4").exit_code == 0);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --timeout 30");
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "completed").size() == 1);
  CHECK(Grep(d.output, "returned an error").size() == 4);
  CHECK(Grep(d.output, "0 returned an error").size() == 4);
}

TEST_CASE("drive reproduces a hang without the trainer and says who waits on whom", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp, 4, "--steps 6 --fault hang:rank=1,step=3", 10);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --timeout 5", 60);
  INFO(d.output);
  CHECK(d.exit_code == 1);
  CHECK(Grep(d.output, "hung").size() >= 1);
  auto missing = Grep(d.output, "rank 1 never entered MPI_Allreduce on dup(WORLD) #4");
  CHECK(missing.size() == 1);
}

TEST_CASE("drive reproduces a mismatched count without the trainer", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp, 4, "--steps 5 --fault mismatch:rank=2,step=3", 15);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --timeout 5", 60);
  INFO(d.output);
  CHECK(d.exit_code == 1);
  CHECK(Grep(d.output, "mismatched MPI_Allreduce on dup(WORLD) #4: rank 2 passes count 1024").size() == 1);
}

TEST_CASE("drive of a subset of ranks serves the rest from the trace", "[e2e]") {
  TempDir tmp;
  REQUIRE(RecordTrainer(tmp, 4, "--steps 3").exit_code == 0);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --ranks 0,2 --timeout 30");
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "served from the trace").size() >= 1);
}

TEST_CASE("drive refuses bad input with what to do", "[e2e]") {
  TempDir tmp;
  CHECK(Run(Replay() + " drive " + (tmp / "none")).exit_code == 2);
  REQUIRE(RecordTrainer(tmp, 2, "--steps 2").exit_code == 0);
  RunResult r = Run(Replay() + " drive " + (tmp / "t") + " --payload recorded");
  CHECK(r.exit_code == 2);
  CHECK(Grep(r.output, "level data").size() == 1);
}

}  // namespace
}  // namespace replay
