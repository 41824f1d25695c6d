// The corpus: real MPI programs nobody here wrote, installed from Debian
// packages by tools/install-deps.sh, plus a numpy + mpi4py trainer written
// the way real ones are. For each, at 2 and 4 ranks: recorded at level data,
// `check` finds nothing, `rerun --rank R` for the first and the last rank
// prints exactly that rank's deterministic output of the recording, `rerun
// --all` says it reproduced, and `drive` completes.
//
// ctest label `corpus`: run once, in the plain build (tools/test.sh leaves it
// out of the sanitizer pass).
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "e2e/e2e.h"

namespace replay {
namespace {

struct Program {
  std::string name;
  std::string env;    // set for the recording and every re-run
  std::string setup;  // shell commands run in the directory first (inputs)
  // The command of one rank.
  std::function<std::string(int ranks)> command;
  // What rank `rank` prints (or writes) that depends only on its inputs:
  // results, residuals, energies; not timings.
  std::function<std::vector<std::string>(const std::string& output, const TempDir& dir, int rank)> deterministic;
};

std::string Source(const std::string& relative) { return std::string(REPLAY_SOURCE_DIR) + "/" + relative; }

// Lines that name the rank, as "rank R " or "process R of".
std::vector<std::string> LinesOf(const std::string& output, const std::string& needle) {
  return Sorted(Grep(output, needle));
}

std::vector<Program> Corpus() {
  return {
      Program{"a numpy + mpi4py trainer", "", "",
              [](int) { return "/usr/bin/python3 " + Source("tests/e2e/programs/mpi4py_train.py") + " --steps 4"; },
              [](const std::string& out, const TempDir&, int rank) {
                std::vector<std::string> v = LinesOf(out, "rank " + std::to_string(rank) + " ");
                if (rank == 0) {
                  for (const std::string& l : Grep(out, "stats ")) v.push_back(l);
                }
                return v;
              }},
      Program{"mpi4py's helloworld, run as a module", "", "",
              [](int) { return std::string("/usr/bin/python3 -m mpi4py.bench helloworld"); },
              [](const std::string& out, const TempDir&, int rank) {
                return LinesOf(out, "I am process " + std::to_string(rank) + " of");
              }},
      Program{"mpi4py's ring test, run as a module", "", "",
              [](int) { return std::string("/usr/bin/python3 -m mpi4py.bench ringtest -n 64 -l 20"); },
              [](const std::string& out, const TempDir&, int rank) {
                // Only timings are printed, by rank 0: the verdict is what counts.
                (void)out;
                (void)rank;
                return std::vector<std::string>{};
              }},
      // PT-Scotch partitions a 2D mesh; its random generator is seeded from the
      // clock, and its matching uses wildcard receives. Its threads race by
      // design, which no re-run controls: one thread per rank.
      Program{"PT-Scotch's dgpart", "SCOTCH_PTHREAD_NUMBER=1", "gmk_m2 40 40 mesh.grf",
              [](int ranks) { return "dgpart " + std::to_string(ranks) + " mesh.grf parts.map"; },
              [](const std::string&, const TempDir& dir, int rank) {
                // Rank 0 writes the partition.
                if (rank != 0) return std::vector<std::string>{};
                return std::vector<std::string>{testing::ReadFile(dir / "parts.map")};
              }},
      // LAMMPS melts a Lennard-Jones crystal (its own "melt" example): spatial
      // decomposition with halo exchanges, velocities from its seeded generator,
      // and CPU time (getrusage) reduced across ranks for its timing summary.
      Program{"LAMMPS's Lennard-Jones melt", "",
              "printf 'units lj\\natom_style atomic\\nlattice fcc 0.8442\\nregion box block 0 6 0 6 0 6\\n"
              "create_box 1 box\\ncreate_atoms 1 box\\nmass 1 1.0\\nvelocity all create 3.0 87287 loop geom\\n"
              "pair_style lj/cut 2.5\\npair_coeff 1 1 1.0 1.0 2.5\\nneighbor 0.3 bin\\n"
              "neigh_modify every 20 delay 0 check no\\nfix 1 all nve\\nthermo 25\\nrun 100\\n' > in.melt",
              [](int) { return std::string("lmp -in in.melt -log none"); },
              [](const std::string& out, const TempDir&, int rank) {
                // Rank 0 prints the thermodynamics, from the header to the loop time.
                std::vector<std::string> v;
                if (rank != 0) return v;
                bool in_table = false;
                for (const std::string& l : Grep(out, "")) {
                  if (l.rfind("Step ", 0) == 0) in_table = true;
                  if (l.rfind("Loop time", 0) == 0) in_table = false;
                  if (in_table) v.push_back(l);
                }
                return v;
              }},
  };
}

void RunCorpusProgram(const Program& p, int ranks) {
  TempDir tmp;
  const std::string in = "cd " + tmp.path() + " && " + (p.env.empty() ? "" : "export " + p.env + " && ");
  if (!p.setup.empty()) REQUIRE(Run(in + p.setup).exit_code == 0);
  const std::string cmd = p.command(ranks);
  const std::string job = Mpirun(ranks) + " " + cmd;

  RunResult rec = Run(in + Replay() + " record --level data -o t -- " + job, 300);
  INFO(p.name << " at " << ranks << " ranks\n" << rec.output);
  REQUIRE(rec.exit_code == 0);
  std::vector<std::vector<std::string>> want;
  for (int r = 0; r < ranks; ++r) want.push_back(p.deterministic(rec.output, tmp, r));

  RunResult check = Run(in + Replay() + " check t", 120);
  INFO(check.output);
  CHECK(check.exit_code == 0);
  CHECK(Grep(check.output, "no findings").size() == 1);

  for (int r : {0, ranks - 1}) {
    RunResult re = Run(in + Replay() + " rerun t --rank " + std::to_string(r) + " -- " + cmd, 300);
    INFO("rerun --rank " << r << "\n" << re.output);
    CHECK(re.exit_code == 0);
    CHECK(Grep(re.output, "replay rerun: reproduced").size() == 1);
    CHECK(p.deterministic(re.output, tmp, r) == want[static_cast<size_t>(r)]);
  }

  RunResult all = Run(in + Replay() + " rerun t --all -- " + job, 300);
  INFO("rerun --all\n" << all.output);
  CHECK(all.exit_code == 0);
  CHECK(Grep(all.output, "reproduced identically").size() == 1);
  for (int r = 0; r < ranks; ++r) CHECK(p.deterministic(all.output, tmp, r) == want[static_cast<size_t>(r)]);

  RunResult drive = Run(in + Replay() + " drive t --timeout 120", 300);
  INFO("drive\n" << drive.output);
  CHECK(drive.exit_code == 0);
}

void RunAtTwoAndFour(const Program& p) {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(p.name << " at " << ranks << " ranks") { RunCorpusProgram(p, ranks); }
  }
}

TEST_CASE("corpus: a numpy + mpi4py trainer re-runs bit for bit", "[corpus]") { RunAtTwoAndFour(Corpus()[0]); }
TEST_CASE("corpus: mpi4py's helloworld, run as a module, re-runs", "[corpus]") { RunAtTwoAndFour(Corpus()[1]); }
TEST_CASE("corpus: mpi4py's ring test, run as a module, re-runs", "[corpus]") { RunAtTwoAndFour(Corpus()[2]); }
TEST_CASE("corpus: PT-Scotch's dgpart re-runs its partition", "[corpus]") { RunAtTwoAndFour(Corpus()[3]); }
TEST_CASE("corpus: LAMMPS re-runs its thermodynamics", "[corpus]") { RunAtTwoAndFour(Corpus()[4]); }

}  // namespace
}  // namespace replay
