// End-to-end: nccl_train_host, the NCCL trainer built on the host stand-in, run
// under mpirun at 1, 2 and 4 ranks: deterministic, the same model as mpi_train,
// and each fault with the symptom README.md promises.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/run.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::Grep;
using testing::Run;
using testing::RunResult;

std::string Program(const std::string& name, int ranks, const std::string& args) {
  return testing::Mpirun(ranks) + " " + name + " --ckpt-every 0 " + args;
}
std::string NcclTrain(int ranks, const std::string& args) {
  return Program(testing::BuildPath("examples/nccl_train/nccl_train_host"), ranks, args);
}

// The training lines (steps, final parameters, accuracies), sorted: mpirun
// interleaves ranks differently from run to run.
std::vector<std::string> TrainingLines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("step ") || line.starts_with("rank ") || line.starts_with("group ")) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST_CASE("nccl_train_host prints the same lines on every run, and every rank ends with the same parameters",
          "[nccl_host]") {
  for (int ranks : {1, 2, 4}) {
    INFO("ranks " << ranks);
    const RunResult a = Run(NcclTrain(ranks, "--steps 6"));
    const RunResult b = Run(NcclTrain(ranks, "--steps 6"));
    INFO(a.output);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    CHECK(TrainingLines(a.output) == TrainingLines(b.output));
    CHECK(Grep(a.output, "EXIT-SUCCESS").size() == 1);
    CHECK(Grep(a.output, " loss ").size() == static_cast<size_t>(6 * ranks));
    CHECK(Grep(a.output, "global-loss").size() == 6);
    const std::vector<std::string> finals = Grep(a.output, "final-params");
    REQUIRE(finals.size() == static_cast<size_t>(ranks));
    std::set<std::string> hashes;
    for (const std::string& line : finals) hashes.insert(line.substr(line.rfind(' ')));
    CHECK(hashes.size() == 1);
    CHECK(Grep(a.output, "accuracy").size() == static_cast<size_t>(std::min(ranks, 2)));
  }
}

TEST_CASE("nccl_train_host trains mpi_train's model: the same losses, accuracies and parameters", "[nccl_host]") {
  // Sums of two floats do not depend on the order MPI adds them in; past two ranks
  // MPI's blocking and non-blocking allreduce may add in different orders.
  for (int ranks : {1, 2}) {
    INFO("ranks " << ranks);
    const RunResult nccl = Run(NcclTrain(ranks, "--steps 8 --params 300"));
    const RunResult mpi = Run(Program(testing::MpiTrain(), ranks, "--steps 8 --params 300"));
    REQUIRE(nccl.exit_code == 0);
    REQUIRE(mpi.exit_code == 0);
    CHECK(TrainingLines(nccl.output) == TrainingLines(mpi.output));
  }
}

TEST_CASE("the nan fault reaches every rank's loss from the next step on", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(4, "--steps 4 --fault nan:rank=3,step=2"));
  REQUIRE(r.exit_code == 0);
  // printf writes a NaN with its sign bit as "-nan"; which one the sum ends
  // with depends on how the compiler ordered the arithmetic.
  auto nan_lines = [&](const std::string& prefix) {
    return Grep(r.output, prefix + " loss nan").size() + Grep(r.output, prefix + " loss -nan").size();
  };
  CHECK(nan_lines("step 2 rank 0") == 0);
  for (const char* rank : {"0", "1", "2", "3"}) CHECK(nan_lines(std::string("step 3 rank ") + rank) == 1);
}

TEST_CASE("the unseeded fault makes two runs differ", "[nccl_host]") {
  const RunResult a = Run(NcclTrain(2, "--steps 3 --fault unseeded"));
  const RunResult b = Run(NcclTrain(2, "--steps 3 --fault unseeded"));
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  CHECK(TrainingLines(a.output) != TrainingLines(b.output));
}

TEST_CASE("the crash fault kills the job with SIGSEGV at its step", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(2, "--steps 6 --fault crash:rank=1,step=3"), 60);
  CHECK(r.exit_code != 0);
  CHECK(Grep(r.output, "step 3 rank 1 loss").empty());
  CHECK(!Grep(r.output, "signal 11").empty());
}

TEST_CASE("the hang fault leaves the job waiting from its step on", "[nccl_host]") {
  for (int ranks : {2, 4}) {
    INFO("ranks " << ranks);
    const RunResult r = Run(NcclTrain(ranks, "--steps 6 --fault hang:rank=1,step=3"), 15);
    CHECK(r.exit_code == 124);
    CHECK(Grep(r.output, "step 2 rank 0 loss").size() == 1);
    CHECK(Grep(r.output, "step 3 rank").empty());
  }
}

TEST_CASE("the mismatch fault makes Open MPI under the stand-in abort the job at its step", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(2, "--steps 6 --fault mismatch:rank=1,step=3"), 30);
  CHECK(r.exit_code != 0);
  CHECK(r.exit_code != 124);
  CHECK(Grep(r.output, "step 2 rank 1 loss").size() == 1);
  CHECK(Grep(r.output, "step 3 rank").empty());
  // The truncated message, named by libnbc's progress engine and, when mpirun's
  // help output survives the abort, by the error handler as MPI_ERR_TRUNCATE.
  CHECK(Grep(r.output, "NBC_Progress: an error 15 was found").size() + Grep(r.output, "MPI_ERR_TRUNCATE").size() > 0);
}

TEST_CASE("the order fault deadlocks two communicators at 4 ranks", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(4, "--steps 6 --fault order:rank=1,step=3"), 15);
  CHECK(r.exit_code == 124);
  CHECK(Grep(r.output, "step 3 rank").empty());
}

TEST_CASE("the device fault puts two ranks on one device, which NCCL refuses at init", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(2, "--steps 3 --fault device:rank=1"), 60);
  CHECK(r.exit_code != 0);
  CHECK(!Grep(r.output, "ncclCommInitRank").empty());
  CHECK(!Grep(r.output, "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 0").empty());
  CHECK(Grep(r.output, "step 1 rank").empty());
  // At one rank there is no other rank to share with.
  CHECK(Run(NcclTrain(1, "--steps 2 --fault device")).exit_code == 0);
}

TEST_CASE("a run resumed from a checkpoint prints an uninterrupted run's lines", "[nccl_host]") {
  testing::TempDir tmp;
  const std::string dir = " --ckpt-dir " + tmp.path();
  const RunResult whole = Run(NcclTrain(2, "--steps 6"));
  REQUIRE(Run(NcclTrain(2, "--steps 3 --ckpt-every 3" + dir)).exit_code == 0);
  const RunResult resumed = Run(NcclTrain(2, "--steps 6 --resume 3" + dir));
  REQUIRE(resumed.exit_code == 0);
  std::vector<std::string> tail;
  for (const std::string& line : TrainingLines(whole.output)) {
    if (!line.starts_with("step 1 ") && !line.starts_with("step 2 ") && !line.starts_with("step 3 ")) {
      tail.push_back(line);
    }
  }
  CHECK(TrainingLines(resumed.output) == tail);
}

TEST_CASE("a bad option or fault exits 2 with one line", "[nccl_host]") {
  const RunResult option = Run(NcclTrain(2, "--steps 0"));
  CHECK(option.exit_code == 2);
  CHECK(Grep(option.output, "nccl_train: bad value '0' for --steps").size() == 1);
  const RunResult unknown = Run(NcclTrain(2, "--fault bogus"));
  CHECK(unknown.exit_code == 2);
  CHECK(Grep(unknown.output, "nccl_train: unknown fault 'bogus' (expected hang, mismatch, order, nan, unseeded, "
                             "crash or device)").size() == 1);
  const RunResult device = Run(NcclTrain(2, "--fault device:step=3"));
  CHECK(device.exit_code == 2);
  CHECK(Grep(device.output, "nccl_train: bad fault parameter 'step=3'").size() == 1);
}

TEST_CASE("mpi_train's race fault is refused: NCCL has no wildcard receive", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(2, "--fault race"));
  CHECK(r.exit_code == 2);
  CHECK(Grep(r.output, "nccl_train: fault 'race' is mpi_train's only").size() == 1);
  CHECK(Grep(r.output, "step 1 rank").empty());
}

TEST_CASE("the help text lists mpi_train's options and the faults nccl_train takes", "[nccl_host]") {
  const RunResult r = Run(NcclTrain(1, "--help"));
  CHECK(r.exit_code == 0);
  CHECK(Grep(r.output, "usage: mpirun -n N nccl_train").size() == 1);
  CHECK(Grep(r.output, "--resume STEP").size() == 1);
  CHECK(Grep(r.output, "  device    rank R").size() == 1);
  CHECK(Grep(r.output, "  race ").empty());
}

}  // namespace
}  // namespace replay
