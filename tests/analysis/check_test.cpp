#include "replay/check.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <thread>

#include "analysis/check_json.h"
#include "analysis/synthetic_job.h"
#include "replay/event_format.h"
#include "replay/oracle.h"
#include "support/checked_trace.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::CheckDir;
using testing::SyntheticJob;
using testing::Titles;

// The check of a job of `ranks` ranks whose calls `write` records.
CheckReport CheckJob(int ranks, const std::function<void(SyntheticJob&)>& write,
                     const CheckOptions& options = testing::NoWait()) {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), ranks);
    write(job);
  }
  return CheckDir(dir.path(), options);
}

// `count` allreduces on WORLD (seq 1 up), in each of which `rank` waits for
// `wait`, then MPI_Finalize.
void TimedAllreduces(SyntheticJob& job, int rank, uint64_t count, std::chrono::nanoseconds wait) {
  for (uint64_t seq = 1; seq <= count; ++seq) {
    job.Append(rank, SyntheticJob::Op(testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), seq));
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
    job.Append(rank, SyntheticJob::Ret(testing::kMpiAllreduce, SyntheticJob::World(), seq));
  }
  job.Finalize(rank);
}

// The report's first finding, which must be of `kind` and about `ranks`.
const Finding& FirstFinding(const CheckReport& report, FindingKind kind, const std::vector<int32_t>& ranks) {
  REQUIRE(!report.findings.empty());
  const Finding& f = report.findings[0];
  CHECK(f.kind == kind);
  CHECK(f.ranks == ranks);
  return f;
}

// The report's one finding, which must be of `kind` and about `ranks`.
const Finding& OnlyFinding(const CheckReport& report, FindingKind kind, const std::vector<int32_t>& ranks) {
  REQUIRE(report.findings.size() == 1);
  return FirstFinding(report, kind, ranks);
}

// The shape of examples/mpi_train: grad = dup(WORLD), metrics = split(WORLD,
// rank % 2), a broadcast, then per step a ring exchange, a metrics
// iallreduce, the gradient allreduce, the wait, the loss allreduce.
struct Trainer {
  SyntheticJob& job;
  uint64_t grad = 0;
  std::vector<uint64_t> metrics;  // per rank
  std::vector<uint64_t> world_seq, grad_seq, metrics_seq, ring_seq;

  explicit Trainer(SyntheticJob& j) : job(j) {
    int n = job.ranks();
    metrics.resize(static_cast<size_t>(n));
    world_seq.assign(static_cast<size_t>(n), 0);
    grad_seq.assign(static_cast<size_t>(n), 0);
    metrics_seq.assign(static_cast<size_t>(n), 0);
    ring_seq.assign(static_cast<size_t>(n), 0);
    job.InitAll();
    for (int r = 0; r < n; ++r) {
      std::vector<int32_t> all, parity;
      for (int i = 0; i < n; ++i) all.push_back(i);
      for (int i = r % 2; i < n; i += 2) parity.push_back(i);
      grad = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), ++world_seq[r], all);
      metrics[r] = job.Create(r, testing::kMpiCommSplit, SyntheticJob::World(), ++world_seq[r], parity, r % 2);
      job.Collective(r, testing::kMpiBcast, OpKind::kBcast, grad, ++grad_seq[r], 2048, r == 0 ? 0xb0 : 0,
                     r == 0 ? 0 : 0xb0, true, 0, 0, 0);
    }
  }
  // Site ids stand in for call sites: distinct per call in the program.
  static constexpr uint64_t kSiteIall = 0x1000, kSiteGrad = 0x2000, kSiteWait = 0x3000, kSiteLoss = 0x4000;

  void Ring(int r) {
    int n = job.ranks();
    if (n == 1) return;
    uint64_t k = ++ring_seq[r];
    uint64_t a = job.Irecv(r, (r + n - 1) % n, 1, k);
    uint64_t b = job.Isend(r, (r + 1) % n, 1, k);
    job.Wait(r, {a, b}, 2, SyntheticJob::World(), 0, (r + n - 1) % n, 1);
  }
  void Step(int r, bool skip_grad = false) {
    Ring(r);
    uint64_t req = job.Iallreduce(r, metrics[r], ++metrics_seq[r]);
    if (!skip_grad) job.Allreduce(r, grad, ++grad_seq[r], 2048, true, kSiteGrad);
    job.Wait(r, {req}, 1, metrics[r], metrics_seq[r]);
    job.Allreduce(r, SyntheticJob::World(), ++world_seq[r], 1, true, kSiteLoss);
  }
  void Finish(int r) {
    job.Collective(r, testing::kMpiCommFree, OpKind::kCommFree, metrics[r], ++metrics_seq[r], 0, 0, 0);
    job.Collective(r, testing::kMpiCommFree, OpKind::kCommFree, grad, ++grad_seq[r], 0, 0, 0);
    job.Finalize(r);
  }
};

TEST_CASE("check finds nothing in a clean job at 1, 2 and 4 ranks", "[analysis]") {
  for (int n : {1, 2, 4}) {
    testing::TempDir dir;
    {
      SyntheticJob job(dir.path(), n);
      Trainer t(job);
      for (int r = 0; r < n; ++r) {
        for (int step = 0; step < 3; ++step) t.Step(r);
        t.Finish(r);
      }
    }
    CheckReport report = CheckDir(dir.path());
    INFO("ranks " << n << "\n" << Titles(report));
    CHECK(report.findings.empty());
    CHECK(report.notes.empty());
    REQUIRE(report.ranks.size() == static_cast<size_t>(n));
    CHECK(report.ranks[0].doing == "finished (MPI_Finalize)");
  }
}

// Rank `skipper` skips the gradient allreduce of step 3 and goes on to the
// loss allreduce on WORLD; everyone blocks, then is killed with SIGTERM.
void WriteHang(const std::string& dir, int n, int skipper) {
  SyntheticJob job(dir, n);
  Trainer t(job);
  for (int r = 0; r < n; ++r) {
    t.Step(r);
    t.Step(r);
    t.Ring(r);
    t.job.Iallreduce(r, t.metrics[r], ++t.metrics_seq[r]);
    if (r == skipper) {
      job.Allreduce(r, SyntheticJob::World(), ++t.world_seq[r], 1, false, Trainer::kSiteLoss);
    } else {
      job.Allreduce(r, t.grad, ++t.grad_seq[r], 2048, false, Trainer::kSiteGrad);
    }
    job.Die(r, SIGTERM);
  }
}

TEST_CASE("check names the rank missing from a hung allreduce and what it does instead", "[analysis]") {
  testing::TempDir dir;
  WriteHang(dir.path(), 4, 1);
  CheckReport report = CheckDir(dir.path());
  INFO(Titles(report));
  REQUIRE(!report.findings.empty());
  const Finding& f = report.findings[0];
  CHECK(f.kind == FindingKind::kMissingRanks);
  REQUIRE(f.comm.has_value());
  CHECK(f.comm->name == "dup(WORLD)");
  CHECK(f.seq == 4);  // bcast, two steps, then this one
  CHECK(f.ranks == std::vector<int32_t>{1});
  CHECK(f.op == "MPI_Allreduce");
  const nlohmann::json missing = ParseJsonObject(f.data)["missing"][0];
  CHECK(missing["rank"] == 1);
  CHECK(missing["blocked_in"]["comm_name"] == "WORLD");
  CHECK(missing["blocked_in"]["api"] == "MPI_Allreduce");
  CHECK(missing["blocked_in"]["returned"] == false);
  CHECK(ParseJsonObject(f.data)["stuck"] == std::vector<int32_t>{0, 2, 3});
  CHECK(f.title.find("rank 1 never entered MPI_Allreduce on dup(WORLD) #4") != std::string::npos);
  CHECK(std::find(f.categories.begin(), f.categories.end(), "hang") != f.categories.end());
  // The waiters are reported too, after the culprit.
  REQUIRE(report.findings.size() >= 2);
  CHECK(report.findings[1].kind == FindingKind::kMissingRanks);
  CHECK(report.findings[1].comm->name == "WORLD");
  CHECK(report.findings[1].ranks == std::vector<int32_t>{0, 2, 3});
  // The metrics iallreduce the blocked ranks started but never waited for is no finding.
  for (const Finding& x : report.findings) CHECK(x.kind != FindingKind::kNeverCompleted);
  CHECK(report.ranks[1].blocked);
  CHECK(report.ranks[1].doing.find("blocked in MPI_Allreduce on WORLD") == 0);
}

TEST_CASE("check blames the rank whose control flow went its own way when two ranks wait on each other", "[analysis]") {
  for (int skipper : {0, 1}) {
    testing::TempDir dir;
    WriteHang(dir.path(), 2, skipper);
    CheckReport report = CheckDir(dir.path());
    INFO("skipper " << skipper << "\n" << Titles(report));
    REQUIRE(report.findings.size() >= 2);
    CHECK(report.findings[0].comm->name == "dup(WORLD)");
    CHECK(report.findings[0].ranks == std::vector<int32_t>{skipper});
    CHECK(report.findings[0].details.back().find("deadlock") != std::string::npos);
  }
}

TEST_CASE("check reports mismatched counts and names the odd rank", "[analysis]") {
  CheckReport report = CheckJob(4, [&](SyntheticJob& job) {
    Trainer t(job);
    for (int r = 0; r < 4; ++r) {
      job.Allreduce(r, t.grad, ++t.grad_seq[r], r == 2 ? 1024 : 2048, r == 2);
      if (r == 2) {
        job.Finalize(r);
      } else {
        job.Die(r, SIGTERM);
      }
    }
  });
  INFO(Titles(report));
  const Finding& f = FirstFinding(report, FindingKind::kMismatch, {2});
  CHECK(f.seq == 2);
  CHECK(ParseJsonObject(f.data)["field"] == "count");
  CHECK(f.title.find("rank 2 passes count 1024, ranks 0,1,3 pass count 2048") != std::string::npos);
  // The ranks stuck in it are told, not reported again as never completed.
  CHECK(f.details.back().find("ranks 0,1,3 never returned") != std::string::npos);
  for (const Finding& x : report.findings) CHECK(x.kind != FindingKind::kNeverCompleted);
}

TEST_CASE("check breaks a tie between two ranks by what each call site did before", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    Trainer t(job);
    for (int r = 0; r < 2; ++r) {
      job.Allreduce(r, t.grad, ++t.grad_seq[r], 2048, true, Trainer::kSiteGrad);
      job.Allreduce(r, t.grad, ++t.grad_seq[r], r == 0 ? 512 : 2048, true, Trainer::kSiteGrad);
      job.Finalize(r);
    }
  });
  INFO(Titles(report));
  FirstFinding(report, FindingKind::kMismatch, {0});
}

TEST_CASE("check reports ranks calling different collectives at one sequence number", "[analysis]") {
  CheckReport report = CheckJob(3, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 3; ++r) {
      if (r == 1) {
        job.Collective(r, testing::kMpiBarrier, OpKind::kBarrier, SyntheticJob::World(), 1, 0, 0, 0, false);
      } else {
        job.Allreduce(r, SyntheticJob::World(), 1, 8, false);
      }
      job.Die(r, SIGTERM);
    }
  });
  INFO(Titles(report));
  REQUIRE(!report.findings.empty());
  const Finding& f = report.findings[0];
  CHECK(f.kind == FindingKind::kMismatch);
  CHECK(ParseJsonObject(f.data)["field"] == "op");
  CHECK(f.ranks == std::vector<int32_t>{1});
  CHECK(f.title.find("rank 1 calls MPI_Barrier, ranks 0,2 call MPI_Allreduce") != std::string::npos);
  CHECK(report.findings.size() == 1);  // later calls on WORLD are its consequences
}

TEST_CASE("check reports a collective every member entered and none left as never completed", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 2; ++r) {
      job.Allreduce(r, SyntheticJob::World(), 1);
      job.Allreduce(r, SyntheticJob::World(), 2, 1024, false);
      job.Die(r, SIGTERM);
    }
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 1);
  const Finding& f = report.findings[0];
  CHECK(f.kind == FindingKind::kNeverCompleted);
  CHECK(f.seq == 2);
  CHECK(f.ranks == std::vector<int32_t>{0, 1});
  CHECK(std::find(f.categories.begin(), f.categories.end(), "hang & timeout") != f.categories.end());
  CHECK(f.fix.find("communication configuration") != std::string::npos);
}

TEST_CASE("check reports a receive from a rank that never sends", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    job.Send(0, 1, 5, 1);
    job.Recv(1, 0, 5, 1);
    job.Recv(1, 0, 5, 2, false);  // rank 0 never sends a second message
    job.Finalize(0);
    job.Die(1, SIGTERM);
  });
  INFO(Titles(report));
  const Finding& f = FirstFinding(report, FindingKind::kUnmatchedP2p, {1});
  CHECK(f.title.find("unmatched receive: rank 1 is blocked in MPI_Recv from rank 0 (tag 5) on WORLD") == 0);
  CHECK(ParseJsonObject(f.data)["peer_state"]["doing"] == "finished (MPI_Finalize)");
}

TEST_CASE("check reports a receive waiting on a tag its sender does not use", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    job.Send(0, 1, 6, 1);
    job.Recv(1, 0, 5, 1, false);
    job.Die(0, SIGTERM);
    job.Die(1, SIGTERM);
  });
  INFO(Titles(report));
  FirstFinding(report, FindingKind::kUnmatchedP2p, {1});
}

TEST_CASE("check reports messages that finished ranks never received", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    job.Send(0, 1, 3, 1);
    job.Send(0, 1, 3, 2);
    job.Recv(1, 0, 3, 1);
    job.FinalizeAll();
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 1);
  const Finding& f = report.findings[0];
  CHECK(f.kind == FindingKind::kUnmatchedP2p);
  CHECK(f.title == "unmatched send: rank 0 sent 1 message to rank 1 on WORLD that it never received");
}

TEST_CASE("check names the first rank to send NaN, not the ranks it spread to", "[analysis]") {
  CheckReport report = CheckJob(3, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 3; ++r) {
      job.Allreduce(r, SyntheticJob::World(), 1);
      job.Mark(r, "checkpoint", 1);
      // Rank 2's gradient holds a NaN; the allreduce gives it to everyone.
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), 2, 64, 0x10 + r, 0x99,
                     true, r == 2 ? 1 : 0, 1);
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), 3, 64, 0x20 + r, 0x98,
                     true, 64, 64);
      job.Finalize(r);
    }
  });
  INFO(Titles(report));
  const Finding& f = OnlyFinding(report, FindingKind::kNanInf, {2});
  CHECK(f.seq == 2);
  CHECK(ParseJsonObject(f.data)["nan"] == 1);
  CHECK(ParseJsonObject(f.data)["mark"] == "checkpoint=1");
}

TEST_CASE("check reports ranks whose allreduce results differ", "[analysis]") {
  CheckReport report = CheckJob(4, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 4; ++r) {
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), 1, 8, 0x10, r == 3 ? 0x77 : 0x66);
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), 2, 8, 0x10, r == 3 ? 0x78 : 0x68);
      job.Finalize(r);
    }
  });
  INFO(Titles(report));
  const Finding& f = OnlyFinding(report, FindingKind::kOutputsDiffer, {3});
  CHECK(f.seq == 1);
  CHECK(ParseJsonObject(f.data)["later"] == 1);
}

TEST_CASE("check reports configuration that differs across ranks and ignores per-rank variables", "[analysis]") {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 4, [](int r, RankHeader* h) {
      h->environment.push_back({"PMIX_RANK", std::to_string(r)});
      h->environment.push_back({"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)});
      if (r == 3) h->environment.push_back({"NCCL_SOCKET_IFNAME", "eth1"});
      if (r != 3) h->environment.push_back({"NCCL_SOCKET_IFNAME", "eth0"});
      if (r == 1) h->environment.push_back({"UCX_TLS", "tcp"});
    });
    job.InitAll();
    job.FinalizeAll();
  }
  CheckReport report = CheckDir(dir.path());
  INFO(Titles(report));
  const Finding& f = OnlyFinding(report, FindingKind::kConfig, {1, 3});
  REQUIRE(ParseJsonObject(f.data)["settings"].size() == 2);
  CHECK(ParseJsonObject(f.data)["settings"][0]["key"] == "NCCL_SOCKET_IFNAME");
  CHECK(ParseJsonObject(f.data)["settings"][1]["key"] == "UCX_TLS");
  CHECK(f.details[0] == "NCCL_SOCKET_IFNAME: ranks 0-2 'eth0'; rank 3 'eth1'");
}

TEST_CASE("check names the rank missing from a hung non-blocking collective whose call never returned", "[analysis]") {
  // NCCL calls are non-blocking and may block while they enqueue: ranks 0, 2
  // and 3 are stuck inside the gradient allreduce's call, rank 1 skipped it
  // and is stuck in the next one; the launcher's SIGTERM ends them all.
  CheckReport report = CheckJob(4, [&](SyntheticJob& job) {
    job.InitAll();
    std::vector<int32_t> all{0, 1, 2, 3};
    for (int r = 0; r < 4; ++r) {
      uint64_t grad = job.Create(r, testing::kMpiCommSplit, SyntheticJob::World(), 1, all);
      job.Wait(r, {job.Iallreduce(r, grad, 1)}, 1, grad, 1);
      if (r == 1) {
        job.Iallreduce(r, SyntheticJob::World(), 2, 1, false);
      } else {
        job.Iallreduce(r, grad, 2, 2048, false);
      }
      job.Die(r, SIGTERM);
    }
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 2);
  CHECK(report.findings[0].kind == FindingKind::kMissingRanks);
  CHECK(report.findings[0].ranks == std::vector<int32_t>{1});
  CHECK(report.findings[0].seq == 2);
  CHECK(ParseJsonObject(report.findings[0].data)["stuck"] == std::vector<int32_t>{0, 2, 3});
  CHECK(ParseJsonObject(report.findings[0].data)["missing"][0]["blocked_in"]["comm_name"] == "WORLD");
  CHECK(report.findings[1].kind == FindingKind::kMissingRanks);
  CHECK(report.findings[1].ranks == std::vector<int32_t>{0, 2, 3});
  for (int r = 0; r < 4; ++r) CHECK(report.ranks[static_cast<size_t>(r)].blocked);
}

TEST_CASE("check reports a crash with what the rank was doing, before the hang it caused", "[analysis]") {
  CheckReport report = CheckJob(3, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 3; ++r) {
      job.Allreduce(r, SyntheticJob::World(), 1);
      if (r == 1) {
        job.Die(r, SIGSEGV);
      } else {
        job.Allreduce(r, SyntheticJob::World(), 2, 1024, false);
        job.Die(r, SIGTERM);
      }
    }
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 2);
  CHECK(report.findings[0].kind == FindingKind::kError);
  CHECK(report.findings[0].title == "rank 1 crashed with SIGSEGV");
  CHECK(report.findings[0].details[0].find("after MPI_Allreduce on WORLD #1 returned") != std::string::npos);
  CHECK(std::find(report.findings[0].categories.begin(), report.findings[0].categories.end(), "segmentation fault") !=
        report.findings[0].categories.end());
  CHECK(report.findings[1].kind == FindingKind::kMissingRanks);
  CHECK(report.findings[1].ranks == std::vector<int32_t>{1});
  CHECK(ParseJsonObject(report.findings[1].data)["missing"][0]["signal"] == "SIGSEGV");
}

TEST_CASE("check does not take a job stopped in the middle of a collective for a hang", "[analysis]") {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 2);
    job.InitAll();
    job.Allreduce(0, SyntheticJob::World(), 1, 8, false);  // rank 1 is still computing
    job.Die(0, SIGTERM);
    job.Die(1, SIGTERM);
  }
  CheckReport stopped = CheckDir(dir.path(), CheckOptions{});
  INFO(Titles(stopped));
  // Only that it was stopped.
  REQUIRE(stopped.findings.size() == 1);
  CHECK(stopped.findings[0].kind == FindingKind::kError);
  CHECK(stopped.findings[0].title == "ranks 0,1 were killed by SIGTERM: the whole job was stopped from outside");
  CHECK(!stopped.ranks[0].blocked);
  CHECK(stopped.ranks[0].doing.find("in MPI_Allreduce on WORLD #1 for ") == 0);
  // Had it waited longer than --min-wait, it would be.
  CHECK(CheckDir(dir.path()).findings.size() == 1);
}

TEST_CASE("check names a rank that left an MPI job without MPI_Finalize, and no rank the launcher stopped after a crash", "[analysis]") {
  CheckReport exited = CheckJob(3, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 3; ++r) job.Allreduce(r, SyntheticJob::World(), 1, 8);
    job.Exit(1);
    job.Finalize(0);
    job.Finalize(2);
  });
  INFO(Titles(exited));
  REQUIRE(exited.findings.size() == 1);
  CHECK(exited.findings[0].kind == FindingKind::kError);
  CHECK(exited.findings[0].title == "rank 1 exited without calling MPI_Finalize");
  CHECK(exited.findings[0].ranks == std::vector<int32_t>{1});
  CHECK(exited.ranks[1].doing == "exited without calling MPI_Finalize, after MPI_Allreduce on WORLD #1 returned");

  testing::TempDir crashed;
  {
    SyntheticJob job(crashed.path(), 3);
    job.InitAll();
    for (int r = 0; r < 3; ++r) job.Allreduce(r, SyntheticJob::World(), 1, 8);
    job.Die(1, SIGSEGV);
    job.Die(0, SIGTERM);
    job.Die(2, SIGTERM);
  }
  CheckReport report = CheckDir(crashed.path());
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 1);
  CHECK(report.findings[0].title == "rank 1 crashed with SIGSEGV");
}

TEST_CASE("a rank made to exit while it waited in a call says both", "[analysis]") {
  // mpirun killed: its ranks lose their launcher and exit from inside the call
  // they wait in, one of them in a collective the other never reached.
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    job.Allreduce(0, SyntheticJob::World(), 1, 8, false);
    job.Exit(0);
    job.Exit(1);
  }, CheckOptions{});
  INFO(Titles(report));
  REQUIRE(!report.findings.empty());
  CHECK(report.ranks[0].doing.find("in MPI_Allreduce on WORLD #1 for ") == 0);
  CHECK(report.ranks[0].doing.find("; then exited without calling MPI_Finalize") != std::string::npos);
  CHECK(report.ranks[1].doing.find("exited without calling MPI_Finalize") == 0);
}

TEST_CASE("check judges nothing past the end of a trace a full disk cut short, and says so", "[analysis]") {
  // Rank 2's disk fills inside its allreduce #3 (its trace ends there, the
  // call never seen to return), while a message rank 0 sends it and the
  // collectives after are done unrecorded. Nothing of that is a fault.
  auto record = [](const std::string& dir, int64_t rank1_count) {
    SyntheticJob job(dir, 3);
    job.InitAll();
    for (int r = 0; r < 3; ++r) job.Allreduce(r, SyntheticJob::World(), 1, 8);
    for (int r = 0; r < 3; ++r) job.Allreduce(r, SyntheticJob::World(), 2, r == 1 ? rank1_count : 8);
    job.Allreduce(2, SyntheticJob::World(), 3, 8, /*returns=*/false);
    job.DiskFull(2, 12);
    job.Send(0, 2, 5, 1);
    for (int r = 0; r < 2; ++r) {
      job.Allreduce(r, SyntheticJob::World(), 3, 8);
      job.Allreduce(r, SyntheticJob::World(), 4, 8);
    }
    job.Finalize(0);
    job.Finalize(1);
  };
  testing::TempDir clean;
  record(clean.path(), 8);
  CheckReport report = CheckDir(clean.path());
  INFO(Titles(report));
  CHECK(report.findings.empty());
  REQUIRE(report.unread.size() == 1);
  CHECK(report.unread[0].rfind("rank 2 after its event #", 0) == 0);
  CHECK(report.unread[0].find("recording stopped: cannot write") != std::string::npos);
  CHECK(report.unread[0].find("No space left on device") != std::string::npos);
  CHECK(std::any_of(report.notes.begin(), report.notes.end(), [](const std::string& n) {
    return n.find("12 later calls were not recorded") != std::string::npos;
  }));
  CHECK(report.ranks[2].status == "failed");
  CHECK_FALSE(report.ranks[2].blocked);
  INFO(report.ranks[2].doing);
  CHECK(report.ranks[2].doing.find("its recording stopped") == 0);

  // What the trace holds before the cut is still judged.
  testing::TempDir mismatched;
  record(mismatched.path(), 16);
  CheckReport before = CheckDir(mismatched.path());
  INFO(Titles(before));
  REQUIRE(before.findings.size() == 1);
  CHECK(before.findings[0].kind == FindingKind::kMismatch);
  CHECK(before.findings[0].seq == 2);
}

TEST_CASE("check reports MPI error codes once for all ranks that got them", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 2; ++r) {
      job.Allreduce(r, SyntheticJob::World(), 1);
      ErrorEvent e{ErrorSource::kMpi, 15, SyntheticJob::World()};
      Event ev = Event::Make(e);
      ev.text = "MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated";
      job.Append(r, ev);
      job.Finalize(r);
    }
  });
  INFO(Titles(report));
  const Finding& f = OnlyFinding(report, FindingKind::kError, {0, 1});
  CHECK(f.title == "ranks 0,1: MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated");
  CHECK(ParseJsonObject(f.data)["code"] == 15);
}

TEST_CASE("check reports blocking collectives on two communicators called in opposite orders", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    uint64_t dup = 0;
    for (int r = 0; r < 2; ++r) dup = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), 1, {0, 1});
    // Rank 0 broadcasts on dup, then reduces on WORLD; rank 1 the other way
    // round. The eager broadcast let it through this time.
    job.Collective(0, testing::kMpiBcast, OpKind::kBcast, dup, 1, 4, 0xb, 0, true, 0, 0, 0);
    job.Allreduce(0, SyntheticJob::World(), 2, 4);
    job.Allreduce(1, SyntheticJob::World(), 2, 4);
    job.Collective(1, testing::kMpiBcast, OpKind::kBcast, dup, 1, 4, 0, 0xb, true, 0, 0, 0);
    job.FinalizeAll();
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 1);
  const Finding& f = report.findings[0];
  CHECK(f.kind == FindingKind::kMismatch);
  CHECK(ParseJsonObject(f.data)["field"] == "order");
  CHECK(f.title.find("opposite orders") != std::string::npos);
}

TEST_CASE("check does not mistake different orders of non-blocking collectives for a deadlock", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    uint64_t dup = 0;
    for (int r = 0; r < 2; ++r) dup = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), 1, {0, 1});
    uint64_t a = job.Iallreduce(0, dup, 1);
    job.Allreduce(0, SyntheticJob::World(), 2, 4);
    job.Wait(0, {a}, 1, dup, 1);
    job.Allreduce(1, SyntheticJob::World(), 2, 4);
    uint64_t b = job.Iallreduce(1, dup, 1);
    job.Wait(1, {b}, 1, dup, 1);
    job.FinalizeAll();
  });
  INFO(Titles(report));
  CHECK(report.findings.empty());
}

TEST_CASE("check reports a consistently late rank as a straggler", "[analysis]") {
  CheckReport report = CheckJob(3, [&](SyntheticJob& job) {
    job.InitAll();
    // Ranks 0 and 1 wait about 3 ms in each allreduce for rank 2, which does not wait.
    for (int r = 0; r < 3; ++r) TimedAllreduces(job, r, 25, std::chrono::milliseconds(r != 2 ? 3 : 0));
  });
  INFO(Titles(report));
  const Finding& f = OnlyFinding(report, FindingKind::kStraggler, {2});
  CHECK(ParseJsonObject(f.data)["last_arrivals"] == 25);
}

TEST_CASE("check does not call a rank a straggler on a few collectives or a small margin", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    // Rank 0 waits, but only tens of microseconds: noise, not a straggler.
    for (int r = 0; r < 2; ++r) TimedAllreduces(job, r, 40, std::chrono::microseconds(r == 0 ? 20 : 0));
  });
  INFO(Titles(report));
  CHECK(report.findings.empty());
}

TEST_CASE("check --live calls a call stuck only after the minimum wait", "[analysis]") {
  testing::TempDir dir;
  SyntheticJob job(dir.path(), 2);
  job.InitAll();
  job.Allreduce(0, SyntheticJob::World(), 1, 8, false);
  job.KeepRunning(0);
  job.KeepRunning(1);
  CheckOptions patient;
  patient.live = true;
  patient.min_wait_ns = 3'600'000'000'000;
  CheckReport early = CheckDir(dir.path(), patient);
  INFO(Titles(early));
  CHECK(early.live);
  CHECK(early.findings.empty());
  CheckOptions eager;
  eager.live = true;
  eager.min_wait_ns = 0;
  CheckReport now = CheckDir(dir.path(), eager);
  INFO(Titles(now));
  REQUIRE(now.findings.size() == 1);
  CHECK(now.findings[0].kind == FindingKind::kMissingRanks);
  CHECK(now.findings[0].ranks == std::vector<int32_t>{1});
  CHECK(ParseJsonObject(now.findings[0].data)["missing"][0]["doing"].get<std::string>().find("running") == 0);
}

TEST_CASE("check without --live treats a trace that is still being written as live", "[analysis]") {
  testing::TempDir dir;
  SyntheticJob job(dir.path(), 1);
  job.InitAll();
  job.KeepRunning(0);
  CheckReport report = CheckDir(dir.path());
  CHECK(report.live);
  REQUIRE(report.notes.size() == 1);
  CHECK(report.notes[0].find("--live") != std::string::npos);
}

TEST_CASE("check reports two ranks of one communicator on one device", "[analysis]") {
  CheckReport report = CheckJob(2, [&](SyntheticJob& job) {
    job.InitAll();
    for (int r = 0; r < 2; ++r) {
      CommCreateEvent c{};
      c.comm = 0xacc;
      c.flags = comm_flags::kNccl;
      c.size = 2;
      c.rank = r;
      c.device = 0;
      c.unique_id = 0x42;
      Event e = Event::Make(c);
      e.list = {0, 1};
      job.Append(r, e);
    }
    job.FinalizeAll();
  });
  INFO(Titles(report));
  REQUIRE(report.findings.size() == 1);
  CHECK(report.findings[0].kind == FindingKind::kDevice);
  CHECK(report.findings[0].ranks == std::vector<int32_t>{0, 1});
  CHECK(report.findings[0].title == "ranks 0,1 of nccl all use device 0 on node0");
}

TEST_CASE("check leaves ranks without a trace out of the missing ranks, and says so", "[analysis]") {
  testing::TempDir dir;
  {
    // Rank 2 of 3 has no trace at all; the others finished.
    SyntheticJob job(dir.path(), 2, [](int, RankHeader* h) { h->world_size = 3; });
    job.set_world(3);
    for (int r = 0; r < 2; ++r) {
      job.Init(r);
      job.Allreduce(r, SyntheticJob::World(), 1);
      job.Finalize(r);
    }
  }
  CheckReport report = CheckDir(dir.path());
  INFO(Titles(report));
  CHECK(report.world_size == 3);
  REQUIRE(report.notes.size() == 1);
  CHECK(report.notes[0].find("no readable trace for rank 2") == 0);
}

TEST_CASE("check JSON carries the finding's kind, ranks, communicator and category", "[analysis]") {
  testing::TempDir dir;
  WriteHang(dir.path(), 4, 1);
  CheckReport report = CheckDir(dir.path());
  nlohmann::json j = CheckReportToJson(report);
  REQUIRE(j["findings"].size() >= 1);
  const auto& f = j["findings"][0];
  CHECK(f["kind"] == "missing_ranks");
  CHECK(f["ranks"] == std::vector<int32_t>{1});
  CHECK(f["comm"]["name"] == "dup(WORLD)");
  CHECK(f["comm"]["members"] == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(f["seq"] == 4);
  CHECK(f["categories"][0] == "hang");
  CHECK(f["call_site"]["address"] == "0x2000");
  CHECK(j["ranks"].size() == 4);
  CHECK(j["ranks"][1]["blocked"] == true);
}


TEST_CASE("check reads a trace claiming a world size or communicators no job has without trusting them",
          "[analysis]") {
  // Found by the analysis fuzz target: a header's world size of two billion
  // made check list every rank up to it, and a communicator announced with
  // that size made it allocate a slot per member.
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 2, [](int r, RankHeader* h) {
      if (r == 1) h->world_size = 2'000'000'000;
    });
    Trainer t(job);
    for (int r = 0; r < 2; ++r) {
      t.Step(r);
      CommCreateEvent c{};
      c.comm = 0xbad;
      c.api = testing::kMpiCommSplit;
      c.size = 2'000'000'000;
      c.rank = r;
      c.device = -1;
      Event e = Event::Make(c);
      e.list = {0, 1, int64_t{1} << 40};
      job.Append(r, e);
      t.Finish(r);
    }
  }
  CheckReport report = CheckDir(dir.path());
  INFO(Titles(report));
  for (const std::string& n : report.notes) INFO(n);
  CHECK(report.world_size == 2);
  CHECK(report.ranks.size() == 2);
  auto noted = [&](const std::string& what) {
    return std::any_of(report.notes.begin(), report.notes.end(),
                       [&](const std::string& n) { return n.find(what) != std::string::npos; });
  };
  CHECK(noted("rank 1: its header states world size 2000000000, outside -1..1048576"));
  CHECK(report.findings.empty());
  CHECK(noted("rank 0: 1 events hold values no recorder writes"));
  CHECK(noted("rank 1: 1 events hold values no recorder writes"));
}


TEST_CASE("a rank recorded dying of a signal number no system has is described, not a crash", "[analysis]") {
  // Found by the analysis fuzz target: naming the signal of a recorded death
  // dereferenced the null that sigabbrev_np gives for an unknown number
  // (replay rerun, record, info).
  CHECK(SignalName(SIGSEGV) == "SIGSEGV");
  CHECK(SignalName(99) == "signal 99");
  CHECK(SignalName(-4) == "signal -4");
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 2);
    Trainer t(job);
    for (int r = 0; r < 2; ++r) {
      t.Step(r);
      job.Die(r, 99);
    }
  }
  CheckReport report = CheckDir(dir.path());
  CHECK(report.ranks.size() == 2);
  OracleOptions o;
  o.trace_dir = dir.path();
  o.rank = 1;
  auto oracle = Oracle::Open(o);
  REQUIRE(oracle.ok());
  CHECK((*oracle)->HowRecordingEnds().find("died of signal 99") != std::string::npos);
}

}  // namespace
}  // namespace replay
