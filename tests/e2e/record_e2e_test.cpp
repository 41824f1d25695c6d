// End-to-end: real MPI jobs recorded through `replay record`, then read back.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"
#include "util/json.h"

namespace replay {
namespace {

std::string Record(const std::string& dir, const std::string& command, const std::string& level = "hash") {
  return Replay() + " record --level " + level + " -o " + dir + " -- " + command;
}

// The "checksum" lines of a test program's output, sorted (ranks print in any order).
std::vector<std::string> Checksums(const std::string& output) { return Sorted(Grep(output, "checksum")); }

// The checksums `program` prints when run without the recorder; it must succeed.
std::vector<std::string> PlainChecksums(const std::string& program) { return Checksums(Succeeded(program)); }

std::string Train(int ranks, const std::string& args) {
  return Mpirun(ranks) + " " + testing::MpiTrain() + " " + args;
}

// The trace of the trainer recorded at `ranks` ranks with `args` into `dir`;
// the recording must succeed.
std::map<int, TraceRank> RecordedTrainer(const std::string& dir, int ranks, const std::string& args) {
  RunResult r = Run(Record(dir, Train(ranks, args)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return ReadTrace(dir);
}

// The communicator identity a rank's op at `api` index `i` used.
uint64_t CommOf(const TraceRank& r, const std::string& api, size_t i) { return r.Ops(api).at(i)->op.comm; }

TEST_CASE("a clean run records every rank completely and consistently", "[e2e]") {
  for (int ranks : {1, 2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      std::string dir = tmp / "t";
      RunResult r = Run(Record(dir, Train(ranks, "--steps 4")));
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      CHECK(Grep(r.output, "EXIT-SUCCESS").size() == 1);
      CHECK(Grep(r.output, "complete (finalize)").size() == static_cast<size_t>(ranks));
      auto trace = ReadTrace(dir);
      REQUIRE(trace.size() == static_cast<size_t>(ranks));
      for (auto& [rank, rk] : trace) {
        INFO("rank " << rank);
        CHECK(rk.reader->status() == RankStatus::kComplete);
        CHECK(rk.header().close_reason == CloseReason::kFinalize);
        CHECK(rk.reader->stats().dropped == 0);
        CHECK(rk.reader->stats().missing == 0);
        // Grad allreduce (4 steps) + loss allreduce (4) on WORLD.
        auto allreduce = rk.Ops("MPI_Allreduce");
        REQUIRE(allreduce.size() == 8);
        // Sequence numbers per communicator are dense from 1.
        std::map<uint64_t, uint64_t> last;
        for (const Event& e : rk.events()) {
          if (e.kind != EventKind::kOp || e.op.seq == 0) continue;
          CHECK(e.op.seq == last[e.op.comm] + 1);
          last[e.op.comm] = e.op.seq;
        }
        // Every op of a blocking call returned.
        CHECK(rk.OfKind(EventKind::kReturn).size() + 0 >= allreduce.size());
        // Fingerprints at level hash.
        CHECK((allreduce[0]->op.flags & op_flags::kHasSendHash) != 0);
        // The checkpoint marks (every 5 steps: none in 4 steps) are absent; info facts present.
        bool world_rank = false;
        for (const Event& e : rk.events()) {
          if (e.kind == EventKind::kInfo && e.info_key() == "mpi.world_rank") {
            world_rank = e.info_value() == std::to_string(rank);
          }
        }
        CHECK(world_rank);
      }
      // The same communicator has the same identity on every rank.
      uint64_t grad = CommOf(trace[0], "MPI_Allreduce", 0);
      uint64_t world = CommOf(trace[0], "MPI_Allreduce", 1);
      CHECK(grad != world);
      for (auto& [rank, rk] : trace) {
        CHECK(CommOf(rk, "MPI_Allreduce", 0) == grad);
        CHECK(CommOf(rk, "MPI_Allreduce", 1) == world);
        // Same sequence numbers and results across ranks.
        CHECK(rk.Ops("MPI_Allreduce")[2]->op.seq == trace[0].Ops("MPI_Allreduce")[2]->op.seq);
      }
    }
  }
}

TEST_CASE("a run records the same events again (deterministic program, deterministic trace)", "[e2e]") {
  TempDir tmp;
  REQUIRE(Run(Record(tmp / "a", Train(2, "--steps 3"))).exit_code == 0);
  REQUIRE(Run(Record(tmp / "b", Train(2, "--steps 3"))).exit_code == 0);
  auto a = ReadTrace(tmp / "a");
  auto b = ReadTrace(tmp / "b");
  for (int rank : {0, 1}) {
    auto oa = a[rank].Ops("MPI_Allreduce");
    auto ob = b[rank].Ops("MPI_Allreduce");
    REQUIRE(oa.size() == ob.size());
    for (size_t i = 0; i < oa.size(); ++i) {
      CHECK(oa[i]->op.send_hash == ob[i]->op.send_hash);
      CHECK(oa[i]->op.comm == ob[i]->op.comm);
    }
  }
}

TEST_CASE("checkpoints are recorded as marks", "[e2e]") {
  TempDir tmp;
  RunResult r = Run("cd " + tmp.path() + " && " + Record(tmp / "t", Train(2, "--steps 10 --ckpt-every 5")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto trace = ReadTrace(tmp / "t");
  for (auto& [rank, rk] : trace) {
    auto marks = rk.OfKind(EventKind::kMark);
    REQUIRE(marks.size() == 2);
    CHECK(marks[0]->text == "checkpoint");
    CHECK(marks[0]->mark.value == 5);
    CHECK(marks[1]->mark.value == 10);
  }
}

TEST_CASE("the hang fault leaves every rank inside the call it never left", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      RunResult r = Run(Record(tmp / "t", Train(ranks, "--steps 6 --fault hang:rank=1,step=3")), 15);
      INFO(r.output);
      CHECK(r.exit_code != 0);  // killed by the timeout
      auto trace = ReadTrace(tmp / "t");
      REQUIRE(trace.size() == static_cast<size_t>(ranks));
      uint64_t grad = CommOf(trace[0], "MPI_Allreduce", 0);
      for (auto& [rank, rk] : trace) {
        INFO("rank " << rank);
        // The last op of every rank has no return.
        const Event* last_op = nullptr;
        bool returned = false;
        for (const Event& e : rk.events()) {
          if (e.kind == EventKind::kOp && rk.Api(e) == "MPI_Allreduce") {
            last_op = &e;
            returned = false;
          }
          if (e.kind == EventKind::kReturn && rk.Api(e) == "MPI_Allreduce") returned = true;
        }
        REQUIRE(last_op != nullptr);
        CHECK_FALSE(returned);
        if (rank == 1) {
          CHECK(last_op->op.comm != grad);  // skipped ahead to the loss allreduce on WORLD
        } else {
          CHECK(last_op->op.comm == grad);  // waits in the gradient allreduce
          CHECK(last_op->op.seq == 4);      // bcast was 1; steps 1, 2 were 2, 3
        }
      }
    }
  }
}

TEST_CASE("the mismatch fault records the differing count", "[e2e]") {
  TempDir tmp;
  RunResult r = Run(Record(tmp / "t", Train(4, "--steps 5 --fault mismatch:rank=2,step=3")), 12);
  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 4);
  uint64_t grad = CommOf(trace[0], "MPI_Allreduce", 0);
  for (auto& [rank, rk] : trace) {
    INFO("rank " << rank);
    const Event* at_seq4 = nullptr;
    for (const Event* e : rk.Ops("MPI_Allreduce")) {
      if (e->op.comm == grad && e->op.seq == 4) at_seq4 = e;
    }
    REQUIRE(at_seq4 != nullptr);
    CHECK(at_seq4->op.count == (rank == 2 ? 1024 : 2048));
  }
}

TEST_CASE("the nan fault shows where the NaN entered", "[e2e]") {
  TempDir tmp;
  auto trace = RecordedTrainer(tmp / "t", 4, "--steps 5 --fault nan:rank=3,step=2");
  uint64_t grad = CommOf(trace[0], "MPI_Allreduce", 0);
  for (auto& [rank, rk] : trace) {
    INFO("rank " << rank);
    for (const Event* e : rk.Ops("MPI_Allreduce")) {
      if (e->op.comm != grad) continue;
      if (e->op.seq == 2) CHECK(e->op.send_nan == 0);                  // step 1: clean
      if (e->op.seq == 3) CHECK((e->op.send_nan > 0) == (rank == 3));  // step 2: only rank 3
    }
    // The result of step 2's allreduce carries it everywhere.
    bool after = false;
    for (const Event& e : rk.events()) {
      if (e.kind == EventKind::kOp && e.op.comm == grad && e.op.seq == 3) after = true;
      if (after && e.kind == EventKind::kReturn) {
        CHECK(e.ret.recv_nan > 0);
        break;
      }
    }
  }
}

TEST_CASE("the unseeded fault records the entropy each rank drew", "[e2e]") {
  TempDir tmp;
  auto trace = RecordedTrainer(tmp / "t", 2, "--steps 3 --fault unseeded");
  for (auto& [rank, rk] : trace) {
    INFO("rank " << rank);
    auto entropy = rk.OfKind(EventKind::kEntropy);
    REQUIRE_FALSE(entropy.empty());
    CHECK(entropy[0]->entropy.source == EntropySource::kGetrandom);
    CHECK(entropy[0]->entropy.rc > 0);
    CHECK(entropy[0]->text.size() == static_cast<size_t>(entropy[0]->entropy.rc));
    // Drawn by the program after MPI_Init, not by MPI itself.
    CHECK(entropy[0]->index > rk.Ops("MPI_Init").at(0)->index);
  }
}

TEST_CASE("the race fault records which source each wildcard receive matched", "[e2e]") {
  TempDir tmp;
  auto trace = RecordedTrainer(tmp / "t", 4, "--steps 3 --fault race");
  const TraceRank& root = trace[0];
  std::multiset<int> sources;
  std::map<int, uint64_t> per_source;
  bool saw_wildcard = false;
  for (const Event& e : root.events()) {
    if (e.kind == EventKind::kOp && root.Api(e) == "MPI_Recv") {
      CHECK(e.op.peer == kAnySource);
      CHECK(e.op.peer_seq == 0);  // assigned at the match
      saw_wildcard = true;
    }
    if (e.kind == EventKind::kReturn && root.Api(e) == "MPI_Recv") {
      REQUIRE(e.ret.source >= 1);
      sources.insert(e.ret.source);
      // Numbered in that source's sequence on this communicator, which its
      // other messages (the ring exchange) share: increasing, never reused.
      CHECK(e.ret.peer_seq > per_source[e.ret.source]);
      per_source[e.ret.source] = e.ret.peer_seq;
    }
  }
  CHECK(saw_wildcard);
  for (int s : {1, 2, 3}) CHECK(sources.count(s) == 3);
}

TEST_CASE("the crash fault leaves a complete trace with the signal", "[e2e]") {
  TempDir tmp;
  RunResult r = Run(Record(tmp / "t", Train(2, "--steps 6 --fault crash:rank=1,step=3")));
  INFO(r.output);
  CHECK(r.exit_code != 0);
  auto trace = ReadTrace(tmp / "t");
  const TraceRank& dead = trace[1];
  CHECK(dead.reader->status() == RankStatus::kComplete);
  CHECK(dead.header().close_reason == CloseReason::kSignal);
  auto signals = dead.OfKind(EventKind::kSignal);
  REQUIRE(signals.size() == 1);
  CHECK(signals[0]->signal.signo == SIGSEGV);
  CHECK(signals[0]->signal.fatal);
  // It died after step 2's collectives: 1 bcast + 2 grad allreduces on grad.
  uint64_t grad = CommOf(trace[0], "MPI_Allreduce", 0);
  uint64_t last_seq = 0;
  for (const Event* e : dead.Ops("MPI_Allreduce")) {
    if (e->op.comm == grad) last_seq = e->op.seq;
  }
  CHECK(last_seq == 3);
}

TEST_CASE("a rank killed with SIGKILL mid-run loses nothing it recorded", "[e2e]") {
  TempDir tmp;
  std::string dir = tmp / "t";
  // Long enough to be killed in the middle; the flush interval is long so that
  // most of what it recorded is still in its ring when it dies.
  std::string cmd = "REPLAY_FLUSH_MS=60000 " + Record(dir, Train(2, "--steps 100000 --ckpt-every 0"));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Run(cmd, 60);
    _exit(0);
  }
  // Wait for rank 1 to be well into training, then kill it.
  int pid = 0;
  for (int i = 0; i < 200 && pid == 0; ++i) {
    usleep(100000);
    auto t = TraceReader::Open(dir);
    if (!t.ok()) continue;
    const RankEntry* e = (*t)->FindRank(1);
    if (e == nullptr) continue;
    auto rr = RankReader::Open(e->dir);
    if (rr.ok() && (*rr)->events().size() > 2000) pid = (*rr)->header().pid;
  }
  REQUIRE(pid > 0);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  auto trace = ReadTrace(dir);
  const TraceRank& killed = trace[1];
  CHECK(killed.reader->status() == RankStatus::kSalvaged);
  CHECK(killed.reader->stats().salvaged > 0);
  CHECK(killed.reader->stats().missing == 0);   // dense: no appended event lost
  CHECK(killed.reader->stats().dropped == 0);
  CHECK(killed.events().size() > 2000);
  CHECK(killed.OfKind(EventKind::kSignal).empty());  // SIGKILL cannot be seen, only survived
}

TEST_CASE("an mpirun line that forwards variables with -x records as it runs without replay", "[e2e]") {
  TempDir tmp;
  // Open MPI refuses -x next to an environment list; replay forwards its own with -x then.
  const std::string job = "mpirun -np 2 --oversubscribe -x REPLAY_TEST_FOO ";
  RunResult shown = Run("REPLAY_TEST_FOO=forwarded " + Record(tmp / "env", job + "sh -c 'echo got $REPLAY_TEST_FOO'"));
  INFO(shown.output);
  CHECK(Grep(shown.output, "got forwarded").size() == 2);
  RunResult r = Run("REPLAY_TEST_FOO=1 " + Record(tmp / "t", job + testing::MpiTrain() + " --steps 2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(Grep(r.output, "complete (finalize)").size() == 2);
  CHECK(ReadTrace(tmp / "t").size() == 2);
}

TEST_CASE("mpirun's options work under replay record as without it", "[e2e]") {
  TempDir tmp;
  {
    std::ofstream hosts(tmp / "hosts");
    hosts << "localhost slots=4\n";
  }
  // What a user passes to mpirun: settings for Open MPI, for the ranks'
  // environment (the same list replay forwards its own settings by), for
  // the output, and where to run.
  const std::vector<std::string> options = {
      "--mca btl self,vader",
      "--mca mca_base_env_list REPLAY_TEST_FOO",
      "-x REPLAY_TEST_FOO --mca btl ^openib",
      "--tag-output",
      "--hostfile " + tmp / "hosts",
      "--output-filename " + tmp / "out",
      "--bind-to none --map-by slot",
  };
  auto losses = [](const std::string& out) {
    std::vector<std::string> v;
    for (const std::string& l : Grep(out, " loss ")) v.push_back(l.substr(l.find("loss")));
    std::sort(v.begin(), v.end());
    return v;
  };
  int n = 0;
  for (const std::string& option : options) {
    const std::string job = "mpirun -np 2 --oversubscribe " + option + " " + testing::MpiTrain() + " --steps 2";
    RunResult plain = Run("REPLAY_TEST_FOO=1 " + job);
    const std::string dir = tmp / ("t" + std::to_string(n++));
    RunResult rec = Run("REPLAY_TEST_FOO=1 " + Record(dir, job));
    INFO(option << "\nplain:\n" << plain.output << "\nrecorded:\n" << rec.output);
    REQUIRE(plain.exit_code == 0);
    CHECK(rec.exit_code == 0);
    CHECK(losses(rec.output) == losses(plain.output));
    CHECK(Grep(rec.output, "complete (finalize)").size() == 2);
  }
}

TEST_CASE("every intercepted MPI call leaves results unchanged", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      const std::string program = Mpirun(ranks) + " " + TestProgram("mpi_surface");
      const std::vector<std::string> expected = PlainChecksums(program);
      REQUIRE(expected.size() == static_cast<size_t>(ranks));
      for (const char* level : {"meta", "hash", "data"}) {
        INFO("level " << level);
        RunResult rec = Run(Record(tmp / level, program, level));
        INFO(rec.output);
        REQUIRE(rec.exit_code == 0);
        CHECK(Checksums(rec.output) == expected);
        // Nothing in a correct program is a finding: no setting differs, no call is left open.
        RunResult checked = Run(Replay() + " check " + (tmp / level));
        INFO(checked.output);
        CHECK(checked.exit_code == 0);
        auto trace = ReadTrace(tmp / level);
        for (auto& [rank, rk] : trace) {
          CHECK(rk.reader->status() == RankStatus::kComplete);
          CHECK(rk.reader->stats().dropped == 0);
          for (const char* api : {"MPI_Intercomm_merge", "MPI_Neighbor_alltoallw", "MPI_Ialltoallw", "MPI_Mrecv",
                                  "MPI_Startall", "MPI_Put", "MPI_Comm_idup", "MPI_Sendrecv_replace", "MPI_Rget",
                                  "MPI_Dist_graph_create"}) {
            INFO(api);
            CHECK_FALSE(rk.Ops(api).empty());
          }
          if (std::string(level) == "data") CHECK(rk.reader->stats().payload_bytes > 0);
          if (std::string(level) == "meta") {
            for (const Event* e : rk.Ops("MPI_Allreduce")) CHECK((e->op.flags & op_flags::kHasSendHash) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("MPI_THREAD_MULTIPLE jobs with concurrent callers lose no event", "[e2e]") {
  TempDir tmp;
  const int threads = 4, iterations = 200;
  RunResult r = Run(Record(tmp / "t", Mpirun(2) + " " + testing::TestProgram("mpi_threads") + " " +
                                          std::to_string(threads) + " " + std::to_string(iterations)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto trace = ReadTrace(tmp / "t");
  for (auto& [rank, rk] : trace) {
    INFO("rank " << rank);
    CHECK(rk.reader->stats().dropped == 0);
    CHECK(rk.reader->stats().missing == 0);
    CHECK(rk.Ops("MPI_Sendrecv").size() == static_cast<size_t>(threads * iterations));
    CHECK(rk.Ops("MPI_Allreduce").size() == static_cast<size_t>(threads * iterations));
    // Each thread's communicator numbers its collectives densely.
    std::map<uint64_t, uint64_t> last;
    std::set<uint32_t> threads_seen;
    for (const Event* e : rk.Ops("MPI_Allreduce")) {
      CHECK(e->op.seq == last[e->op.comm] + 1);
      last[e->op.comm] = e->op.seq;
      threads_seen.insert(e->thread);
    }
    CHECK(last.size() == static_cast<size_t>(threads));
    CHECK(threads_seen.size() == static_cast<size_t>(threads));
  }
}

TEST_CASE("a forking rank keeps its trace and the children record nothing", "[e2e]") {
  TempDir tmp;
  RunResult r = Run(Record(tmp / "t", Mpirun(2) + " " + testing::TestProgram("mpi_fork")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(Grep(r.output, "child 0").size() == 6);
  auto t = TraceReader::Open(tmp / "t");
  REQUIRE(t.ok());
  CHECK((*t)->ranks().size() == 2);  // no directory for any child
  auto trace = ReadTrace(tmp / "t");
  for (auto& [rank, rk] : trace) {
    CHECK(rk.reader->status() == RankStatus::kComplete);
    CHECK(rk.Ops("MPI_Allreduce").size() == 3);
    CHECK(rk.OfKind(EventKind::kEntropy).empty());  // the children's getrandom is theirs
  }
}

TEST_CASE("signals leave a complete trace and the program's handlers still run", "[e2e]") {
  struct Case {
    const char* mode;
    int signo;
    const char* expect_output;  // printed by the program's own handler, if any
  };
  for (const Case& c : {Case{"term-handler", SIGTERM, "handler: SIGTERM"}, Case{"term-default", SIGTERM, nullptr},
                        Case{"abort", SIGABRT, nullptr}, Case{"segv", SIGSEGV, "handler: SIGSEGV"}}) {
    DYNAMIC_SECTION(c.mode) {
      TempDir tmp;
      RunResult r = Run(Record(tmp / "t", Mpirun(2) + " " + testing::TestProgram("mpi_signals") + " " + c.mode), 30);
      INFO(r.output);
      if (c.expect_output != nullptr) CHECK(Grep(r.output, c.expect_output).size() == 1);
      auto trace = ReadTrace(tmp / "t");
      const TraceRank& r0 = trace[0];
      auto signals = r0.OfKind(EventKind::kSignal);
      REQUIRE_FALSE(signals.empty());
      CHECK(signals[0]->signal.signo == c.signo);
      // The program's handler ends the process with _exit (term-handler): the
      // trace closes there; otherwise at the signal.
      CHECK(r0.reader->status() == RankStatus::kComplete);
      CHECK(r0.header().close_reason == (std::string(c.mode) == "term-handler" ? CloseReason::kExit
                                                                                : CloseReason::kSignal));
    }
  }
  SECTION("an ignored signal is recorded and the program carries on") {
    TempDir tmp;
    RunResult r = Run(Record(tmp / "t", Mpirun(2) + " " + testing::TestProgram("mpi_signals") + " int-ignored"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(Grep(r.output, "rank 0 survived SIGINT").size() == 1);
    auto trace = ReadTrace(tmp / "t");
    CHECK(trace[0].header().close_reason == CloseReason::kFinalize);
    auto signals = trace[0].OfKind(EventKind::kSignal);
    REQUIRE(signals.size() == 1);
    CHECK_FALSE(signals[0]->signal.fatal);
  }
}

TEST_CASE("processes that never communicate are untouched by the preload", "[e2e]") {
  TempDir tmp;
  std::string env = "LD_PRELOAD=" + testing::Preload() + " REPLAY_DIR=" + (tmp / "t") + " ";
  for (const std::string& cmd :
       {std::string("bash -c 'echo out; echo err >&2; head -c 16 /dev/urandom | wc -c; exit 3'"),
        std::string("python3 -c 'import os,random; print(len(os.urandom(8)), random.random() < 2)'"),
        std::string("mpirun --version"), std::string("sh -c 'kill -TERM $$'")}) {
    INFO(cmd);
    RunResult plain = Run(cmd);
    RunResult pre = Run(env + cmd);
    CHECK(pre.exit_code == plain.exit_code);
    CHECK(pre.output == plain.output);
  }
  CHECK_FALSE(TraceReader::Open(tmp / "t").ok());  // nothing was created
  CHECK(access((tmp / "t").c_str(), F_OK) != 0);
}

TEST_CASE("record says plainly when the command made no call it records", "[e2e]") {
  TempDir tmp;
  RunResult r = Run(testing::Replay() + " record -o " + (tmp / "t") + " -- python3 -c 'print(1)'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("1\n") == 0);  // the command's own output, unchanged
  CHECK(r.output.find("nothing recorded: no process of the command made an MPI, NCCL or CUDA call") !=
        std::string::npos);
  CHECK(r.output.find("is it running under replay") == std::string::npos);
}

// A real, small file system (tmpfs of `size`), unmounted when it goes.
struct SmallDisk {
  std::string path;
  SmallDisk(const TempDir& tmp, const char* size) : path(tmp / "small") {
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    std::string options = std::string("size=") + size;
    if (mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      FAIL("cannot mount a small tmpfs for this test (needs root): " << strerror(errno));
    }
  }
  ~SmallDisk() { umount2(path.c_str(), MNT_DETACH); }
};

TEST_CASE("a small disk keeps what fits: the ring takes space as it is used", "[e2e]") {
  TempDir tmp;
  // Each thread's ring may hold 1 MiB: reserved up front, two ranks' rings
  // would not fit here, and nothing would be recorded.
  SmallDisk disk(tmp, "1m");
  RunResult rec = Run(Record(disk.path + "/t", Train(2, "--steps 40 --ckpt-every 0")));
  INFO(rec.output);
  CHECK(rec.exit_code == 0);
  CHECK(Grep(rec.output, "replay: recording").empty());
  auto info = json::parse(Run(Replay() + " info --json " + disk.path + "/t").output);
  REQUIRE(info["ranks"].size() == 2);
  for (const json& r : info["ranks"]) {
    CHECK(r["status"] == "complete");
    CHECK(r["dropped_events"] == 0);
    CHECK(r["unrecorded_calls"] == 0);
  }
  CHECK(Run(Replay() + " check " + disk.path + "/t").exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(disk.path + "/t/rank-00000/ring"));
}

TEST_CASE("a full disk turns recording off with one warning, the job unchanged", "[e2e]") {
  TempDir tmp;
  // The writer hits ENOSPC part-way through.
  SmallDisk disk(tmp, "512k");
  const std::string mnt = disk.path;
  std::string program = Train(2, "--steps 40 --ckpt-every 0");
  RunResult plain = Run(program);
  REQUIRE(plain.exit_code == 0);
  RunResult rec = Run("REPLAY_RING_KB=128 " + Record(mnt + "/t", program, "data"));
  INFO(rec.output);
  CHECK(rec.exit_code == 0);
  auto losses = [](const std::string& out) {
    auto v = Grep(out, " loss ");
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(losses(rec.output) == losses(plain.output));
  // One warning per rank that hit it, naming the cause.
  auto warnings = Grep(rec.output, "replay: recording");
  CHECK_FALSE(warnings.empty());
  CHECK(warnings.size() <= 2);
  for (const std::string& w : warnings) CHECK(w.find("No space left on device") != std::string::npos);

  // The trace says where each rank's recording stopped, why, and how much
  // it missed; check judges nothing past that, and gives no clean verdict.
  auto info = json::parse(Run(Replay() + " info --json " + mnt + "/t").output);
  int failed = 0;
  for (const json& r : info["ranks"]) {
    if (r["status"] != "recording failed") continue;
    ++failed;
    CHECK(r["recording_error"].get<std::string>().find("No space left on device") != std::string::npos);
    CHECK(r["unrecorded_calls"].get<uint64_t>() > 0);
  }
  CHECK(failed == static_cast<int>(warnings.size()));
  RunResult check = Run(Replay() + " check --json " + mnt + "/t");
  INFO(check.output);
  CHECK(check.exit_code == 2);
  json report = json::parse(check.output);
  CHECK(report["findings"].empty());
  REQUIRE(report["unread"].size() == warnings.size());
  for (const json& u : report["unread"]) CHECK(u.get<std::string>().find("recording stopped") != std::string::npos);
}

TEST_CASE("an unwritable REPLAY_DIR turns recording off with one warning per rank", "[e2e]") {
  std::string program = Train(2, "--steps 3");
  RunResult plain = Run(program);
  REQUIRE(plain.exit_code == 0);
  RunResult pre = Run("LD_PRELOAD=" + testing::Preload() + " REPLAY_DIR=/proc/replay-cannot-be-here " + program);
  INFO(pre.output);
  CHECK(pre.exit_code == 0);
  auto warnings = Grep(pre.output, "replay: recording is off");
  CHECK(warnings.size() == 2);
  auto losses = [](const std::string& out) {
    auto v = Grep(out, " loss ");
    std::sort(v.begin(), v.end());
    return v;
  };
  CHECK(losses(pre.output) == losses(plain.output));
}

TEST_CASE("REPLAY_LOG says as much as asked: off silences warnings, info tells which process records which rank", "[e2e]") {
  TempDir tmp;
  std::string program = Train(2, "--steps 3");
  RunResult off = Run("REPLAY_LOG=off LD_PRELOAD=" + testing::Preload() + " REPLAY_DIR=/proc/replay-cannot-be-here " +
                      program);
  INFO(off.output);
  CHECK(off.exit_code == 0);
  CHECK(Grep(off.output, "replay:").empty());
  CHECK(Grep(off.output, " loss ").size() == Grep(Run(program).output, " loss ").size());

  RunResult info = Run("REPLAY_LOG=info " + Record(tmp / "t", program, "meta"));
  INFO(info.output);
  CHECK(info.exit_code == 0);
  for (int rank : {0, 1}) {
    CHECK(Grep(info.output, "records as rank " + std::to_string(rank) + " of 2 at level meta into ").size() == 1);
  }
  // The default says nothing of it.
  RunResult quiet = Run(Record(tmp / "q", program, "meta"));
  CHECK(Grep(quiet.output, "records as rank").empty());

  RunResult unknown = Run("REPLAY_LOG=loud LD_PRELOAD=" + testing::Preload() +
                          " REPLAY_DIR=/proc/replay-cannot-be-here " + program);
  INFO(unknown.output);
  CHECK(unknown.exit_code == 0);
  CHECK(Grep(unknown.output, "REPLAY_LOG=loud is not one of off, error, warn, info, debug, trace").size() == 2);
  CHECK(Grep(unknown.output, "replay: recording is off").size() == 2);
}

TEST_CASE("an unwritable trace directory is refused before the job starts", "[e2e]") {
  RunResult r = Run(Replay() + " record -o /proc/replay-cannot-be-here -- echo started");
  CHECK(r.exit_code == 2);
  auto lines = Grep(r.output, "cannot create trace directory");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("the job was not started: choose a writable place with -o DIR") != std::string::npos);
  CHECK(Grep(r.output, "started").size() == 1);  // that line: the command never ran
}

TEST_CASE("record warns before the job starts when the disk has little room", "[e2e]") {
  TempDir tmp;
  SmallDisk disk(tmp, "4m");
  RunResult r = Run(Replay() + " record -o " + disk.path + "/t -- echo started");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(Grep(r.output, "free for " + disk.path + "/t: recording stops where the disk fills").size() == 1);
  CHECK(Grep(r.output, "started").size() == 1);
}

TEST_CASE("a collective called in place is recorded like the same call with separate buffers", "[e2e]") {
  for (int ranks : {2, 3}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      const std::string program = Mpirun(ranks) + " " + TestProgram("mpi_in_place");
      const std::vector<std::string> expected = PlainChecksums(program);
      TempDir tmp;
      RunResult rec = Run(Record(tmp / "t", program, "data"));
      INFO(rec.output);
      REQUIRE(rec.exit_code == 0);
      // The same checksums: recording in place changes nothing.
      CHECK(Checksums(rec.output) == expected);
      auto trace = ReadTrace(tmp / "t");
      REQUIRE(trace.size() == static_cast<size_t>(ranks));
      const std::vector<std::string> apis = {
          "MPI_Reduce",    "MPI_Allreduce", "MPI_Scan",      "MPI_Gather",   "MPI_Gatherv",
          "MPI_Allgather", "MPI_Allgatherv", "MPI_Scatter",  "MPI_Scatterv", "MPI_Alltoall",
          "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"};
      for (const auto& [rank, rk] : trace) {
        for (const std::string& api : apis) {
          INFO("rank " << rank << ", " << api);
          auto ops = rk.Ops(api);
          REQUIRE(ops.size() == 2);
          const OpEvent& apart = ops[0]->op;
          const OpEvent& in_place = ops[1]->op;
          // The second of a pair is in place where this rank may be.
          CHECK((apart.flags & op_flags::kInPlace) == 0);
          CHECK(in_place.count == apart.count);
          CHECK(in_place.bytes == apart.bytes);
          CHECK(in_place.dtype == apart.dtype);
          CHECK(in_place.recv_count == apart.recv_count);
          CHECK(ops[1]->list == ops[0]->list);
          CHECK((in_place.flags & op_flags::kHasSendHash) == (apart.flags & op_flags::kHasSendHash));
          CHECK(in_place.send_hash == apart.send_hash);
        }
        // The root of a scatter in place receives nothing; every other call of
        // a pair received the same bytes.
        for (const std::string& api : apis) {
          INFO("rank " << rank << ", " << api << ": what was received");
          std::vector<const ReturnEvent*> rets;
          for (const Event& e : rk.events()) {
            if (e.kind == EventKind::kReturn && rk.Api(e) == api) rets.push_back(&e.ret);
          }
          REQUIRE(rets.size() == 2);
          const bool root_in_place = api.rfind("MPI_Scatter", 0) == 0 && rank == ranks - 1;
          if (root_in_place) {
            CHECK((rets[1]->flags & op_flags::kHasRecvHash) == 0);
          } else {
            CHECK((rets[1]->flags & op_flags::kHasRecvHash) == (rets[0]->flags & op_flags::kHasRecvHash));
            CHECK(rets[1]->recv_hash == rets[0]->recv_hash);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace replay
