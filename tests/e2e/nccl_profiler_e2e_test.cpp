// End-to-end: NCCL recorded through its profiler plugin interface
// (interpose/nccl_profiler.h), when NCCL is linked into the program and no
// preload can interpose its functions. tests/nccl_host/nccl_train_static is
// examples/nccl_train with the host NCCL stand-in linked in; the stand-in
// loads the plugin NCCL_PROFILER_PLUGIN names and calls it as NCCL 2.28 does.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"

namespace replay {
namespace {

// A hung job is stopped after this many seconds (mpirun passes SIGTERM on to
// its ranks, which record it); generous, so that a loaded machine still
// reaches the fault first.
constexpr int kHangTimeoutS = 15;
std::string Stopped(const std::string& command) {
  return "timeout -s TERM " + std::to_string(kHangTimeoutS) + " " + command;
}

std::string Program(const std::string& name) { return testing::BuildPath("tests/nccl_host/" + name); }
std::string StaticTrain() { return Program("nccl_train_static"); }
std::string Train(const std::string& program, int ranks, const std::string& args) {
  return Mpirun(ranks) + " " + program + " --ckpt-every 0 " + args;
}

RunResult Record(const std::string& dir, const std::string& command, const std::string& level = "hash",
                 const std::string& env = "") {
  return Run(env + " " + Replay() + " record --level " + level + " -o " + dir + " -- " + command);
}

// What every rank of a clean trace of nccl_train (4 ranks, `steps` steps)
// must hold, recorded through the plugin.
void CheckWhole(const std::string& dir, int steps) {
  auto trace = ReadTrace(dir);
  REQUIRE(trace.size() == 4);
  std::map<int, std::set<uint64_t>> comms_of;
  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    CHECK(r.Info("nccl.recorded_by") == std::vector<std::string>{"profiler plugin"});
    int nccl_comms = 0, frees = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kCommFree && r.Api(e.comm_free.api) == "ncclProfilerFinalize") ++frees;
      if (e.kind != EventKind::kCommCreate || (e.comm_create.flags & comm_flags::kNccl) == 0) continue;
      ++nccl_comms;
      CHECK(r.Api(e.comm_create.api) == "ncclProfilerInit");
      CHECK(e.comm_create.rank >= 0);
      const bool sizes = e.comm_create.size == 4 || e.comm_create.size == 2;  // world, grad; metrics by parity
      CHECK(sizes);
      comms_of[rank].insert(e.comm_create.comm);
    }
    CHECK(nccl_comms == 3);
    CHECK(frees == 3);
  }
  // The same communicators on every rank, from NCCL's commHash alone: world
  // and grad everywhere, metrics by parity.
  CHECK(comms_of[0] == comms_of[2]);
  CHECK(comms_of[1] == comms_of[3]);
  std::set<uint64_t> common;
  std::set_intersection(comms_of[0].begin(), comms_of[0].end(), comms_of[1].begin(), comms_of[1].end(),
                        std::inserter(common, common.end()));
  CHECK(common.size() == 2);

  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    std::map<uint64_t, const Event*> pending;  // request -> op
    std::map<uint64_t, uint64_t> last_seq;
    std::map<std::pair<uint64_t, int32_t>, uint64_t> last_peer_seq;
    int grouped = 0, group_starts = 0, group_ends = 0, allreduces = 0, returned = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kGroup) {
        (e.group.is_end ? group_ends : group_starts)++;
      } else if (e.kind == EventKind::kOp && r.Api(e.op.api).rfind("nccl", 0) == 0) {
        CHECK((e.op.flags & op_flags::kNonBlocking) != 0);
        pending[e.op.request] = &e;
        if ((e.op.flags & op_flags::kInGroup) != 0) ++grouped;
        if (r.Api(e.op.api) == "ncclAllReduce") ++allreduces;
        if (e.op.seq != 0) {
          CHECK(e.op.seq == last_seq[e.op.comm] + 1);
          last_seq[e.op.comm] = e.op.seq;
        } else {
          auto key = std::make_pair(e.op.comm, e.op.peer * 2 + (e.op.kind == OpKind::kSend ? 1 : 0));
          CHECK(e.op.peer_seq == last_peer_seq[key] + 1);
          last_peer_seq[key] = e.op.peer_seq;
        }
      } else if (e.kind == EventKind::kReturn && pending.count(e.ret.request) != 0) {
        ++returned;
      } else if (e.kind == EventKind::kCompletion && pending.count(e.completion.request) != 0) {
        const Event* op = pending[e.completion.request];
        CHECK(e.completion.seq == op->op.seq);
        const bool fingerprinted =
            (e.completion.flags & op_flags::kHasRecvHash) != 0 || r.Api(op->op.api) == "ncclSend";
        CHECK(fingerprinted);
        pending.erase(e.completion.request);
      }
    }
    CHECK(pending.empty());  // every operation enqueued was seen to complete
    CHECK(returned >= allreduces);
    CHECK(group_starts == group_ends);
    CHECK(group_starts == steps);  // the data-loader cursor exchange
    CHECK(grouped == 2 * group_starts);
    CHECK(allreduces == 3 * steps);  // gradient, metrics, loss
  }
}

TEST_CASE("NCCL linked into a program is recorded through NCCL's profiler plugin: communicators, groups, every "
          "operation enqueued and completed",
          "[e2e][nccl]") {
  TempDir tmp;
  RunResult plain = Run(Train(StaticTrain(), 4, "--steps 4"));
  REQUIRE(plain.exit_code == 0);
  RunResult rec = Record(tmp / "t", Train(StaticTrain(), 4, "--steps 4"));
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  // No function of its NCCL could be interposed, and none was.
  CHECK(Run("nm -D " + StaticTrain() + " | grep -c ' nccl'").output.rfind("0", 0) == 0);
  CHECK(Sorted(Grep(rec.output, " loss ")) == Sorted(Grep(plain.output, " loss ")));
  CHECK(Sorted(Grep(rec.output, "final-params")) == Sorted(Grep(plain.output, "final-params")));
  CheckWhole(tmp / "t", 4);
  CheckClean(tmp / "t");
  RunResult info = Run(Replay() + " info " + (tmp / "t"));
  CHECK(Grep(info.output, "NCCL's profiler plugin (NCCL linked into the program): ranks 0-3").size() == 1);

  SECTION("through the plugin's v6 table, as NCCL 2.29 and later call it") {
    TempDir v6;
    RunResult r6 = Record(v6 / "t", Train(StaticTrain(), 4, "--steps 4"), "hash", "NCCL_HOST_PROFILER_VERSION=6");
    REQUIRE(r6.exit_code == 0);
    CheckWhole(v6 / "t", 4);
  }
}

TEST_CASE("a libnccl.so.2 the program loads is recorded by the API interposer alone, never twice", "[e2e][nccl]") {
  TempDir tmp;
  std::string dynamic = testing::BuildPath("examples/nccl_train/nccl_train_host");
  RunResult rec = Record(tmp / "t", Train(dynamic, 2, "--steps 3"));
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  for (auto& [rank, r] : ReadTrace(tmp / "t")) {
    INFO("rank " << rank);
    CHECK(r.Info("nccl.recorded_by") == std::vector<std::string>{"api"});
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kCommCreate) CHECK(r.Api(e.comm_create.api) != "ncclProfilerInit");
    }
  }
}

TEST_CASE("check finds nccl_train's faults through NCCL's profiler plugin as through the API interposer",
          "[e2e][nccl]") {
  TempDir tmp;
  SECTION("a rank that skips the gradient allreduce") {
    Record(tmp / "t", Stopped(Train(StaticTrain(), 4, "--steps 6 --fault hang:rank=1,step=2")));
    const json f = FirstFinding(tmp / "t", "missing_ranks", json::array({1}), "ncclAllReduce");
    CHECK(f["comm"]["members"] == json::array({0, 1, 2, 3}));
  }
  SECTION("a count mismatch") {
    Record(tmp / "t", Stopped(Train(StaticTrain(), 2, "--steps 6 --fault mismatch:rank=1,step=2")));
    const json f = FirstFinding(tmp / "t", "mismatch", json::array({1}), "ncclAllReduce");
    CHECK(f["data"]["field"] == "count");
  }
  SECTION("two communicators called in opposite orders: a deadlock on the devices") {
    RunResult rec = Record(tmp / "t", Stopped(Train(StaticTrain(), 4, "--steps 6 --fault order:rank=1,step=3")));
    INFO(rec.output);
    json k = CheckFaulty(tmp / "t");
    INFO(Titles(k));
    REQUIRE(k["findings"].size() >= 2);
    std::set<int> missing;
    for (const json& f : k["findings"]) {
      CHECK(f["kind"] == "missing_ranks");
      CHECK(f["op"] == "ncclAllReduce");
      for (int r : f["ranks"]) missing.insert(r);
    }
    CHECK(missing == std::set<int>{1, 3});  // each waits for the other in another communicator
    RunResult text = Run(Replay() + " check " + (tmp / "t"));
    CHECK(Grep(text.output, "deadlock: rank").size() >= 1);
  }
  SECTION("a NaN in one rank's gradient, which an in-place allreduce sends") {
    REQUIRE(Record(tmp / "t", Train(StaticTrain(), 4, "--steps 5 --fault nan:rank=3,step=2")).exit_code == 0);
    json k = CheckFaulty(tmp / "t");
    INFO(Titles(k));
    REQUIRE(k["findings"].size() == 1);
    const json& f = k["findings"][0];
    CHECK(f["kind"] == "nan_inf");
    CHECK(f["op"] == "ncclAllReduce");
    CHECK(f["comm"]["members"] == json::array({0, 1, 2, 3}));
    // NCCL tells its profiler of the allreduce after launching it: what rank
    // 3 gave it is gone, so the rank is not named, only where it appeared.
    CHECK(f["ranks"].empty());
    CHECK(f["data"]["origin_known"] == false);
    CHECK(f["data"]["received_by"] == json::array({0, 1, 2, 3}));
  }
}

TEST_CASE("the plugin a user chose keeps getting every call NCCL would have made to it", "[e2e][nccl]") {
  TempDir tmp;
  const std::string plugin = "NCCL_PROFILER_PLUGIN=" + Program("libnccl-profiler-counting.so");
  auto counts = [&](const std::string& dir) {
    std::vector<std::string> lines;
    for (const std::string& l : Grep(Run("cat " + dir + "/* 2>/dev/null").output, "comm ")) {
      lines.push_back(l.substr(l.find(" rank ")));  // communicator hashes differ between runs
    }
    return Sorted(lines);
  };
  REQUIRE(Run("mkdir -p " + (tmp / "alone") + " " + (tmp / "chained") + " " + (tmp / "inert")).exit_code == 0);
  const std::string command = Train(StaticTrain(), 2, "--steps 3");
  REQUIRE(Run("COUNTING_PROFILER_OUT=" + (tmp / "alone") + " " + plugin + " " + command).exit_code == 0);
  std::vector<std::string> alone = counts(tmp / "alone");
  REQUIRE(alone.size() == 6);  // three communicators on each of two ranks
  CHECK(Grep(Run("cat " + (tmp / "alone") + "/*").output, "bad-parents 0").size() == 6);

  RunResult rec = Record(tmp / "t", command, "hash", "COUNTING_PROFILER_OUT=" + (tmp / "chained") + " " + plugin);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  CHECK(counts(tmp / "chained") == alone);  // the same events, with their parents its own handles
  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 2);
  for (auto& [rank, r] : trace) CHECK(r.Info("nccl.recorded_by") == std::vector<std::string>{"profiler plugin"});

  // Told to stay out of the way, the recorder still passes everything on.
  RunResult inert = Record(tmp / "u", command, "hash",
                           "REPLAY_DISABLE=1 COUNTING_PROFILER_OUT=" + (tmp / "inert") + " " + plugin);
  INFO(inert.output);
  REQUIRE(inert.exit_code == 0);
  CHECK(counts(tmp / "inert") == alone);
  CHECK(Grep(inert.output, "nothing recorded: no process of the command made").size() == 1);
}

TEST_CASE("a single-process NCCL program takes its rank from its communicator, and re-runs alone", "[e2e][nccl]") {
  for (const std::string program : {"nccl_solo_program", "nccl_solo_static"}) {
    INFO(program);
    TempDir tmp;
    RunResult rec = Run("cd " + tmp.path() + " && " + Replay() + " record --level data -o " + (tmp / "t") + " -- " +
                        Program(program));
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
    auto trace = ReadTrace(tmp / "t");
    REQUIRE(trace.size() == 1);
    CHECK(trace.begin()->first == 0);
    // (The stand-in linked in starts MPI itself, which then looks like a launcher.)
    if (program == "nccl_solo_program") {
      CHECK(trace.begin()->second.Info("nccl.world_rank") == std::vector<std::string>{"0"});
    }
    RunResult re =
        Run("cd " + tmp.path() + " && " + Replay() + " rerun " + (tmp / "t") + " --rank 0 -- " + Program(program));
    INFO(re.output);
    CHECK(re.exit_code == 0);
    CHECK(Grep(re.output, "reproduced").size() == 1);
    // Seeded from getrandom: the re-run is served the recorded entropy.
    REQUIRE(Grep(rec.output, "seed ").size() == 1);
    CHECK(Grep(re.output, "seed ") == Grep(rec.output, "seed "));
    CHECK(Grep(re.output, " sum ") == Grep(rec.output, " sum "));
  }
}

}  // namespace
}  // namespace replay
