#include "interop/perfetto_walk.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/synthetic_job.h"
#include "support/temp_dir.h"

namespace replay::interop {
namespace {

using testing::SyntheticJob;

// What a walk hands out, in order.
class RecordingSink : public PerfettoSink {
 public:
  struct Drawn {
    int32_t rank;
    int32_t track;
    std::string name;
    int64_t start_ns;
    int64_t end_ns;
    std::vector<uint64_t> out;
    std::vector<uint64_t> in;
  };
  void BeginRank(const RankTimeline& r, const std::vector<PerfettoTrack>& tracks) override {
    calls.push_back("rank " + std::to_string(r.rank));
    for (const PerfettoTrack& t : tracks) track_names[{r.rank, t.id}] = t.name;
  }
  void Slice(const RankTimeline& r, const PerfettoSlice& s) override {
    calls.push_back("slice");
    slices.push_back({r.rank, s.track, s.name, s.start_ns, s.end_ns, {s.arrows_out.begin(), s.arrows_out.end()},
                      {s.arrows_in.begin(), s.arrows_in.end()}});
  }
  void Instant(const RankTimeline&, int32_t, const TimelineInstant&) override { calls.push_back("instant"); }
  void Arrow(const PerfettoArrow& a) override {
    calls.push_back("arrow");
    arrows.push_back(a);
  }

  std::vector<std::string> calls;
  std::map<std::pair<int32_t, int32_t>, std::string> track_names;
  std::vector<Drawn> slices;
  std::vector<PerfettoArrow> arrows;
};

// 2 ranks: two overlapping non-blocking allreduces on WORLD, waited for
// together, a message from 0 to 1, a mark.
void WriteJob(const std::string& dir) {
  SyntheticJob job(dir, 2);
  job.InitAll();
  for (int r = 0; r < 2; ++r) {
    uint64_t a = job.Iallreduce(r, SyntheticJob::World(), 1);
    uint64_t b = job.Iallreduce(r, SyntheticJob::World(), 2);
    job.Wait(r, {a, b}, 2);
  }
  job.Send(0, 1, 5, 1);
  job.Recv(1, 0, 5, 1);
  job.Mark(0, "checkpoint", 1);
  job.FinalizeAll();
}

RecordingSink Walk(const std::string& dir, const PerfettoOptions& o = {}) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  auto plan = PlanPerfetto(**trace, o);
  REQUIRE(plan.ok());
  RecordingSink sink;
  auto walked = WalkPerfetto(*plan, sink);
  REQUIRE(walked.ok());
  const PerfettoSummary& summary = *walked;
  CHECK(summary.slices == sink.slices.size());
  CHECK(summary.flows == sink.arrows.size());
  return sink;
}

TEST_CASE("the walk puts overlapping operations of one communicator on lanes that never overlap", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  RecordingSink sink = Walk(tmp / "t");
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int64_t, int64_t>>> by_track;
  for (const auto& s : sink.slices) by_track[{s.rank, s.track}].push_back({s.start_ns, s.end_ns});
  for (auto& [track, spans] : by_track) {
    INFO("rank " << track.first << " track " << track.second);
    REQUIRE(sink.track_names.count(track) == 1);
    for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second);
  }
  // The second allreduce starts before the first completes: a second lane.
  for (int32_t rank : {0, 1}) {
    std::set<std::string> names;
    for (const auto& s : sink.slices) {
      if (s.rank == rank && s.name.rfind("MPI_Iallreduce", 0) == 0) names.insert(sink.track_names.at({rank, s.track}));
    }
    CHECK(names == std::set<std::string>{"WORLD", "WORLD (2)"});
  }
}

TEST_CASE("the walk hands each slice the arrows that start and end at it, then lists them", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  RecordingSink sink = Walk(tmp / "t");
  // Ranks, each with its slices then its instants; the arrows after every rank.
  const std::vector<std::string>& calls = sink.calls;
  REQUIRE(!calls.empty());
  CHECK(calls.front() == "rank 0");
  const auto rank1 = std::find(calls.begin(), calls.end(), "rank 1");
  REQUIRE(rank1 != calls.end());
  const auto first_arrow = std::find(calls.begin(), calls.end(), "arrow");
  REQUIRE(first_arrow != calls.end());
  CHECK(first_arrow > rank1);
  CHECK(std::all_of(first_arrow, calls.end(), [](const std::string& c) { return c == "arrow"; }));
  const auto instant = std::find(calls.begin(), calls.end(), "instant");
  REQUIRE(instant < rank1);  // rank 0's mark
  CHECK(std::find(instant, rank1, "slice") == rank1);
  // Each rank's slices in the order they ended.
  for (int32_t rank : {0, 1}) {
    int64_t last = INT64_MIN;
    for (const auto& s : sink.slices) {
      if (s.rank != rank) continue;
      CHECK(s.end_ns >= last);
      last = s.end_ns;
    }
  }

  // Two allreduces, init's creation of WORLD is no arrow, the message is one.
  REQUIRE(sink.arrows.size() == 3);
  for (const PerfettoArrow& a : sink.arrows) {
    INFO("arrow " << a.id << " " << a.name);
    const RecordingSink::Drawn* from = nullptr;
    const RecordingSink::Drawn* to = nullptr;
    for (const auto& s : sink.slices) {
      if (std::count(s.out.begin(), s.out.end(), a.id) == 1) {
        CHECK(from == nullptr);
        from = &s;
      }
      if (std::count(s.in.begin(), s.in.end(), a.id) == 1) {
        CHECK(to == nullptr);
        to = &s;
      }
    }
    REQUIRE(from != nullptr);
    REQUIRE(to != nullptr);
    CHECK(a.from.rank == from->rank);
    CHECK(a.from.track == from->track);
    CHECK(a.from.time_ns == from->start_ns);
    CHECK(a.to.rank == to->rank);
    CHECK(a.to.track == to->track);
    CHECK(a.to.time_ns == to->start_ns);
  }
  CHECK(std::count_if(sink.arrows.begin(), sink.arrows.end(),
                      [](const PerfettoArrow& a) { return std::string(a.name) == "message"; }) == 1);

  SECTION("without arrows, no slice has any") {
    PerfettoOptions o;
    o.flows = false;
    RecordingSink none = Walk(tmp / "t", o);
    CHECK(none.arrows.empty());
    for (const auto& s : none.slices) CHECK((s.out.empty() && s.in.empty()));
  }
}

}  // namespace
}  // namespace replay::interop
