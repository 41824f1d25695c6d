// End-to-end: `replay shrink` on recordings of the example trainers, the
// repro.c it writes built with mpicc, run under mpirun and recorded again.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"

namespace replay {
namespace {

// A drive that hangs is stopped once its ranks all wait; this only bounds
// candidates that neither end nor settle, generously for a loaded machine.
const std::string kShrink = " shrink --timeout 30 ";
// Hung jobs are stopped after this many seconds; generous, so that a loaded
// machine still reaches the fault before the stop.
constexpr int kHangTimeoutS = 20;

RunResult RecordTrainer(const std::string& dir, int ranks, const std::string& args, int timeout_s) {
  return Run("timeout -s TERM " + std::to_string(timeout_s) + " " + Replay() + " record -o " + dir + " -- " +
                 Mpirun(ranks) + " " + MpiTrain() + " --ckpt-every 0 " + args,
             timeout_s + 30);
}

// `replay shrink` of the trace in TMP/t into TMP/out, with `options` and with
// `env` (variables, each followed by a space) set; it must succeed. What it printed.
std::string Shrunk(const TempDir& tmp, const std::string& options = "", const std::string& env = "") {
  RunResult s = Run(env + Replay() + kShrink + options + (tmp / "t") + " -o " + (tmp / "out"), 600);
  INFO(s.output);
  REQUIRE(s.exit_code == 0);
  return s.output;
}

json CheckJson(const std::string& dir) {
  int exit_code = -1;
  return CheckTrace(dir, &exit_code);
}

// The first finding of `report` of `kind` on communicator `comm` by `op`.
const json* FindingOf(const json& report, const std::string& kind, const std::string& op, const std::string& comm) {
  for (const auto& f : report["findings"]) {
    if (f["kind"] == kind && f["op"] == op && f.contains("comm") && f["comm"]["name"] == comm) return &f;
  }
  return nullptr;
}

// Calls per rank of a trace, besides MPI_Init and MPI_Finalize.
std::vector<int> CallsPerRank(const std::string& dir) {
  auto t = TraceReader::Open(dir);
  REQUIRE(t.ok());
  std::vector<int> out;
  for (size_t i = 0; i < (*t)->ranks().size(); ++i) {
    auto r = (*t)->OpenRank(i);
    REQUIRE(r.ok());
    int n = 0;
    for (const Event& e : (*r)->events()) {
      n += e.kind == EventKind::kOp && e.op.kind != OpKind::kInit && e.op.kind != OpKind::kFinalize ? 1 : 0;
    }
    out.push_back(n);
  }
  return out;
}

// The finding of `kind` on the gradient allreduce (MPI_Allreduce on
// dup(WORLD)) in the check of the shrunk trace in `out`, which must be of 2
// ranks of at most 4 calls each.
json ReducedFinding(const std::string& out, const std::string& kind) {
  json reduced = CheckJson(out);
  INFO(Titles(reduced));
  CHECK(reduced["world_size"] == 2);
  for (int n : CallsPerRank(out)) CHECK(n <= 4);
  const json* f = FindingOf(reduced, kind, "MPI_Allreduce", "dup(WORLD)");
  REQUIRE(f != nullptr);
  return *f;
}

// Builds OUT/repro.c with mpicc (`extra`: flags and libraries), warnings as errors.
void BuildRepro(const TempDir& tmp, const std::string& out, const std::string& extra = "") {
  RunResult cc = Run("mpicc -Wall -Wextra -Werror -o " + (tmp / "repro") + " " + out + "/repro.c " + extra, 120);
  INFO(cc.output);
  REQUIRE(cc.exit_code == 0);
}

// Builds OUT/repro.c, runs it at 2 ranks (it must hang until a timeout ends
// it) and records it so; the check of that recording.
json ReproHangs(const TempDir& tmp, const std::string& out) {
  BuildRepro(tmp, out);
  RunResult run = Run("timeout -s TERM 5 " + Mpirun(2) + " " + (tmp / "repro"), 60);
  INFO(run.output);
  CHECK(run.exit_code == 124);
  RunResult rec = Run("timeout -s TERM " + std::to_string(kHangTimeoutS) + " " + Replay() + " record -o " +
                          (tmp / "rec") + " -- " + Mpirun(2) + " " + (tmp / "repro"),
                      60);
  INFO(rec.output);
  CHECK(rec.exit_code == 124);
  return CheckJson(tmp / "rec");
}

TEST_CASE("shrink reduces the trainer's hang to 2 ranks of at most 4 calls, and repro.c hangs the same way", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp / "t", 4, "--steps 6 --fault hang:rank=1,step=3", kHangTimeoutS);
  json recorded = CheckJson(tmp / "t");
  REQUIRE(FindingOf(recorded, "missing_ranks", "MPI_Allreduce", "dup(WORLD)") != nullptr);

  const std::string shrunk = Shrunk(tmp);
  INFO(shrunk);
  CHECK(Grep(shrunk, "ranks").size() >= 3);  // a line per accepted reduction
  // The reduced trace: 2 ranks, at most 4 calls each, the same finding.
  const json f = ReducedFinding(tmp / "out", "missing_ranks");
  REQUIRE(f["ranks"].size() == 1);
  const int missing = f["ranks"][0];
  REQUIRE(f["data"]["missing"][0].contains("blocked_in"));
  CHECK(f["data"]["missing"][0]["blocked_in"]["comm_name"] == "WORLD");
  // Its README says what it shows and where it came from.
  const std::string readme = testing::ReadFile(tmp / "out/README.md");
  CHECK(readme.find("| ranks | 4 | 2 |") != std::string::npos);
  CHECK(readme.find("--fault hang:rank=1,step=3") != std::string::npos);
  CHECK(readme.find("Open MPI") != std::string::npos);

  // repro.c: built with mpicc, it hangs under mpirun until the timeout ends
  // it, and recorded, it shows the same finding.
  json again = ReproHangs(tmp, tmp / "out");
  INFO(Titles(again));
  const json* g = FindingOf(again, "missing_ranks", "MPI_Allreduce", "dup(WORLD)");
  REQUIRE(g != nullptr);
  CHECK((*g)["ranks"] == json::array({missing}));
  CHECK((*g)["data"]["missing"][0]["blocked_in"]["comm_name"] == "WORLD");
}

TEST_CASE("shrink keeps the trainer's count mismatch, gives the same job each time, and repro.c mismatches", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp / "t", 4, "--steps 5 --fault mismatch:rank=2,step=3", kHangTimeoutS);
  REQUIRE(FindingOf(CheckJson(tmp / "t"), "mismatch", "MPI_Allreduce", "dup(WORLD)") != nullptr);
  for (const char* out : {"a", "b"}) {
    RunResult s = Run(Replay() + kShrink + (tmp / "t") + " -o " + (tmp / out) + " --budget 300", 600);
    INFO(s.output);
    REQUIRE(s.exit_code == 0);
  }
  // The same input and budget, the same output, byte for byte.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp / "a")) {
    if (e.is_regular_file()) files.push_back(std::filesystem::relative(e.path(), tmp / "a").string());
  }
  CHECK(files.size() >= 7);  // manifest, 2 x (header, events), repro.c, README.md
  for (const std::string& f : files) {
    INFO(f);
    CHECK(testing::ReadFile(tmp / "a/" + f) == testing::ReadFile(tmp / "b/" + f));
  }

  const json f = ReducedFinding(tmp / "a", "mismatch");
  CHECK(f["data"]["field"] == "count");
  const json odd = f["ranks"];
  BuildRepro(tmp, tmp / "a");
  RunResult rec = Run("timeout -s TERM " + std::to_string(kHangTimeoutS) + " " + Replay() + " record -o " +
                          (tmp / "rec") + " -- " + Mpirun(2) + " " + (tmp / "repro"),
                      60);
  INFO(rec.output);
  json again = CheckJson(tmp / "rec");
  INFO(Titles(again));
  const json* g = FindingOf(again, "mismatch", "MPI_Allreduce", "dup(WORLD)");
  REQUIRE(g != nullptr);
  CHECK((*g)["data"]["field"] == "count");
  CHECK((*g)["ranks"] == odd);
}

TEST_CASE("shrink of a fault across two communicators keeps the split", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp / "t", 4, "--steps 6 --fault order:rank=1,step=3", kHangTimeoutS);
  REQUIRE(FindingOf(CheckJson(tmp / "t"), "missing_ranks", "MPI_Iallreduce", "split(WORLD, color=1)") != nullptr);
  Shrunk(tmp);
  json reduced = CheckJson(tmp / "out");
  INFO(Titles(reduced));
  CHECK(reduced["world_size"] == 2);
  CHECK(FindingOf(reduced, "missing_ranks", "MPI_Iallreduce", "split(WORLD, color=1)") != nullptr);
  // The smallest program still splits.
  const std::string repro = testing::ReadFile(tmp / "out/repro.c");
  CHECK(repro.find("MPI_Comm_split(MPI_COMM_WORLD, 1, ") != std::string::npos);
  CHECK(repro.find("MPI_Iallreduce(") != std::string::npos);
}

TEST_CASE("shrink reduces LAMMPS with a rank stopped mid-run to 2 ranks, and repro.c hangs the same way", "[e2e]") {
  // A program nobody here wrote, hung from outside: LAMMPS melts a crystal at
  // 4 ranks (tens of thousands of halo exchanges a second) until its rank 1
  // is stopped (SIGSTOP) mid-run; its neighbours then wait on it, and the job
  // is ended. Shrink must start from the end of so long a job.
  TempDir tmp;
  const std::string in = tmp / "in.melt";
  testing::WriteFile(in,
                     "units lj\natom_style atomic\nlattice fcc 0.8442\nregion box block 0 10 0 10 0 10\n"
                     "create_box 1 box\ncreate_atoms 1 box\nmass 1 1.0\nvelocity all create 3.0 87287 loop geom\n"
                     "pair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\nneighbor 0.3 bin\n"
                     "neigh_modify every 20 delay 0 check no\nfix 1 all nve\nthermo 100\nrun 100000000\n");
  // Rank 1 is stopped once the run is under way; 3 s later every rank is
  // sent SIGTERM while rank 1 is still stopped (it dies as it resumes), so
  // that its neighbours die waiting on it.
  testing::WriteFile(tmp / "stop.sh",
                     Replay() + " record -o t -- " + Mpirun(4) + " lmp -in " + in + " -log none > rec.log 2>&1 &\n"
                     "rec=$!\n"
                     "for i in $(seq 120); do grep -q '^ *Step' rec.log && break; sleep 0.5; done\n"
                     "sleep 2\n"
                     "others=; stopped=\n"
                     "for q in $(pgrep -f -- '-in " + in + "'); do\n"
                     "  r=$(tr '\\0' '\\n' < /proc/$q/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')\n"
                     "  [ -z \"$r\" ] && continue\n"
                     "  if [ \"$r\" = 1 ]; then stopped=$q; else others=\"$others $q\"; fi\n"
                     "done\n"
                     "kill -STOP $stopped; sleep 3\n"
                     "kill -TERM $others $stopped; kill -CONT $stopped\n"
                     "wait $rec; cat rec.log\n");
  RunResult rec = Run("cd " + tmp.path() + " && sh stop.sh", 180);
  INFO(rec.output);
  json recorded = CheckJson(tmp / "t");
  INFO(Titles(recorded));
  REQUIRE_FALSE(recorded["findings"].empty());
  const std::string kind = recorded["findings"][0]["kind"];
  REQUIRE((kind == "unmatched_p2p" || kind == "missing_ranks" || kind == "never_completed"));

  const std::string shrunk = Shrunk(tmp, "--budget 400 ");
  INFO(shrunk);
  CHECK(Grep(shrunk, "last calls").size() == 1);  // started from the end of the job
  json reduced = CheckJson(tmp / "out");
  INFO(Titles(reduced));
  CHECK(reduced["world_size"] == 2);
  for (int n : CallsPerRank(tmp / "out")) CHECK(n <= 4);
  REQUIRE_FALSE(reduced["findings"].empty());
  CHECK(reduced["findings"][0]["kind"] == kind);
  const std::string readme = testing::ReadFile(tmp / "out/README.md");
  CHECK(readme.find("| ranks | 4 | 2 |") != std::string::npos);
  CHECK(readme.find("the search started from the end of the job") != std::string::npos);

  json rerecorded = ReproHangs(tmp, tmp / "out");
  INFO(Titles(rerecorded));
  REQUIRE_FALSE(rerecorded["findings"].empty());
  CHECK(rerecorded["findings"][0]["kind"] == kind);
}

TEST_CASE("shrink says so and writes nothing when the drive of a recorded job does not fail the same way", "[e2e]") {
  TempDir tmp;
  // The trainer dies of SIGSEGV in its own code: re-issuing its calls does not crash.
  RecordTrainer(tmp / "crash", 2, "--steps 4 --fault crash:rank=1,step=2", 30);
  RunResult s = Run(Replay() + kShrink + (tmp / "crash") + " -o " + (tmp / "out"), 300);
  INFO(s.output);
  CHECK(s.exit_code == 1);
  CHECK(Grep(s.output, "does not make this job fail the same way").size() == 1);
  CHECK(Grep(s.output, "nothing written").size() == 1);
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
  // A job that did nothing wrong: nothing to keep.
  REQUIRE(RecordTrainer(tmp / "clean", 2, "--steps 2", 30).exit_code == 0);
  RunResult c = Run(Replay() + kShrink + (tmp / "clean") + " -o " + (tmp / "out"), 120);
  INFO(c.output);
  CHECK(c.exit_code == 1);
  CHECK(Grep(c.output, "finds nothing wrong").size() == 1);
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST_CASE("shrink shows why when mpirun starts no drive", "[e2e]") {
  TempDir tmp;
  RecordTrainer(tmp / "t", 2, "--steps 4 --fault mismatch:rank=1,step=2", 30);
  REQUIRE(Grep(Run(Replay() + " check " + (tmp / "t")).output, "mismatch").size() >= 1);
  // An mpirun that refuses to start anything, as Open MPI does for root
  // without its two variables.
  std::filesystem::create_directories(tmp / "bin");
  testing::WriteFile(tmp / "bin/mpirun", "#!/bin/sh\necho 'mpirun: this machine refuses to start jobs' >&2\nexit 1\n");
  REQUIRE(Run("chmod +x " + (tmp / "bin/mpirun")).exit_code == 0);
  RunResult s =
      Run("PATH=" + (tmp / "bin") + ":$PATH " + Replay() + kShrink + (tmp / "t") + " -o " + (tmp / "out"), 120);
  INFO(s.output);
  CHECK(s.exit_code == 2);
  CHECK(Grep(s.output, "replay drive started no job").size() == 1);
  CHECK(Grep(s.output, "this machine refuses to start jobs").size() == 1);
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST_CASE("shrink refuses bad arguments in one line", "[e2e]") {
  TempDir tmp;
  RunResult none = Run(Replay() + kShrink + (tmp / "none") + " -o " + (tmp / "out"));
  CHECK(none.exit_code == 2);
  REQUIRE(RecordTrainer(tmp / "t", 1, "--steps 1", 30).exit_code == 0);
  std::filesystem::create_directories(tmp / "there");
  RunResult exists = Run(Replay() + kShrink + (tmp / "t") + " -o " + (tmp / "there"));
  CHECK(exists.exit_code == 2);
  CHECK(Grep(exists.output, "already exists").size() == 1);
  RunResult keep = Run(Replay() + kShrink + (tmp / "t") + " -o " + (tmp / "out") + " --keep hangs");
  CHECK(keep.exit_code == 2);
  CHECK(Grep(keep.output, "is not a kind of finding").size() == 1);
  CHECK(Run(Replay() + kShrink + (tmp / "t")).exit_code == 2);  // no -o
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
}

#ifdef REPLAY_TEST_NCCL_INCLUDE
// NCCL on the host stand-ins (tests/nccl_host): its drive re-issues NCCL
// calls into the stand-in libnccl.so.2 and libcuda.so.1, which repro.c, built
// against the real nccl.h and cuda.h, runs against too.
TEST_CASE("shrink keeps an NCCL count mismatch, and repro.c built against NCCL's headers shows it", "[e2e][nccl]") {
  TempDir tmp;
  const std::string libs =
      "LD_LIBRARY_PATH=" + testing::BuildPath("nccl_host") + ":" + testing::BuildPath("nccl_host/cuda") + " ";
  const std::string stop = "timeout -s TERM " + std::to_string(kHangTimeoutS) + " ";
  RunResult rec = Run(stop + Replay() + " record -o " + (tmp / "t") + " -- " + Mpirun(4) + " " +
                          testing::BuildPath("examples/nccl_train/nccl_train_host") +
                          " --ckpt-every 0 --steps 6 --fault mismatch:rank=1,step=2",
                      60);
  INFO(rec.output);
  REQUIRE(FindingOf(CheckJson(tmp / "t"), "mismatch", "ncclAllReduce", "split(nccl, color=0)@1") != nullptr);
  Shrunk(tmp, "", libs);
  json reduced = CheckJson(tmp / "out");
  INFO(Titles(reduced));
  CHECK(reduced["world_size"] == 2);
  for (int n : CallsPerRank(tmp / "out")) CHECK(n <= 4);
  const json* f = nullptr;
  for (const auto& x : reduced["findings"]) {
    if (x["kind"] == "mismatch" && x["op"] == "ncclAllReduce") f = &x;
  }
  REQUIRE(f != nullptr);
  CHECK((*f)["data"]["field"] == "count");
  const std::string comm = (*f)["comm"]["name"];
  CHECK(comm.rfind("split(nccl, color=0)", 0) == 0);

  const std::string repro = testing::ReadFile(tmp / "out/repro.c");
  CHECK(repro.find("#include <nccl.h>") != std::string::npos);
  CHECK(repro.find("ncclCommSplit(") != std::string::npos);
  BuildRepro(tmp, tmp / "out",
             "-I" REPLAY_TEST_NCCL_INCLUDE " -I" REPLAY_TEST_CUDA_INCLUDE " -L" + testing::BuildPath("nccl_host") +
                 " -L" + testing::BuildPath("nccl_host/cuda") + " -lnccl -lcuda");
  RunResult again = Run(libs + stop + Replay() + " record -o " + (tmp / "rec") + " -- " + Mpirun(2) +
                            " " + (tmp / "repro"),
                        60);
  INFO(again.output);
  json shown = CheckJson(tmp / "rec");
  INFO(Titles(shown));
  const json* g = FindingOf(shown, "mismatch", "ncclAllReduce", comm);
  REQUIRE(g != nullptr);
  CHECK((*g)["data"]["field"] == "count");
  CHECK((*g)["ranks"] == (*f)["ranks"]);
}

TEST_CASE("shrink keeps an error NCCL returns, down to one rank, and repro.c gets it again", "[e2e][nccl]") {
  TempDir tmp;
  const std::string libs =
      "LD_LIBRARY_PATH=" + testing::BuildPath("nccl_host") + ":" + testing::BuildPath("nccl_host/cuda") + " ";
  // Rank 1 sends to a rank the communicator does not have.
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + Mpirun(2) + " " +
                          testing::BuildPath("tests/nccl_host/nccl_device_program") + " --steps 3 --bad-peer 1:2",
                      90);
  INFO(rec.output);
  json recorded = CheckJson(tmp / "t");
  INFO(Titles(recorded));
  REQUIRE(!recorded["findings"].empty());
  REQUIRE(recorded["findings"][0]["kind"] == "error");
  REQUIRE(recorded["findings"][0]["op"] == "ncclSend");
  Shrunk(tmp, "", libs);
  json reduced = CheckJson(tmp / "out");
  INFO(Titles(reduced));
  CHECK(reduced["world_size"] == 1);
  REQUIRE(!reduced["findings"].empty());
  const json& f = reduced["findings"][0];
  CHECK(f["kind"] == "error");
  CHECK(f["op"] == "ncclSend");
  CHECK(f["data"]["code"] == recorded["findings"][0]["data"]["code"]);
  for (int n : CallsPerRank(tmp / "out")) CHECK(n <= 2);  // the communicator and the send

  BuildRepro(tmp, tmp / "out",
             "-I" REPLAY_TEST_NCCL_INCLUDE " -I" REPLAY_TEST_CUDA_INCLUDE " -L" + testing::BuildPath("nccl_host") +
                 " -L" + testing::BuildPath("nccl_host/cuda") + " -lnccl -lcuda");
  RunResult again =
      Run(libs + Replay() + " record -o " + (tmp / "rec") + " -- " + Mpirun(1) + " " + (tmp / "repro"), 60);
  INFO(again.output);
  CHECK(Grep(again.output, "ncclSend: invalid argument").size() >= 1);
  json shown = CheckJson(tmp / "rec");
  INFO(Titles(shown));
  REQUIRE(!shown["findings"].empty());
  CHECK(shown["findings"][0]["kind"] == "error");
  CHECK(shown["findings"][0]["op"] == "ncclSend");
  CHECK(shown["findings"][0]["data"]["code"] == f["data"]["code"]);
}
#endif

}  // namespace
}  // namespace replay
