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

// `replay drive` with `options` of a clean recording of the trainer, 4 ranks
// for `steps` steps.
RunResult DriveClean(const TempDir& tmp, int steps, const std::string& options) {
  REQUIRE(RecordTrainer(tmp, 4, "--steps " + std::to_string(steps)).exit_code == 0);
  return Run(Replay() + " drive " + (tmp / "t") + " " + options);
}

// `replay drive` of the trainer at 4 ranks with `args`, which fail: its
// recording is stopped after `record_timeout_s`, and the drive has `--timeout 5`.
RunResult DriveFaulty(const TempDir& tmp, const std::string& args, int record_timeout_s) {
  RecordTrainer(tmp, 4, args, record_timeout_s);
  return Run(Replay() + " drive " + (tmp / "t") + " --timeout 5", 60);
}

TEST_CASE("drive re-issues a clean trace to completion", "[e2e]") {
  TempDir tmp;
  RunResult d = DriveClean(tmp, 4, "--timeout 30");
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "completed").size() == 1);
  CHECK(Grep(d.output, "returned an error").size() == 4);
  CHECK(Grep(d.output, "0 returned an error").size() == 4);
}

TEST_CASE("drive reproduces a hang without the trainer and says who waits on whom", "[e2e]") {
  TempDir tmp;
  RunResult d = DriveFaulty(tmp, "--steps 6 --fault hang:rank=1,step=3", 10);
  INFO(d.output);
  CHECK(d.exit_code == 1);
  CHECK(Grep(d.output, "hung").size() >= 1);
  auto missing = Grep(d.output, "rank 1 never entered MPI_Allreduce on dup(WORLD) #4");
  CHECK(missing.size() == 1);
}

TEST_CASE("drive reproduces a mismatched count without the trainer", "[e2e]") {
  TempDir tmp;
  RunResult d = DriveFaulty(tmp, "--steps 5 --fault mismatch:rank=2,step=3", 15);
  INFO(d.output);
  CHECK(d.exit_code == 1);
  CHECK(Grep(d.output, "mismatched MPI_Allreduce on dup(WORLD) #4: rank 2 passes count 1024").size() == 1);
}

TEST_CASE("drive of a subset of ranks serves the rest from the trace", "[e2e]") {
  TempDir tmp;
  RunResult d = DriveClean(tmp, 3, "--ranks 0,2 --timeout 30");
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
