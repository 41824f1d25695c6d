// End-to-end: NCCL jobs recorded, checked and re-run, on the host NCCL
// stand-in (tests/nccl_host) so that they run on CPUs under mpirun. The
// program is examples/nccl_train built against the stand-in.
#include <algorithm>
#include <cstdio>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <nccl.h>
#include <set>
#include <string>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"
#include "util/json.h"

namespace replay {
namespace {

// Hung jobs are stopped after this many seconds; generous, so that a loaded
// machine still reaches the fault (at step 2) before the stop.
constexpr int kHangTimeoutS = 20;

std::string NcclTrain() { return testing::BuildPath("examples/nccl_train/nccl_train_host"); }

std::string Train(int ranks, const std::string& args) {
  return Mpirun(ranks) + " " + NcclTrain() + " --ckpt-every 0 " + args;
}

RunResult Record(const std::string& dir, int ranks, const std::string& args, const std::string& level = "hash",
                 int timeout_s = 120) {
  return Run(Replay() + " record --level " + level + " -o " + dir + " -- " + Train(ranks, args), timeout_s);
}

TEST_CASE("an NCCL job is recorded whole: communicators, groups, every operation called, enqueued and completed",
          "[e2e][nccl]") {
  TempDir tmp;
  RunResult plain = Run(Train(4, "--steps 4"));
  REQUIRE(plain.exit_code == 0);
  RunResult rec = Record(tmp / "t", 4, "--steps 4");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  // Recording changes nothing the program prints.
  CHECK(Sorted(Grep(rec.output, " loss ")) == Sorted(Grep(plain.output, " loss ")));
  CHECK(Grep(rec.output, "final-params") .size() == 4);

  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 4);
  // The NCCL the calls went to says its version into each rank's header.
  const std::string nccl_version = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
  for (auto& [rank, r] : trace) CHECK(r.reader->header().Version("nccl") == nccl_version);
  // Communicator identities agree across ranks without any extra communication:
  // the unique id's communicator, and the splits of it.
  std::map<int, std::set<uint64_t>> comms_of;
  for (auto& [rank, r] : trace) {
    int nccl_comms = 0;
    for (const Event& e : r.events()) {
      if (e.kind != EventKind::kCommCreate || (e.comm_create.flags & comm_flags::kNccl) == 0) continue;
      ++nccl_comms;
      comms_of[rank].insert(e.comm_create.comm);
      if (r.Api(e.comm_create.api) == "ncclCommInitRank") {
        CHECK(e.comm_create.size == 4);
        CHECK(e.comm_create.rank == rank);
        CHECK(e.comm_create.parent == 0);
      } else {
        CHECK(r.Api(e.comm_create.api) == "ncclCommSplit");
        CHECK(e.comm_create.parent != 0);
      }
    }
    CHECK(nccl_comms == 3);  // world, grad, metrics
  }
  // world and grad are the same on every rank; metrics splits by parity.
  std::set<uint64_t> common = comms_of[0];
  for (auto& [rank, ids] : comms_of) {
    std::set<uint64_t> both;
    std::set_intersection(common.begin(), common.end(), ids.begin(), ids.end(), std::inserter(both, both.end()));
    common = both;
  }
  CHECK(common.size() == 2);
  CHECK(comms_of[0] == comms_of[2]);
  CHECK(comms_of[1] == comms_of[3]);
  CHECK(comms_of[0] != comms_of[1]);

  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    std::map<uint64_t, const Event*> pending;  // request -> op
    std::map<uint64_t, uint64_t> last_seq;     // comm -> collective sequence number
    int grouped = 0, group_starts = 0, group_ends = 0, allreduces = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kGroup) {
        (e.group.is_end ? group_ends : group_starts)++;
      } else if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kNonBlocking) == 0 && e.op.seq != 0 &&
                 r.Api(e.op.api).rfind("nccl", 0) == 0) {
        // Splits and frees take a sequence number on their parent too.
        CHECK(e.op.seq == last_seq[e.op.comm] + 1);
        last_seq[e.op.comm] = e.op.seq;
      } else if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kNonBlocking) != 0 &&
                 r.Api(e.op.api).rfind("nccl", 0) == 0) {
        pending[e.op.request] = &e;
        if ((e.op.flags & op_flags::kInGroup) != 0) {
          ++grouped;
          CHECK(e.op.group != 0);
        }
        if (r.Api(e.op.api) == "ncclAllReduce") ++allreduces;
        if (e.op.seq != 0) {
          // Per-communicator collective numbers count up by one.
          CHECK(e.op.seq == last_seq[e.op.comm] + 1);
          last_seq[e.op.comm] = e.op.seq;
        }
      } else if (e.kind == EventKind::kCompletion && pending.count(e.completion.request) != 0) {
        const Event* op = pending[e.completion.request];
        CHECK(e.completion.seq == op->op.seq);
        if (r.Api(op->op.api) == "ncclAllReduce") CHECK((e.completion.flags & op_flags::kHasRecvHash) != 0);
        pending.erase(e.completion.request);
      }
    }
    CHECK(pending.empty());  // every operation completed
    CHECK(group_starts == group_ends);
    CHECK(group_starts >= 4);  // the cursor exchange of each step
    CHECK(grouped == 2 * group_starts);
    CHECK(allreduces >= 4 * 3);  // gradients, metrics and loss at each step
  }
  // A clean job has nothing to report.
  CheckClean(tmp / "t");
}

TEST_CASE("check names the rank that skipped the NCCL gradient allreduce, and where it waits instead",
          "[e2e][nccl]") {
  TempDir tmp;
  RunResult rec = Record(tmp / "t", 4, "--steps 6 --fault hang:rank=1,step=2", "hash", kHangTimeoutS);
  INFO(rec.output);
  const json f = FirstFinding(tmp / "t", "missing_ranks", json::array({1}), "ncclAllReduce");
  CHECK(f["comm"]["members"] == json::array({0, 1, 2, 3}));
  CHECK(f["comm"]["name"].get<std::string>().find("split(nccl") == 0);
  const json& missing = f["data"]["missing"][0];
  CHECK(missing["blocked_in"]["api"] == "ncclAllReduce");
  CHECK(missing["blocked_in"]["comm_name"] == "nccl");
}

TEST_CASE("check reports the count mismatch of an NCCL allreduce", "[e2e][nccl]") {
  TempDir tmp;
  RunResult rec = Record(tmp / "t", 2, "--steps 6 --fault mismatch:rank=1,step=2", "hash", kHangTimeoutS);
  INFO(rec.output);
  const json f = FirstFinding(tmp / "t", "mismatch", json::array({1}), "ncclAllReduce");
  CHECK(f["data"]["field"] == "count");
}

TEST_CASE("check names the rank whose NCCL gradient first held a NaN", "[e2e][nccl]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "t", 4, "--steps 5 --fault nan:rank=3,step=2").exit_code == 0);
  json k = CheckFaulty(tmp / "t");
  INFO(Titles(k));
  const json* nan = nullptr;
  for (const auto& f : k["findings"]) {
    if (f["kind"] == "nan_inf") nan = &f;
  }
  REQUIRE(nan != nullptr);
  CHECK((*nan)["ranks"] == json::array({3}));
  CHECK((*nan)["op"] == "ncclAllReduce");
  CHECK((*nan)["comm"]["members"] == json::array({0, 1, 2, 3}));
}

TEST_CASE("rerun of one NCCL rank alone prints its recorded lines bit for bit", "[e2e][nccl]") {
  TempDir tmp;
  const std::string args = "--ckpt-every 0 --steps 5 --fault unseeded";
  RunResult rec = Run("cd " + tmp.path() + " && " + Replay() + " record --level data -o " + (tmp / "t") + " -- " +
                      Mpirun(4) + " " + NcclTrain() + " " + args);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  RunResult re = Run("cd " + tmp.path() + " && " + Replay() + " rerun " + (tmp / "t") + " --rank 2 -- " +
                     NcclTrain() + " " + args);
  CheckRerunPrintsRecorded(rec, re, 2);
}

TEST_CASE("drive re-issues a clean NCCL trace over MPI on host memory to completion", "[e2e][nccl]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "t", 4, "--steps 3").exit_code == 0);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --backend host --timeout 30", 90);
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "0 returned an error").size() == 4);
  CHECK(Run(Replay() + " drive " + (tmp / "t") + " --backend gpu").exit_code == 2);
}

TEST_CASE("drive reproduces an NCCL hang on host memory, without the trainer", "[e2e][nccl]") {
  TempDir tmp;
  RunResult rec = Record(tmp / "t", 4, "--steps 6 --fault hang:rank=1,step=2", "hash", kHangTimeoutS);
  INFO(rec.output);
  RunResult d = Run(Replay() + " drive " + (tmp / "t") + " --timeout 5", 60);
  INFO(d.output);
  CHECK(d.exit_code == 1);
  CHECK(Grep(d.output, "hung").size() >= 1);
  // The drive's own calls are MPI's: the gradient allreduce is re-issued as
  // MPI_Iallreduce on the communicator that stands for the NCCL one.
  CHECK(Grep(d.output, "rank 1 never entered MPI_Iallreduce").size() == 1);
}

// `replay drive --backend nccl` on the stand-ins: their libnccl.so.2 and
// libcuda.so.1 found first on LD_LIBRARY_PATH, as the real ones are on a GPU
// machine. The stand-in runs each NCCL call to its end inside the call, so a
// hang blocks there and `replay drive` stops it at --timeout.
std::string DriveNccl(const std::string& dir, const std::string& args) {
  return "LD_LIBRARY_PATH=" + testing::BuildPath("nccl_host") + ":" + testing::BuildPath("nccl_host/cuda") + " " +
         Replay() + " drive " + dir + " --backend nccl " + args;
}

TEST_CASE("drive --backend nccl re-issues a clean NCCL trace as real NCCL calls on device memory", "[e2e][nccl]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "t", 4, "--steps 3").exit_code == 0);
  RunResult d = Run(DriveNccl(tmp / "t", "--timeout 30 --keep " + (tmp / "d")), 90);
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "completed").size() == 1);
  CHECK(Grep(d.output, "CUDA device 0 of 1").size() == 4);
  CHECK(Grep(d.output, "0 returned an error").size() == 4);
  // The drive's own trace: the recorder saw NCCL itself, on device buffers,
  // with the recording's communicators, groups and operations.
  auto recorded = ReadTrace(tmp / "t");
  auto driven = ReadTrace(tmp / "d/trace");
  REQUIRE(driven.size() == 4);
  for (auto& [rank, r] : driven) {
    INFO("rank " << rank);
    auto count = [](const TraceRank& of, const std::string& api, bool device) {
      int n = 0;
      for (const Event& e : of.events()) {
        if (e.kind == EventKind::kOp && of.Api(e.op.api) == api &&
            (!device || (e.op.flags & op_flags::kDevice) != 0)) {
          ++n;
        }
      }
      return n;
    };
    const TraceRank& before = recorded[rank];
    CHECK(count(r, "ncclCommInitRank", false) == 1);
    CHECK(count(r, "ncclCommSplit", false) == count(before, "ncclCommSplit", false));
    CHECK(count(r, "ncclAllReduce", true) == count(before, "ncclAllReduce", false));
    CHECK(count(r, "ncclSend", true) == count(before, "ncclSend", false));
    CHECK(count(r, "ncclRecv", true) == count(before, "ncclRecv", false));
    CHECK(count(r, "ncclAllReduce", true) >= 9);
    int groups = 0, completions = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kGroup && !e.group.is_end) ++groups;
      if (e.kind == EventKind::kCompletion) ++completions;
    }
    CHECK(groups >= 3);  // the cursor exchange of each step
    CHECK(completions == count(r, "ncclAllReduce", true) + count(r, "ncclBroadcast", true) +
                             count(r, "ncclSend", true) + count(r, "ncclRecv", true));
  }
}

TEST_CASE("drive --backend nccl re-issues every NCCL collective with its recorded count, type, root and operator",
          "[e2e][nccl]") {
  TempDir tmp;
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + Mpirun(3) + " " +
                      testing::BuildPath("tests/nccl_host/nccl_device_program") + " --steps 2 --collectives");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  RunResult d = Run(DriveNccl(tmp / "t", "--timeout 30 --keep " + (tmp / "d")), 90);
  INFO(d.output);
  CHECK(d.exit_code == 0);
  CHECK(Grep(d.output, "0 returned an error").size() == 3);
  // Per rank, the NCCL operations as called: the recording's and the drive's agree.
  auto calls = [](const TraceRank& r) {
    std::vector<std::string> out;
    for (const Event& e : r.events()) {
      if (e.kind != EventKind::kOp || (e.op.flags & op_flags::kNonBlocking) == 0) continue;
      const std::string api = r.Api(e.op.api);
      if (api.rfind("nccl", 0) != 0) continue;
      out.push_back(api + " count=" + std::to_string(e.op.count) + " dtype=" +
                    std::string(DataTypeName(e.op.dtype)) + " root=" + std::to_string(e.op.root) +
                    " op=" + std::string(RedOpName(e.op.redop)) + " peer=" + std::to_string(e.op.peer) +
                    ((e.op.flags & op_flags::kInGroup) != 0 ? " grouped" : ""));
    }
    return out;
  };
  auto recorded = ReadTrace(tmp / "t");
  auto driven = ReadTrace(tmp / "d/trace");
  REQUIRE(driven.size() == 3);
  for (auto& [rank, r] : driven) {
    INFO("rank " << rank);
    std::vector<std::string> want = calls(recorded[rank]);
    CHECK(want.size() == 2 * 11);  // allreduce, send, recv and eight other collectives per step
    CHECK(calls(r) == want);
  }
}

// `replay drive --backend nccl --timeout 5` of nccl_train recorded at `ranks`
// ranks with `args`, which make it fail (the recording is stopped after
// kHangTimeoutS): the drive exits 1. What it printed.
std::string DriveNcclFaulty(const TempDir& tmp, int ranks, const std::string& args) {
  RunResult rec = Record(tmp / "t", ranks, args, "hash", kHangTimeoutS);
  RunResult d = Run(DriveNccl(tmp / "t", "--timeout 5"), 90);
  INFO(rec.output << d.output);
  CHECK(d.exit_code == 1);
  return d.output;
}

TEST_CASE("drive --backend nccl reproduces an NCCL hang and names the rank that never entered the allreduce",
          "[e2e][nccl]") {
  TempDir tmp;
  const std::string driven = DriveNcclFaulty(tmp, 4, "--steps 6 --fault hang:rank=1,step=2");
  INFO(driven);
  CHECK(Grep(driven, "hung").size() >= 1);
  // The drive's own calls are NCCL's now, on the communicators it split as the job did.
  CHECK(Grep(driven, "rank 1 never entered ncclAllReduce on split(nccl, color=0)").size() == 1);
}

TEST_CASE("drive --backend nccl reproduces the count mismatch of an NCCL allreduce", "[e2e][nccl]") {
  TempDir tmp;
  const std::string driven = DriveNcclFaulty(tmp, 2, "--steps 6 --fault mismatch:rank=1,step=2");
  INFO(driven);
  CHECK(Grep(driven, "mismatched ncclAllReduce").size() == 1);
  CHECK(Grep(driven, "rank 1 passes count 1024").size() == 1);
}

TEST_CASE("drive --backend nccl without a loadable libnccl.so.2 says so in one line and suggests --backend host",
          "[e2e][nccl]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "t", 2, "--steps 1").exit_code == 0);
  // A broken libnccl.so.2 ahead of any other on the search path: it cannot be loaded.
  REQUIRE(Run("mkdir -p " + (tmp / "lib") + " && : > " + (tmp / "lib/libnccl.so.2")).exit_code == 0);
  RunResult d = Run("LD_LIBRARY_PATH=" + (tmp / "lib") + ":" + testing::BuildPath("nccl_host/cuda") + " " + Replay() +
                    " drive " + (tmp / "t") + " --backend nccl");
  INFO(d.output);
  CHECK(d.exit_code == 2);
  auto line = Grep(d.output, "libnccl.so.2");
  REQUIRE(line.size() == 1);
  CHECK(line[0].find("cannot be loaded") != std::string::npos);
  CHECK(line[0].find("--backend host") != std::string::npos);
  CHECK(Grep(d.output, "replay-drive").empty());  // refused before anything started
}

// The device path on the host CUDA driver stand-in (tests/nccl_host/cuda_host.cpp).
std::string DeviceProgram(int ranks, const std::string& args) {
  return Mpirun(ranks) + " " + testing::BuildPath("tests/nccl_host/nccl_device_program") + " " + args;
}

// nccl_device_program at 2 ranks with `args`, recorded into `dir` (with
// `options`, such as a level); the recording must succeed. What it printed.
std::string RecordDevice(const std::string& dir, const std::string& args, const std::string& options = "") {
  RunResult rec = Run(Replay() + " record " + options + " -o " + dir + " -- " + DeviceProgram(2, args));
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  return rec.output;
}

TEST_CASE("an NCCL operation captured into a CUDA graph is marked, and nothing is added to the graph", "[e2e][nccl]") {
  TempDir tmp;
  const std::string args = "--steps 1 --capture";
  const std::string plain = Succeeded(DeviceProgram(2, args));
  CHECK(Grep(plain, "captured nodes 0").size() == 2);
  for (const char* level : {"meta", "hash", "data"}) {
    INFO("level " << level);
    const std::string rec = RecordDevice(tmp / level, args, std::string("--level ") + level);
    INFO(rec);
    CHECK(Sorted(Grep(rec, "step ")) == Sorted(Grep(plain, "step ")));
    // Neither a completion event nor a staging copy went into the graph.
    CHECK(Grep(rec, "captured nodes 0").size() == 2);
    for (auto& [rank, r] : ReadTrace(tmp / level)) {
      INFO("rank " << rank);
      std::map<uint64_t, bool> captured;  // request -> captured
      int completions_of_captured = 0;
      for (const Event& e : r.events()) {
        if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kDevice) != 0 && e.op.request != 0) {
          captured[e.op.request] = (e.op.flags & op_flags::kGraphCaptured) != 0;
        } else if (e.kind == EventKind::kCompletion && captured.count(e.completion.request) != 0 &&
                   captured[e.completion.request]) {
          ++completions_of_captured;
        }
      }
      int n = 0;
      for (auto& [request, c] : captured) n += c ? 1 : 0;
      CHECK(n == 1);  // the one allreduce made while capturing
      CHECK(captured.size() == 4);
      CHECK(completions_of_captured == 0);
    }
  }
}

TEST_CASE("check names the rank that launched a CUDA graph holding an NCCL allreduce fewer times", "[e2e][nccl]") {
  TempDir tmp;
  // Each rank captures one allreduce into a graph and launches it three
  // times, rank 1 only twice: the others' third run waits for it.
  for (const char* skip : {"", " --skip-launch 1"}) {
    INFO("skip:" << skip);
    const std::string dir = tmp / (*skip == '\0' ? "even" : "skip");
    RunResult rec = Run(Replay() + " record -o " + dir + " -- " +
                        DeviceProgram(2, std::string("--steps 1 --capture --launches 3") + skip));
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
    int code = -1;
    json found = CheckTrace(dir, &code);
    INFO(Titles(found));
    if (*skip == '\0') {
      CHECK(code == 0);
      continue;
    }
    CHECK(Grep(rec.output, "rank 1 launched the graph 2 times").size() == 1);
    CHECK(code != 0);
    REQUIRE(found["findings"].size() == 1);
    const json& f = found["findings"][0];
    CHECK(f["kind"] == "missing_ranks");
    CHECK(f["ranks"] == json::array({1}));
    CHECK(f["op"] == "ncclAllReduce");
    CHECK(f["data"]["captured"] == true);
    CHECK(f["data"]["launches"] == json({{"0", 3}, {"1", 2}}));
    CHECK(f["title"].get<std::string>().find("captured into a CUDA graph") != std::string::npos);
  }
}

TEST_CASE("device buffers: completions come from CUDA events, data from copies made on the stream", "[e2e][nccl]") {
  TempDir tmp;
  const std::string plain = Succeeded(DeviceProgram(2, "--steps 3"));
  const std::string rec = RecordDevice(tmp / "t", "--steps 3", "--level data");
  INFO(rec);
  CHECK(Sorted(Grep(rec, "step ")) == Sorted(Grep(plain, "step ")));
  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 2);
  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    std::map<uint64_t, const Event*> ops;
    int completed = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kNonBlocking) != 0) {
        CHECK((e.op.flags & op_flags::kDevice) != 0);
        CHECK((e.op.flags & op_flags::kHasSendHash) == 0);  // device data is not read at the call
        ops[e.op.request] = &e;
      } else if (e.kind == EventKind::kCompletion && ops.count(e.completion.request) != 0) {
        const Event& op = *ops[e.completion.request];
        const std::string api = r.Api(op.op.api);
        CHECK((e.completion.flags & op_flags::kDevice) != 0);
        if (api == "ncclAllReduce" || api == "ncclSend") {
          CHECK((e.completion.flags & op_flags::kHasSendHash) != 0);
          CHECK(e.completion.send_nan == 0);
        }
        if (api == "ncclAllReduce" || api == "ncclRecv") {
          CHECK((e.completion.flags & op_flags::kHasRecvHash) != 0);
          CHECK(e.completion.payload_size == 1024 * sizeof(float));
        }
        ++completed;
      }
    }
    CHECK(ops.size() == 3 * 3);  // allreduce, send, recv per step
    CHECK(completed == static_cast<int>(ops.size()));
    // NCCL's own kernels, launched inside its calls (one for the allreduce,
    // one for the group of send and receive), are counted on their stream.
    const uint64_t stream = ops.begin()->second->op.stream;
    uint64_t kernels = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kCuda && e.cuda.op == CudaOp::kKernels && e.cuda.stream == stream) {
        kernels += e.cuda.count;
      }
    }
    CHECK(kernels == 2 * 3);
  }
  CheckClean(tmp / "t");
  // The two ranks' sends of one step are fingerprinted alike on both sides:
  // each rank's receive is what its neighbour sent.
  std::map<int, std::vector<uint64_t>> sent, received;
  for (auto& [rank, r] : trace) {
    std::map<uint64_t, std::string> api_of;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kOp) api_of[e.op.request] = r.Api(e.op.api);
      if (e.kind != EventKind::kCompletion) continue;
      const std::string& api = api_of[e.completion.request];
      if (api == "ncclSend") sent[rank].push_back(e.completion.send_hash);
      if (api == "ncclRecv") received[rank].push_back(e.completion.recv_hash);
    }
  }
  CHECK(sent[0] == received[1]);
  CHECK(sent[1] == received[0]);
}

// Per rank, what the driver stand-in counted (nccl_device_program --counters):
// fingerprint kernels launched and device-to-host copies made.
std::map<int, std::pair<int, int>> Counters(const std::string& output) {
  std::map<int, std::pair<int, int>> out;
  for (const std::string& line : Grep(output, "fingerprint kernels")) {
    int rank = -1, kernels = -1, copies = -1;
    if (std::sscanf(line.c_str(), "rank %d fingerprint kernels %d device-to-host copies %d", &rank, &kernels,
                    &copies) == 3) {
      out[rank] = {kernels, copies};
    }
  }
  return out;
}

// Per rank, the fingerprints of every completion, in order.
std::map<int, std::vector<std::string>> CompletionFingerprints(const std::string& dir) {
  std::map<int, std::vector<std::string>> out;
  for (auto& [rank, r] : ReadTrace(dir)) {
    for (const Event& e : r.events()) {
      if (e.kind != EventKind::kCompletion) continue;
      const CompletionEvent& c = e.completion;
      std::string f = "req " + std::to_string(c.request);
      if ((c.flags & op_flags::kHasSendHash) != 0) {
        f += " send " + std::to_string(c.send_hash) + " nan " + std::to_string(c.send_nan) + " inf " +
             std::to_string(c.send_inf);
      }
      if ((c.flags & op_flags::kHasRecvHash) != 0) {
        f += " recv " + std::to_string(c.recv_hash) + " nan " + std::to_string(c.recv_nan) + " inf " +
             std::to_string(c.recv_inf);
      }
      out[rank].push_back(f);
    }
  }
  return out;
}

TEST_CASE("staging copies of device data reuse their page-locked buffers", "[e2e][nccl]") {
  TempDir tmp;
  // Level data copies every received buffer to the host, twice per step. The
  // pause lets the recorder see each step's copies done before the next.
  const std::string args = "--steps 16 --pause-us 2000 --counters";
  RunResult rec = Run(Replay() + " record --level data -o " + (tmp / "t") + " -- " + DeviceProgram(2, args));
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  auto counters = Counters(rec.output);
  REQUIRE(counters.size() == 2);
  for (const std::string& line : Grep(rec.output, "page-locked allocations")) {
    int rank = -1, allocations = -1;
    REQUIRE(std::sscanf(line.c_str(), "rank %d page-locked allocations %d", &rank, &allocations) == 2);
    INFO(line);
    CHECK(counters[rank].second >= 2 * 16);  // the staging copies (and the program's own)
    CHECK(allocations <= 8);                 // not one per copy
  }
}

TEST_CASE("device buffers are fingerprinted by a kernel on the stream, as host copies would be", "[e2e][nccl]") {
  TempDir tmp;
  const std::string args = "--steps 2 --collectives --nan 1:2 --counters";
  RunResult plain = Run(DeviceProgram(2, args));
  REQUIRE(plain.exit_code == 0);
  auto own = Counters(plain.output);  // the program's own copies
  REQUIRE(own.size() == 2);
  RunResult kernel = Run(Replay() + " record -o " + (tmp / "kernel") + " -- " + DeviceProgram(2, args));
  INFO(kernel.output);
  REQUIRE(kernel.exit_code == 0);
  RunResult copy = Run("REPLAY_DEVICE_HASH=copy " + Replay() + " record -o " + (tmp / "copy") + " -- " +
                       DeviceProgram(2, args));
  INFO(copy.output);
  REQUIRE(copy.exit_code == 0);
  CHECK(Sorted(Grep(kernel.output, "step ")) == Sorted(Grep(plain.output, "step ")));
  auto by_kernel = Counters(kernel.output);
  auto by_copy = Counters(copy.output);
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    // Every send and receive buffer of every collective went through the
    // kernel, and not one byte was copied to the host for it.
    CHECK(by_kernel[rank].first >= 2 * 11);
    CHECK(by_kernel[rank].second == own[rank].second);
    CHECK(by_copy[rank].first == 0);
    CHECK(by_copy[rank].second > own[rank].second + 2 * 11);
  }
  // The same fingerprints, NaN counts included, either way.
  auto k = CompletionFingerprints(tmp / "kernel");
  auto c = CompletionFingerprints(tmp / "copy");
  REQUIRE(k.size() == 2);
  CHECK(k == c);
  FirstFinding(tmp / "kernel", "nan_inf", json::array({1}));
}

TEST_CASE("the kernel fingerprints device buffers beyond the hash limit, which copies do not", "[e2e][nccl]") {
  TempDir tmp;
  // 256 KiB per buffer against a 16 KiB limit: a sample is hashed, every element scanned.
  const std::string args = "--steps 2 --count 65536 --nan 0:2";
  for (const char* mode : {"kernel", "copy"}) {
    INFO(mode);
    RunResult rec = Run(std::string("REPLAY_HASH_LIMIT_KB=16 REPLAY_DEVICE_HASH=") + mode + " " + Replay() +
                        " record -o " + (tmp / mode) + " -- " + DeviceProgram(2, args));
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
  }
  for (auto& [rank, fingerprints] : CompletionFingerprints(tmp / "kernel")) {
    INFO("rank " << rank);
    int hashed = 0;
    for (const std::string& f : fingerprints) hashed += f.find(" recv ") != std::string::npos ? 1 : 0;
    CHECK(hashed == 2 * 2);  // the allreduce and the receive of each step
  }
  for (auto& [rank, fingerprints] : CompletionFingerprints(tmp / "copy")) {
    for (const std::string& f : fingerprints) CHECK(f.find(" recv ") == std::string::npos);
  }
  FirstFinding(tmp / "kernel", "nan_inf", json::array({0}));
}

// Per rank, the nccl_device_program --counters line of what was used after its
// context was destroyed.
std::map<int, std::string> TeardownCounters(const std::string& output) {
  std::map<int, std::string> out;
  for (const std::string& line : Grep(output, "stale launches")) {
    int rank = -1;
    if (std::sscanf(line.c_str(), "rank %d", &rank) == 1) out[rank] = line.substr(line.find("stale"));
  }
  return out;
}

TEST_CASE("a device reset between steps leaves every completion recorded and the kernel loaded again", "[e2e][nccl]") {
  TempDir tmp;
  // Two steps, cudaDeviceReset's driver call, two more steps in the new context.
  const std::string args = "--steps 2 --reset --counters";
  const std::string plain = Succeeded(DeviceProgram(2, args));
  REQUIRE(Grep(plain, "step 4 ").size() == 2);
  const std::string rec = RecordDevice(tmp / "t", args);
  INFO(rec);
  CHECK(Sorted(Grep(rec, "step ")) == Sorted(Grep(plain, "step ")));
  // Nothing of the destroyed context was used after it went: no launch of the
  // kernel loaded there, no query of the events placed there.
  auto teardown = TeardownCounters(rec);
  REQUIRE(teardown.size() == 2);
  for (auto& [rank, line] : teardown) CHECK(line == "stale launches 0 dead queries 0");
  // And the kernel was loaded again: every buffer of all four steps went through it.
  for (auto& [rank, counts] : Counters(rec)) {
    INFO("rank " << rank);
    CHECK(counts.first == 4 * 4);  // per step: the allreduce's two buffers, the send's, the receive's
  }
  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 2);
  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    std::map<uint64_t, std::string> ops;  // request -> api
    int completed = 0, errors = 0;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kDevice) != 0 && e.op.request != 0) {
        ops[e.op.request] = r.Api(e.op.api);
      } else if (e.kind == EventKind::kCompletion && ops.count(e.completion.request) != 0) {
        const std::string& api = ops[e.completion.request];
        if (api == "ncclAllReduce" || api == "ncclSend") CHECK((e.completion.flags & op_flags::kHasSendHash) != 0);
        if (api == "ncclAllReduce" || api == "ncclRecv") CHECK((e.completion.flags & op_flags::kHasRecvHash) != 0);
        ++completed;
      } else if (e.kind == EventKind::kError) {
        ++errors;
      }
    }
    CHECK(ops.size() == 4 * 3);
    CHECK(completed == static_cast<int>(ops.size()));
    CHECK(errors == 0);
  }
  CheckClean(tmp / "t");
}

TEST_CASE("an NCCL operation whose stream fails is recorded with the CUDA error, not as completed", "[e2e][nccl]") {
  TempDir tmp;
  // Rank 0's context takes a sticky error right after its last allreduce is enqueued.
  const std::string args = "--steps 2 --fault 0";
  RunResult plain = Run(DeviceProgram(2, args));
  INFO(plain.output);
  REQUIRE(Grep(plain.output, "rank 0 CUDA error 700 at step 2").size() == 1);
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + DeviceProgram(2, args));
  INFO(rec.output);
  // What the program sees is unchanged: its lines, its error, its exit code.
  CHECK(rec.exit_code == plain.exit_code);
  CHECK(Sorted(Grep(rec.output, "step ")) == Sorted(Grep(plain.output, "step ")));
  CHECK(Grep(rec.output, "rank 0 CUDA error 700 at step 2").size() == 1);
  auto trace = ReadTrace(tmp / "t");
  REQUIRE(trace.size() == 2);
  for (auto& [rank, r] : trace) {
    INFO("rank " << rank);
    std::vector<uint64_t> requests;  // device operations, in call order
    std::set<uint64_t> completed;
    std::vector<std::string> errors;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kOp && (e.op.flags & op_flags::kDevice) != 0 && e.op.request != 0) {
        requests.push_back(e.op.request);
      } else if (e.kind == EventKind::kCompletion) {
        completed.insert(e.completion.request);
      } else if (e.kind == EventKind::kError) {
        CHECK(e.error.source == ErrorSource::kCuda);
        CHECK(e.error.code == 700);
        errors.push_back(e.text);
      }
    }
    REQUIRE(requests.size() == 2 * 3);
    if (rank == 1) {
      CHECK(completed.size() == requests.size());
      CHECK(errors.empty());
      continue;
    }
    // The first step's operations completed: the program synchronised their
    // stream after them, and the driver said success. The last step's
    // allreduce, send and receive did not; each has an error event naming it.
    for (size_t i = 0; i < 3; ++i) CHECK(completed.count(requests[i]) == 1);
    for (size_t i = 3; i < requests.size(); ++i) CHECK(completed.count(requests[i]) == 0);
    CHECK(errors.size() == 3);
    for (const char* api : {"ncclAllReduce", "ncclSend", "ncclRecv"}) {
      bool named = false;
      for (const std::string& text : errors) named = named || text.rfind(api, 0) == 0;
      CHECK(named);
    }
  }
  FirstFinding(tmp / "t", "error", json::array({0}));
}

TEST_CASE("device memory is recognised when the CUDA driver is loaded after the first NCCL call", "[e2e][nccl]") {
  TempDir tmp;
  const std::string program = Mpirun(2) + " " + testing::BuildPath("tests/nccl_host/nccl_late_driver_program") + " " +
                              testing::BuildPath("nccl_host/cuda/libcuda.so.1");
  RunResult rec = Run(Replay() + " record -o " + (tmp / "t") + " -- " + program);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  CHECK(Grep(rec.output, "device sum 3").size() == 2);
  for (auto& [rank, r] : ReadTrace(tmp / "t")) {
    INFO("rank " << rank);
    std::vector<bool> device;  // per ncclAllReduce, in order
    std::map<uint64_t, bool> completed_with_hash;
    for (const Event& e : r.events()) {
      if (e.kind == EventKind::kOp && r.Api(e.op.api) == "ncclAllReduce") {
        device.push_back((e.op.flags & op_flags::kDevice) != 0);
        completed_with_hash[e.op.request] = false;
      }
      if (e.kind == EventKind::kCompletion && completed_with_hash.count(e.completion.request) != 0) {
        completed_with_hash[e.completion.request] = (e.completion.flags & op_flags::kHasRecvHash) != 0;
      }
    }
    CHECK(device == std::vector<bool>{false, true});
    for (auto& [request, hashed] : completed_with_hash) CHECK(hashed);
  }
}

TEST_CASE("rerun of a device rank serves the recorded bytes into its device buffers", "[e2e][nccl]") {
  TempDir tmp;
  const std::string rec = RecordDevice(tmp / "t", "--steps 3 --unseeded", "--level data");
  INFO(rec);
  RunResult re = Run(Replay() + " rerun " + (tmp / "t") + " --rank 1 -- " +
                     testing::BuildPath("tests/nccl_host/nccl_device_program") + " --steps 3 --unseeded");
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "reproduced").size() == 1);
  REQUIRE(Grep(re.output, "rank 1 sum").size() == 3);
  CHECK(Sorted(Grep(re.output, "rank 1 sum")) == Sorted(Grep(rec, "rank 1 sum")));
}

TEST_CASE("check finds the rank that sent a NaN from device memory", "[e2e][nccl]") {
  TempDir tmp;
  RecordDevice(tmp / "t", "--steps 3 --nan 1:2");
  const json f = FirstFinding(tmp / "t", "nan_inf", json::array({1}), "ncclAllReduce");
  CHECK(f["seq"] == 2);
}

TEST_CASE("a program whose NCCL is linked in and never loads the recorder as its profiler plugin is reported once", "[e2e][nccl]") {
  TempDir tmp;
  // A module named like PyTorch's CUDA library, with NCCL inside it and no
  // NCCL symbol the preload could interpose.
  std::string so = tmp / "libtorch_cuda.so";
  std::string src = tmp / "m.c";
  REQUIRE(Run("printf 'int hidden_nccl_state;\\n' > " + src + " && cc -shared -fPIC -o " + so + " " + src).exit_code ==
          0);
  // A process that never reaches a wrapper (the NCCL calls stay inside the
  // module) still hears it, at exit.
  RunResult r = Run("LD_PRELOAD=" + testing::Preload() + ":" + so + " REPLAY_DIR=" + (tmp / "t") + " bash -c 'exit 3'");
  CHECK(r.exit_code == 3);
  INFO(r.output);
  auto warnings = Grep(r.output, "did not load the recorder as its profiler plugin");
  CHECK(warnings.size() == 1);
  // Pointed at the recorder as NCCL's profiler plugin, as replay record does:
  // said once, at exit, since NCCL never loaded it.
  RunResult plugin = Run("LD_PRELOAD=" + testing::Preload() + ":" + so + " NCCL_PROFILER_PLUGIN=" + testing::Preload() +
                         " REPLAY_DIR=" + (tmp / "p") + " bash -c 'exit 3'");
  CHECK(plugin.exit_code == 3);
  INFO(plugin.output);
  CHECK(Grep(plugin.output, "did not load the recorder as its profiler plugin").size() == 1);
}

}  // namespace
}  // namespace replay
