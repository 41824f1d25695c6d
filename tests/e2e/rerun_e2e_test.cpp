// End-to-end: one rank of a recorded job re-run alone (`replay rerun --rank`).
#include <algorithm>
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "e2e/e2e.h"

namespace replay {
namespace {

// Records the trainer at level data, from `dir`'s parent (so checkpoints land there).
RunResult RecordTrainer(const TempDir& tmp, int ranks, const std::string& args) {
  return Run("cd " + tmp.path() + " && " + Replay() + " record --level data -o " + (tmp / "t") + " -- " +
             Mpirun(ranks) + " " + MpiTrain() + " " + args);
}

RunResult Rerun(const TempDir& tmp, int rank, const std::string& args, const std::string& options = "") {
  return Run("cd " + tmp.path() + " && " + Replay() + " rerun " + (tmp / "t") + " --rank " + std::to_string(rank) +
             " " + options + " -- " + MpiTrain() + " " + args);
}

TEST_CASE("rerun prints exactly the rank's recorded lines, bit for bit, for an unseeded run", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 6 --fault unseeded";
  RunResult rec = RecordTrainer(tmp, 4, args);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  RunResult re = Rerun(tmp, 2, args);
  CheckRerunPrintsRecorded(rec, re, 2);
  // A second recording of the same unseeded job differs: the re-run is not luck.
  TempDir other;
  RunResult rec2 = RecordTrainer(other, 4, args);
  CHECK(Grep(rec2.output, "rank 2 final-params") != Grep(rec.output, "rank 2 final-params"));
}

TEST_CASE("rerun reproduces a NaN at the recorded step", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 5 --fault nan:rank=3,step=2";
  REQUIRE(RecordTrainer(tmp, 4, args).exit_code == 0);
  RunResult re = Rerun(tmp, 1, args);
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "step 2 rank 1 loss").size() == 1);
  CHECK(Grep(re.output, "step 3 rank 1 loss nan").size() + Grep(re.output, "step 3 rank 1 loss -nan").size() == 1);
}

TEST_CASE("rerun of a crashed rank stops where it died", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 6 --fault crash:rank=1,step=3";
  RecordTrainer(tmp, 2, args);
  RunResult re = Rerun(tmp, 1, args);
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "died of SIGSEGV").size() == 1);
  CHECK(Grep(re.output, "where the recorded rank 1 died of the same signal").size() == 1);
  CHECK(Grep(re.output, "step 3 rank 1").empty());
}

TEST_CASE("rerun of a hung rank stops in the call it never left", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 6 --fault hang:rank=1,step=3";
  Run("cd " + tmp.path() + " && timeout -s TERM 10 " + Replay() + " record --level data -o " + (tmp / "t") +
          " -- " + Mpirun(2) + " " + MpiTrain() + " " + args,
      30);
  RunResult re = Rerun(tmp, 0, args);
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "MPI_Allreduce").size() >= 1);
  CHECK(Grep(re.output, "never returned from").size() >= 1);
}

TEST_CASE("rerun stops at the first send that differs and names it", "[e2e]") {
  TempDir tmp;
  REQUIRE(RecordTrainer(tmp, 2, "--steps 4 --lr 0.1").exit_code == 0);
  // The same program computing differently: another learning rate changes the
  // parameters after step 1, hence the gradient sent at step 2.
  RunResult re = Rerun(tmp, 1, "--steps 4 --lr 0.3");
  INFO(re.output);
  CHECK(re.exit_code == 1);
  CHECK(Grep(re.output, "warning: the command differs").size() == 1);
  auto lines = Grep(re.output, "diverges from the recording");
  REQUIRE_FALSE(lines.empty());
  // Step 2's first send: the metrics reduction, which starts before the gradient's.
  CHECK(lines[0].find("MPI_Iallreduce") != std::string::npos);
  CHECK(lines[0].find("the data sent differs") != std::string::npos);
  CHECK(lines[0].find("seq=2") != std::string::npos);
  CHECK(Grep(re.output, "step 1 rank 1 loss").size() == 1);
  CHECK(Grep(re.output, "step 2 rank 1 loss").empty());
}

TEST_CASE("rerun from a checkpoint mark reproduces the rest", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 10 --ckpt-every 5 --fault unseeded";
  RunResult rec = RecordTrainer(tmp, 4, args);
  REQUIRE(rec.exit_code == 0);
  RunResult re = Rerun(tmp, 3, args + " --resume 5", "--from-mark checkpoint=5");
  INFO(re.output);
  CHECK(re.exit_code == 0);
  auto want = Grep(rec.output, "rank 3 loss");
  want.erase(std::remove_if(want.begin(), want.end(),
                            [](const std::string& l) {
                              for (int s = 1; s <= 5; ++s) {
                                if (l.rfind("step " + std::to_string(s) + " ", 0) == 0) return true;
                              }
                              return false;
                            }),
             want.end());
  REQUIRE(want.size() == 5);
  CHECK(Sorted(Grep(re.output, "rank 3 loss")) == Sorted(want));
}

TEST_CASE("rerun --stop-at stops at the event asked for", "[e2e]") {
  TempDir tmp;
  REQUIRE(RecordTrainer(tmp, 2, "--steps 5").exit_code == 0);
  RunResult re = Rerun(tmp, 0, "--steps 5", "--stop-at 40");
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "as asked with --stop-at 40").size() >= 1);
  CHECK(Grep(re.output, "step 5 rank 0").empty());
}

TEST_CASE("rerun refuses what it cannot re-run, saying why", "[e2e]") {
  TempDir tmp;
  RunResult hash = Run(Replay() + " record -o " + (tmp / "h") + " -- " + Mpirun(2) + " " + MpiTrain() + " --steps 2");
  REQUIRE(hash.exit_code == 0);
  RunResult r = Run(Replay() + " rerun " + (tmp / "h") + " --rank 0 -- " + MpiTrain() + " --steps 2");
  CHECK(r.exit_code == 2);
  CHECK(Grep(r.output, "--level data").size() == 1);

  REQUIRE(RecordTrainer(tmp, 2, "--steps 2").exit_code == 0);
  RunResult missing = Rerun(tmp, 7, "--steps 2");
  CHECK(missing.exit_code == 2);
  CHECK(Grep(missing.output, "rank 7 is not in").size() == 1);

  RunResult strict = Rerun(tmp, 0, "--steps 3", "--require-same-command");
  CHECK(strict.exit_code == 2);
  CHECK(Grep(strict.output, "the command differs").size() == 1);

  RunResult no_mark = Rerun(tmp, 0, "--steps 2", "--from-mark checkpoint=99");
  CHECK(no_mark.exit_code == 2);
  CHECK(Grep(no_mark.output, "recorded no mark checkpoint=99").size() == 1);

  // REPLAY_DISABLE=1 would leave the program unserved: said, not run.
  RunResult disabled = Run("REPLAY_DISABLE=1 " + Replay() + " rerun " + (tmp / "t") + " --rank 0 -- " + MpiTrain() +
                           " --steps 2");
  CHECK(disabled.exit_code == 2);
  CHECK(Grep(disabled.output, "REPLAY_DISABLE=1 is set").size() == 1);
  CHECK(Grep(disabled.output, "rank 0 loss").empty());
}

}  // namespace
}  // namespace replay

namespace replay {
namespace {

TEST_CASE("rerun --all reproduces a race every time, where plain runs differ", "[e2e]") {
  TempDir tmp;
  const std::string train = Mpirun(4) + " " + MpiTrain() + " --steps 6 --fault race";
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + train);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  const auto recorded = Sorted(Grep(rec.output, "final-params"));
  REQUIRE(recorded.size() == 4);
  for (int i = 0; i < 5; ++i) {
    RunResult re = Run(Replay() + " rerun " + (tmp / "t") + " --all -- " + train);
    INFO(re.output);
    CHECK(re.exit_code == 0);
    CHECK(Grep(re.output, "reproduced identically").size() == 1);
    CHECK(Sorted(Grep(re.output, "final-params")) == recorded);
  }
  int differ = 0;
  for (int i = 0; i < 5; ++i) {
    RunResult plain = Run(train);
    if (Sorted(Grep(plain.output, "final-params")) != recorded) ++differ;
  }
  CHECK(differ > 0);
}

TEST_CASE("rerun --all names the first divergence when a rank computes differently", "[e2e]") {
  TempDir tmp;
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + Mpirun(2) + " " + MpiTrain() + " --steps 4");
  REQUIRE(rec.exit_code == 0);
  RunResult re = Run(Replay() + " rerun " + (tmp / "t") + " --all -- " + Mpirun(2) + " " + MpiTrain() +
                     " --steps 4 --lr 0.3");
  INFO(re.output);
  CHECK(re.exit_code == 1);
  auto first = Grep(re.output, "first divergence");
  REQUIRE(first.size() == 1);
  CHECK(first[0].find("the data sent differs") != std::string::npos);
  // Each rank's first departure names the event, the call the program made
  // and the call the recording holds there, at the same index.
  std::smatch m;
  REQUIRE(std::regex_search(first[0], m, std::regex("at event #([0-9]+): the program called (MPI_[A-Za-z]+) .*Recorded: #([0-9]+) op (MPI_[A-Za-z]+)")));
  CHECK(m[1] == m[3]);
  CHECK(m[2] == m[4]);
  auto other = Grep(re.output, "first departed at event #");
  REQUIRE(other.size() == 1);
  CHECK(other[0].find("Recorded: #") != std::string::npos);
}

}  // namespace
}  // namespace replay

namespace replay {
namespace {

TEST_CASE("a data window keeps a long job affordable and re-runnable from its last checkpoint", "[e2e]") {
  TempDir tmp;
  const std::string args = "--steps 12 --ckpt-every 5 --fault unseeded";
  RunResult rec = Run("cd " + tmp.path() + " && REPLAY_DATA_WINDOW=marks:1 " + Replay() + " record --level data -o " +
                      (tmp / "t") + " -- " + Mpirun(2) + " " + MpiTrain() + " " + args);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  // From the start the early bytes are gone, and the re-run says so.
  RunResult from_start = Rerun(tmp, 1, args);
  CHECK(from_start.exit_code == 2);
  CHECK(Grep(from_start.output, "data window").size() >= 1);
  // From the last checkpoint everything is there.
  RunResult from_mark = Rerun(tmp, 1, args + " --resume 10", "--from-mark checkpoint=10");
  INFO(from_mark.output);
  CHECK(from_mark.exit_code == 0);
  auto want = Grep(rec.output, "rank 1 loss");
  want.erase(std::remove_if(want.begin(), want.end(),
                            [](const std::string& l) { return l.rfind("step 11 ", 0) != 0 && l.rfind("step 12 ", 0) != 0; }),
             want.end());
  REQUIRE(want.size() == 2);
  CHECK(Sorted(Grep(from_mark.output, "rank 1 loss")) == Sorted(want));
}

}  // namespace
}  // namespace replay

namespace replay {
namespace {

std::string EarlyEntropy() { return TestProgram("mpi_early_entropy"); }

TEST_CASE("entropy a library draws as it loads, before the preload's constructors, clock and CPU-time readings are served",
          "[e2e]") {
  TempDir tmp;
  RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + Mpirun(2) + " " + EarlyEntropy());
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  REQUIRE(Grep(rec.output, "rank 1 of 2").size() == 1);
  RunResult one = Run(Replay() + " rerun " + (tmp / "t") + " --rank 1 -- " + EarlyEntropy());
  INFO(one.output);
  CHECK(one.exit_code == 0);
  CHECK(Grep(one.output, "rank 1 of 2") == Grep(rec.output, "rank 1 of 2"));
  RunResult all = Run(Replay() + " rerun " + (tmp / "t") + " --all -- " + Mpirun(2) + " " + EarlyEntropy());
  INFO(all.output);
  CHECK(all.exit_code == 0);
  CHECK(Grep(all.output, "reproduced identically").size() == 1);
  CHECK(Sorted(Grep(all.output, " of 2: ")) == Sorted(Grep(rec.output, " of 2: ")));
}

TEST_CASE("a C program polling MPI_Test between slices of work re-runs alone and as a whole job", "[e2e]") {
  TempDir tmp;
  const std::string poll = TestProgram("mpi_poll");
  RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + Mpirun(3) + " " + poll);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  REQUIRE(Grep(rec.output, " of 3: acc ").size() == 3);
  // Alone: every poll answered as recorded, so the same number of polls and
  // the same bytes received.
  RunResult one = Run(Replay() + " rerun " + (tmp / "t") + " --rank 1 -- " + poll);
  INFO(one.output);
  CHECK(one.exit_code == 0);
  CHECK(Grep(one.output, "rank 1 of 3") == Grep(rec.output, "rank 1 of 3"));
  // The whole job: seeds served, so the same values; the polls are forced.
  RunResult all = Run(Replay() + " rerun " + (tmp / "t") + " --all -- " + Mpirun(3) + " " + poll);
  INFO(all.output);
  CHECK(all.exit_code == 0);
  CHECK(Grep(all.output, "reproduced identically").size() == 1);
  CHECK(Sorted(Grep(all.output, " of 3: acc ")) == Sorted(Grep(rec.output, " of 3: acc ")));
  // Unserved, the program draws other values: the re-run is not luck.
  RunResult plain = Run(Mpirun(3) + " " + poll);
  CHECK(Grep(plain.output, "rank 1 of 3") != Grep(rec.output, "rank 1 of 3"));
}

TEST_CASE("the recorded program is served however the command reaches it", "[e2e]") {
  TempDir tmp;
  // Recorded through a symlink with another name, as /usr/bin/python3 runs python3.11.
  REQUIRE(Run("ln -s " + EarlyEntropy() + " " + (tmp / "linked")).exit_code == 0);
  RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + Mpirun(2) + " " +
                      (tmp / "linked") + " --steps 1");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  const auto want = Grep(rec.output, "rank 0 of 2");
  REQUIRE(want.size() == 1);
  // A wrapper script that execs it, and `env`.
  REQUIRE(Run("printf '#!/bin/sh\\nexec " + EarlyEntropy() + " \"$@\"\\n' > " + (tmp / "wrap.sh") + " && chmod +x " +
              (tmp / "wrap.sh"))
              .exit_code == 0);
  for (const std::string& how : {EarlyEntropy(), tmp / "wrap.sh", "env EXTRA=1 " + EarlyEntropy()}) {
    RunResult re = Run(Replay() + " rerun " + (tmp / "t") + " --rank 0 -- " + how + " --steps 1");
    INFO(how << "\n" << re.output);
    CHECK(re.exit_code == 0);
    CHECK(Grep(re.output, "rank 0 of 2") == want);
  }
}

TEST_CASE("a re-run that reaches no process of the recorded program says what ran instead", "[e2e]") {
  TempDir tmp;
  RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + Mpirun(2) + " " + EarlyEntropy() +
                      " --steps 1");
  REQUIRE(rec.exit_code == 0);
  // The program itself, but started by a shell with other arguments than
  // recorded or given: it runs unserved, and the re-run says so.
  RunResult re = Run(Replay() + " rerun " + (tmp / "t") + " --rank 1 -- sh -c '" + EarlyEntropy() + " --steps 2'");
  INFO(re.output);
  CHECK(re.exit_code == 2);
  CHECK(Grep(re.output, "no process of the command ran the program rank 1 ran").size() == 1);
  CHECK(Grep(re.output, "recorded: ").size() == 1);
  auto instead = Grep(re.output, "--steps 2` (other arguments)");
  CHECK(instead.size() == 1);
  CHECK(Grep(re.output, "after event #-1").empty());
}

TEST_CASE("every intercepted MPI call re-runs: each end rank alone, and the whole job", "[e2e]") {
  // mpi_surface makes (nearly) every MPI call the recorder intercepts: groups,
  // topologies and their neighbourhood collectives, one-sided windows, probes,
  // persistent and non-blocking requests, and prints a checksum of all it received.
  const std::string surface = TestProgram("mpi_surface");
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + Mpirun(ranks) + " " + surface);
      INFO(rec.output);
      REQUIRE(rec.exit_code == 0);
      REQUIRE(Grep(rec.output, " checksum ").size() == static_cast<size_t>(ranks));
      for (int rank : {0, ranks - 1}) {
        const std::string mine = "rank " + std::to_string(rank) + " checksum ";
        RunResult one = Run(Replay() + " rerun " + (tmp / "t") + " --rank " + std::to_string(rank) + " -- " + surface);
        INFO("rank " << rank << "\n" << one.output);
        CHECK(one.exit_code == 0);
        CHECK(Grep(one.output, "replay rerun: reproduced").size() == 1);
        CHECK(Grep(one.output, mine) == Grep(rec.output, mine));
      }
      RunResult all = Run(Replay() + " rerun " + (tmp / "t") + " --all -- " + Mpirun(ranks) + " " + surface);
      INFO(all.output);
      CHECK(all.exit_code == 0);
      CHECK(Grep(all.output, "reproduced identically").size() == 1);
      CHECK(Sorted(Grep(all.output, " checksum ")) == Sorted(Grep(rec.output, " checksum ")));
      // Its communication alone re-issued completes too (a cancelled receive cancelled again).
      RunResult driven = Run(Replay() + " drive " + (tmp / "t") + " --timeout 60");
      INFO(driven.output);
      CHECK(driven.exit_code == 0);
      CHECK(Grep(driven.output, "completed after").size() == 1);
    }
  }
}

}  // namespace
}  // namespace replay
