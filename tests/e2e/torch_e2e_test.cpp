// End-to-end: PyTorch as Debian ships it (python3-torch, CPUs only) under the
// preload. Its DistributedDataParallel over gloo (tests/gpu/ddp_step.py
// --cpu, the device check's trainer), two ranks started as torchrun starts
// them (Debian's torchrun itself fails on Python 3.11), must print the same
// losses and parameters whether the preload records or was told to stay out
// of the way (REPLAY_DISABLE=1) as without it. Without a python3 that imports torch the
// test says SKIPPED (tools/install-deps.sh installs python3-torch).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "e2e/e2e.h"

namespace replay {
namespace {

// The Debian interpreter, whatever python3 is first on PATH.
constexpr const char* kPython = "/usr/bin/python3";

bool HaveTorch() { return Run(std::string(kPython) + " -c 'import torch.distributed'", 300).exit_code == 0; }

// Two ranks, with the variables torchrun sets; exits non-zero if either does.
std::string Torchrun(int port) {
  const std::string env = "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  const std::string rank = std::string(kPython) + " " + REPLAY_SOURCE_DIR "/tests/gpu/ddp_step.py 3 --cpu";
  return "sh -c \"" + env + " RANK=0 LOCAL_RANK=0 " + rank + " & a=\\$!; " + env + " RANK=1 LOCAL_RANK=1 " + rank +
         "; b=\\$?; wait \\$a; exit \\$((\\$? | b))\"";
}

std::vector<std::string> Results(const std::string& output) {
  std::vector<std::string> lines = Grep(output, "rank ");
  lines.erase(std::remove_if(lines.begin(), lines.end(),
                             [](const std::string& l) { return l.rfind("rank ", 0) != 0; }),
              lines.end());
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST_CASE("PyTorch's DDP over gloo runs under the preload as without it, recording or told to stay out",
          "[e2e][apps]") {
  if (!HaveTorch()) {
    std::printf("SKIPPED: %s cannot import torch (apt-get install python3-torch)\n", kPython);
    return;
  }
  TempDir tmp;
  RunResult plain = Run(Torchrun(29611), 300);
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  const std::vector<std::string> expected = Results(plain.output);
  REQUIRE(expected.size() == 2 * 4);  // 3 losses and the parameters, per rank

  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + Torchrun(29612), 300);
  INFO(rec.output);
  CHECK(rec.exit_code == 0);
  CHECK(Results(rec.output) == expected);
  CHECK(Grep(rec.output, "replay: ").size() <= 1);  // no warning, only the summary line if anything was recorded

  RunResult off = Run("REPLAY_DISABLE=1 LD_PRELOAD=" + testing::Preload() + " REPLAY_DIR=" + (tmp / "u") + " " +
                          Torchrun(29613),
                      300);
  INFO(off.output);
  CHECK(off.exit_code == 0);
  CHECK(Results(off.output) == expected);
  CHECK(Grep(off.output, "replay").empty());
  CHECK(Run("test -e " + (tmp / "u")).exit_code != 0);
}

}  // namespace
}  // namespace replay
