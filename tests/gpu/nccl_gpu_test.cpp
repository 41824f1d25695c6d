// GPU: examples/nccl_train on CUDA and real NCCL, one rank per GPU, recorded,
// checked and re-run. Skipped (reported as skipped by ctest) on machines
// without an NVIDIA GPU.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"
#include "util/json.h"

namespace replay {
namespace {

bool HaveGpu() {
  if (access("/dev/nvidia0", F_OK) != 0) return false;
  return Run("nvidia-smi -L", 30).exit_code == 0;
}

#define REQUIRE_GPU()                                                                  \
  do {                                                                                 \
    if (!HaveGpu()) {                                                                  \
      std::printf("SKIPPED: no NVIDIA GPU on this machine (no /dev/nvidia0 or nvidia-smi)\n"); \
      return;                                                                          \
    }                                                                                  \
  } while (0)

std::string NcclTrain() { return testing::BuildPath("examples/nccl_train/nccl_train"); }

// One rank: under mpirun where there is one, otherwise a singleton MPI process
// (a GPU machine without Open MPI installed, running a carried build with
// OMPI_MCA_ess_singleton_isolated=1; see tests/gpu/device_check.sh).
std::string OneRank() { return Run("command -v mpirun", 10).exit_code == 0 ? Mpirun(1) + " " : std::string(); }

TEST_CASE("a CUDA + NCCL job is recorded with device buffers, completions seen on the GPU, and re-runs",
          "[gpu]") {
  REQUIRE_GPU();
  TempDir tmp;
  const std::string args = "--ckpt-every 0 --steps 4 --fault unseeded";
  RunResult rec = Run("cd " + tmp.path() + " && " + Replay() + " record --level data -o " + (tmp / "t") + " -- " +
                      OneRank() + NcclTrain() + " " + args, 300);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  auto trace = TraceReader::Open(tmp / "t");
  REQUIRE(trace.ok());
  auto r = (*trace)->OpenRank(0);
  REQUIRE(r.ok());
  std::map<uint64_t, const Event*> pending;
  int device_ops = 0;
  for (const Event& e : (*r)->events()) {
    if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kDevice) != 0) {
      ++device_ops;
      pending[e.op.request] = &e;
    } else if (e.kind == EventKind::kCompletion) {
      pending.erase(e.completion.request);
    }
  }
  CHECK(device_ops >= 4 * 3);
  CHECK(pending.empty());  // every GPU operation was seen to complete
  RunResult check = Run(Replay() + " check " + (tmp / "t"), 60);
  INFO(check.output);
  CHECK(check.exit_code == 0);
  RunResult re = Run("cd " + tmp.path() + " && " + Replay() + " rerun " + (tmp / "t") + " --rank 0 -- " +
                     NcclTrain() + " " + args, 300);
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "rank 0 final-params") == Grep(rec.output, "rank 0 final-params"));
}

}  // namespace
}  // namespace replay
