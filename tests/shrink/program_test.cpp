#include "shrink/program.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <map>
#include <set>

#include "analysis/synthetic_job.h"
#include "shrink/trainer_job.h"
#include "replay/check.h"
#include "support/temp_dir.h"

namespace replay::shrink {
namespace {

using testing::SyntheticJob;
using testing::TempDir;
using testing::Trainer;

Program Load(const std::string& dir) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  auto p = Program::Load(**trace);
  REQUIRE(p.ok());
  return std::move(p).value();
}

// All of `p` on the ranks `kept`, without the others.
Candidate KeepRanks(const Program& p, std::vector<bool> kept) {
  Selection s = p.All();
  s.ranks = std::move(kept);
  return p.Materialize(s);
}

// The program of Trainer(tmp / "t", steps, hang_step).
Program LoadTrainer(const TempDir& tmp, int steps, int hang_step) {
  Trainer(tmp / "t", steps, hang_step);
  return Load(tmp / "t");
}

// The ops of one rank of a candidate: "API comm-name-less seq/peer" lines.
std::vector<const Event*> Ops(const Candidate& c, size_t rank) {
  std::vector<const Event*> out;
  for (const Event& e : c.ranks[rank].events) {
    if (e.kind == EventKind::kOp) out.push_back(&e);
  }
  return out;
}

const Event* Find(const Candidate& c, size_t rank, EventKind kind, const std::function<bool(const Event&)>& pred) {
  for (const Event& e : c.ranks[rank].events) {
    if (e.kind == kind && pred(e)) return &e;
  }
  return nullptr;
}

TEST_CASE("a unit is a collective on all its members or a message at both ends", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 2, 99);
  REQUIRE(p.rank_count() == 4);
  std::map<size_t, int> sizes;  // calls per unit -> how many such units
  for (const Unit& u : p.units()) sizes[u.calls.size()]++;
  // dup, split, 2 x grad allreduce, 2 x loss allreduce: all four ranks each.
  CHECK(sizes[4] == 6);
  // 2 steps x 4 ring messages, each a send and a receive.
  CHECK(sizes[2] == 8);
  CHECK(sizes.size() == 2);
  // Units come in job order: the communicators first.
  CHECK(p.units()[0].creates.size() == 1);
  CHECK(p.units()[1].creates.size() == 2);  // the split makes one communicator per parity
}

TEST_CASE("keeping everything keeps every call", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 3, 99);
  Candidate c = p.Materialize(p.All());
  REQUIRE(c.ranks.size() == 4);
  CHECK(c.origin == std::vector<int32_t>{0, 1, 2, 3});
  // Per rank: dup, split, 3 x (irecv, isend, waitall, grad, loss).
  CHECK(c.max_rank_operations == 17);
  CHECK(c.operations == 4 * 17);
  CHECK(c.communicators == 3);
}

TEST_CASE("removing ranks rebuilds the communicators over the ranks that remain", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 2, 99);
  Candidate c = KeepRanks(p, {false, true, false, true});
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.origin == std::vector<int32_t>{1, 3});
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(c.ranks[r].header.rank == static_cast<int32_t>(r));
    CHECK(c.ranks[r].header.world_size == 2);
    const Event* world = Find(c, r, EventKind::kCommCreate,
                              [](const Event& e) { return (e.comm_create.flags & comm_flags::kWorld) != 0; });
    REQUIRE(world != nullptr);
    CHECK(world->list == std::vector<int64_t>{0, 1});
    CHECK(world->comm_create.rank == static_cast<int32_t>(r));
    // The odd ranks' split is now both ranks, the even ranks' one is gone.
    const Event* split = Find(c, r, EventKind::kCommCreate, [](const Event& e) { return e.comm_create.color == 1; });
    REQUIRE(split != nullptr);
    CHECK(split->list == std::vector<int64_t>{0, 1});
    CHECK(split->comm_create.size == 2);
    CHECK(Find(c, r, EventKind::kInfo, [&](const Event& e) {
            return e.info_key() == "mpi.world_rank" && e.info_value() == std::to_string(r);
          }) != nullptr);
  }
  // Ring messages between 1 and 3 do not exist (1 sends to 2, 3 to 0): none
  // is left, nor the waits for them; the collectives stay.
  for (const Event* e : Ops(c, 0)) {
    CHECK(e->op.kind != OpKind::kSend);
    CHECK(e->op.kind != OpKind::kRecv);
    CHECK(e->op.kind != OpKind::kWait);
  }
  CHECK(c.max_rank_operations == 2 + 2 * 2);
}

TEST_CASE("peers are renumbered in the communicators rebuilt", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 1, 99);
  Candidate c = KeepRanks(p, {false, true, true, false});  // the message from 1 to 2 stays
  REQUIRE(c.ranks.size() == 2);
  const Event* send = Find(c, 0, EventKind::kOp, [](const Event& e) { return e.op.kind == OpKind::kSend; });
  const Event* recv = Find(c, 1, EventKind::kOp, [](const Event& e) { return e.op.kind == OpKind::kRecv; });
  REQUIRE(send != nullptr);
  REQUIRE(recv != nullptr);
  CHECK(send->op.peer == 1);
  CHECK(recv->op.peer == 0);
  CHECK(send->op.peer_seq == 1);
  const Event* done = Find(c, 1, EventKind::kCompletion, [](const Event& e) { return e.completion.source >= 0; });
  REQUIRE(done != nullptr);
  CHECK(done->completion.source == 0);
  // The wait waits for what is left of its requests.
  const Event* wait = Find(c, 0, EventKind::kOp, [](const Event& e) { return e.op.kind == OpKind::kWait; });
  REQUIRE(wait != nullptr);
  CHECK(wait->list.size() == 1);
}

TEST_CASE("removing a collective renumbers the later ones on every member", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 3, 99);
  // The first loss allreduce on WORLD.
  size_t first_loss = p.units().size();
  for (size_t u = 0; u < p.units().size() && first_loss == p.units().size(); ++u) {
    const auto [ri, ci] = p.units()[u].calls.front();
    (void)ci;
    if (p.units()[u].calls.size() == 4 && p.units()[u].creates.empty() &&
        p.units()[u].comm == SyntheticJob::World()) {
      first_loss = u;
    }
    (void)ri;
  }
  REQUIRE(first_loss < p.units().size());
  Selection s = p.All();
  s.units[first_loss] = false;
  Candidate c = p.Materialize(s);
  for (size_t r = 0; r < 4; ++r) {
    std::vector<uint64_t> seqs;
    for (const Event* e : Ops(c, r)) {
      if (e->op.comm == SyntheticJob::World() && e->op.seq > 0) seqs.push_back(e->op.seq);
    }
    // dup 1, split 2, then the two loss allreduces left: 3 and 4.
    CHECK(seqs == std::vector<uint64_t>{1, 2, 3, 4});
  }
}

TEST_CASE("a communicator's creation takes what is on it along", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 2, 99);
  Selection s = p.All();
  s.units[0] = false;  // the dup
  Candidate c = p.Materialize(s);
  CHECK(c.communicators == 2);
  for (const Event* e : Ops(c, 0)) CHECK(e->op.count != 2048);
  CHECK(c.max_rank_operations == 1 + 2 * 4);
}

TEST_CASE("smaller counts keep equal counts equal and larger ones larger", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 2, 99);
  Selection s = p.All();
  for (size_t u = 0; u < p.units().size(); ++u) s.scaled[u] = p.units()[u].scalable;
  Candidate c = p.Materialize(s);
  std::set<int64_t> counts;
  for (const Event* e : Ops(c, 0)) {
    if (e->op.kind == OpKind::kAllreduce) counts.insert(e->op.count);
  }
  // 1 float (loss) and 2048 floats (gradient) become 1 and 2.
  CHECK(counts == std::set<int64_t>{1, 2});
  const Event* grad =
      Find(c, 0, EventKind::kOp, [](const Event& e) { return e.op.count == 2 && e.op.kind == OpKind::kAllreduce; });
  REQUIRE(grad != nullptr);
  CHECK(grad->op.bytes == 8);
}

TEST_CASE("a reduced job is a trace that readers and check take, with the recording's finding", "[shrink]") {
  TempDir tmp;
  Program p = LoadTrainer(tmp, 6, 3);
  Candidate c = KeepRanks(p, {true, true, false, false});
  JobManifest m = p.manifest();
  REQUIRE(WriteCandidate(c, m, tmp / "r").ok());
  auto trace = TraceReader::Open(tmp / "r");
  REQUIRE(trace.ok());
  REQUIRE((*trace)->ranks().size() == 2);
  REQUIRE((*trace)->manifest());
  CHECK((*trace)->manifest()->world_size == 2);
  CHECK((*trace)->manifest()->level == Level::kMeta);
  CHECK((*trace)->manifest()->trace_uuid != m.trace_uuid);
  CheckOptions o;
  o.min_wait_ns = 0;
  auto report = CheckTrace(**trace, o);
  REQUIRE(report.ok());
  bool found = false;
  for (const Finding& f : report->findings) {
    found = found || (f.kind == FindingKind::kMissingRanks && f.ranks == std::vector<int32_t>{1} &&
                      f.comm && f.comm->name == "dup(WORLD)");
  }
  CHECK(found);
  // Written twice, the same bytes.
  REQUIRE(WriteCandidate(c, m, tmp / "r2").ok());
  for (const char* f : {"manifest", "rank-00000/events", "rank-00000/header", "rank-00001/events"}) {
    CHECK(testing::ReadFile(tmp / "r" + "/" + f) == testing::ReadFile(tmp / "r2" + "/" + f));
  }
}

TEST_CASE("a loop's iterations are the longest stretch that repeats", "[shrink]") {
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    for (char ch : s) v.emplace_back(1, ch);
    return v;
  };
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  CHECK(FindIterations(split("xyabcabcabcz")) == Ranges{{2, 5}, {5, 8}, {8, 11}});
  CHECK(FindIterations(split("aaaa")) == Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  CHECK(FindIterations(split("abcd")).empty());
  CHECK(FindIterations({}).empty());
}

TEST_CASE("a long job's iterations are found, judged on its last units", "[shrink]") {
  // 300,000 units: a set-up, then 60,000 iterations of five calls. The period
  // is judged on the last units only (comparing every period against every
  // unit would take minutes); the iterations found still span the whole loop.
  std::vector<std::string> shapes = {"init", "dup"};
  const std::vector<std::string> body = {"irecv", "isend", "waitall", "allreduce grad", "allreduce loss"};
  for (int i = 0; i < 60000; ++i) shapes.insert(shapes.end(), body.begin(), body.end());
  shapes.push_back("finalize");
  const auto t0 = std::chrono::steady_clock::now();
  const auto its = FindIterations(shapes);
  INFO(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
  REQUIRE(its.size() == 60000);
  CHECK(its.front() == std::pair<size_t, size_t>{2, 7});
  CHECK(its.back() == std::pair<size_t, size_t>{shapes.size() - 6, shapes.size() - 1});
}

}  // namespace
}  // namespace replay::shrink
