#include "replay/diff.h"

#include <catch2/catch.hpp>

#include "analysis/diff_json.h"
#include "analysis/synthetic_job.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::SyntheticJob;

// A two-rank job; `entropy` is what rank 1's getrandom returns at the start,
// `recv_hash` what both ranks receive from the last of three allreduces.
// Rank 1 is written first, so its events come first on the wall clock.
void WriteRun(const std::string& dir, const std::string& entropy, uint64_t recv_hash) {
  SyntheticJob job(dir, 2);
  // Rank by rank (a writer numbers the threads that use it in turn).
  for (int r = 1; r >= 0; --r) {
    job.Init(r);
    EntropyEvent e{};
    e.source = EntropySource::kGetrandom;
    e.requested = 8;
    e.rc = 8;
    Event ev = Event::Make(e);
    ev.text = r == 1 ? entropy : "same-bytes";
    job.Append(r, ev);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      // Buffer addresses change from run to run; they must not count.
      Event op = SyntheticJob::Op(testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), seq);
      op.op.send_buf = 0x7f0000000000 + reinterpret_cast<uintptr_t>(dir.data());
      job.Append(r, op);
      Event ret = SyntheticJob::Ret(testing::kMpiAllreduce, SyntheticJob::World(), seq);
      ret.ret.flags = op_flags::kHasRecvHash;
      ret.ret.recv_hash = seq == 3 ? recv_hash : 0x100 + seq;
      job.Append(r, ret);
    }
    job.Finalize(r);
  }
}

DiffReport Diff(const std::string& a, const std::string& b, DiffOptions options = {}) {
  auto ta = TraceReader::Open(a);
  auto tb = TraceReader::Open(b);
  REQUIRE(ta.ok());
  REQUIRE(tb.ok());
  auto r = DiffTraces(**ta, **tb, options);
  REQUIRE(r.ok());
  return std::move(r).value();
}

TEST_CASE("diff of two identical runs finds nothing, whatever the addresses and times", "[analysis]") {
  testing::TempDir a, b;
  WriteRun(a.path(), "xyz", 0x5);
  WriteRun(b.path(), "xyz", 0x5);
  DiffReport d = Diff(a.path(), b.path());
  CHECK(!d.diverged());
  REQUIRE(d.ranks.size() == 2);
  CHECK(!d.ranks[0].diverged);
  CHECK(!d.first_rank.has_value());
}

TEST_CASE("diff names the first divergent event per rank and the rank that diverged first", "[analysis]") {
  testing::TempDir a, b;
  WriteRun(a.path(), "abc", 0x5);
  WriteRun(b.path(), "abd", 0x6);
  DiffReport d = Diff(a.path(), b.path());
  REQUIRE(d.diverged());
  REQUIRE(d.ranks.size() == 2);
  const RankDiff& r1 = d.ranks[1];
  CHECK(r1.diverged);
  CHECK(r1.what == "getrandom returned different bytes");
  REQUIRE(r1.a.has_value());
  REQUIRE(r1.b.has_value());
  CHECK(nlohmann::json::parse(r1.a->json)["kind"] == "entropy");
  CHECK(r1.before.size() == 3);
  CHECK(r1.after_a.size() == 3);
  const RankDiff& r0 = d.ranks[0];
  CHECK(r0.diverged);
  CHECK(r0.what == "received different data");
  CHECK(r0.fields == std::vector<std::string>{"recv_hash"});
  // Rank 1's divergence came first on the wall clock.
  REQUIRE(d.first_rank.has_value());
  CHECK(*d.first_rank == 1);
  nlohmann::json j = DiffReportToJson(d);
  CHECK(j["diverged"] == true);
  CHECK(j["first_rank"] == 1);
  CHECK(j["ranks"][1]["event_a"]["kind"] == "entropy");
}

TEST_CASE("diff reports a run that stops early as its trace ending", "[analysis]") {
  testing::TempDir a, b;
  WriteRun(a.path(), "abc", 0x5);
  {
    SyntheticJob job(b.path(), 2);
    for (int r = 0; r < 2; ++r) {
      job.Init(r);
      job.Finalize(r);
    }
  }
  DiffOptions only_rank0;
  only_rank0.ranks = {0};
  DiffReport d = Diff(a.path(), b.path(), only_rank0);
  REQUIRE(d.ranks.size() == 1);
  CHECK(d.ranks[0].diverged);
  REQUIRE(d.ranks[0].a.has_value());
  CHECK(nlohmann::json::parse(d.ranks[0].a->json)["kind"] == "entropy");
  REQUIRE(d.ranks[0].b.has_value());
  CHECK(nlohmann::json::parse(d.ranks[0].b->json)["kind"] == "op");
  CHECK(d.ranks[0].what == "a different event: entropy in A, op in B");
}

TEST_CASE("diff lists ranks present in only one trace and settings that differ", "[analysis]") {
  testing::TempDir a, b;
  {
    SyntheticJob job(a.path(), 2);
    job.InitAll();
    job.FinalizeAll();
  }
  {
    SyntheticJob job(b.path(), 1, [](int, RankHeader* h) { h->environment.push_back({"NCCL_ALGO", "ring"}); });
    job.InitAll();
    job.FinalizeAll();
  }
  DiffReport d = Diff(a.path(), b.path());
  CHECK(d.diverged());
  CHECK(d.only_in_a == std::vector<int32_t>{1});
  REQUIRE(d.settings.size() == 1);
  CHECK(d.settings[0] == "rank 0 env NCCL_ALGO: <unset> in A, 'ring' in B");
}

TEST_CASE("diff shows two recorded commands as commands", "[analysis]") {
  testing::TempDir a, b;
  for (auto [dir, np] : {std::pair{a.path(), "2"}, std::pair{b.path(), "4"}}) {
    SyntheticJob job(dir, 1, [np = std::string(np)](int, RankHeader* h) {
      h->environment.push_back({"REPLAY_COMMAND", JoinCommand({"mpirun", "-np", np, "./train", "--tag", "a b"})});
    });
    job.InitAll();
    job.FinalizeAll();
  }
  DiffReport d = Diff(a.path(), b.path());
  REQUIRE(d.settings.size() == 1);
  CHECK(d.settings[0] ==
        "rank 0 env REPLAY_COMMAND: 'mpirun -np 2 ./train --tag 'a b'' in A, 'mpirun -np 4 ./train --tag 'a b'' in B");
}

}  // namespace
}  // namespace replay
