#include "replay/perfetto.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "analysis/synthetic_job.h"
#include "interop/timed_job.h"
#include "replay/check.h"
#include "support/temp_dir.h"
#include "util/json.h"

namespace replay {
namespace {

using nlohmann::json;
using testing::SyntheticJob;

// 3 ranks: a broadcast, a ring of messages, a mark, then an allreduce rank 2
// never enters (ranks 0 and 1 hang in it).
void WriteJob(const std::string& dir) {
  SyntheticJob job(dir, 3);
  job.InitAll();
  std::vector<int32_t> all = {0, 1, 2};
  std::vector<uint64_t> grad(3);
  for (int r = 0; r < 3; ++r) {
    grad[r] = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), 1, all);
    job.Collective(r, testing::kMpiBcast, OpKind::kBcast, grad[r], 1, 16, r == 0 ? 0xb0 : 0, r == 0 ? 0 : 0xb0, true, 0, 0, 0);
  }
  for (int r = 0; r < 3; ++r) job.Send(r, (r + 1) % 3, 7, 1);
  for (int r = 0; r < 3; ++r) job.Recv(r, (r + 2) % 3, 7, 1);
  for (int r = 0; r < 3; ++r) job.Mark(r, "checkpoint", 1);
  job.Allreduce(0, grad[0], 2, 64, false);
  job.Allreduce(1, grad[1], 2, 64, false);
  job.Die(0, SIGTERM);
  job.Die(1, SIGTERM);
  job.Finalize(2);
}

json Export(const std::string& dir, PerfettoSummary* summary = nullptr) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  std::ostringstream out;
  auto s = WritePerfetto(**trace, out);
  REQUIRE(s.ok());
  if (summary != nullptr) *summary = *s;
  json doc = json::parse(out.str(), nullptr, false);
  REQUIRE(!doc.is_discarded());
  return doc;
}

TEST_CASE("the Perfetto export is a valid trace-event document", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  PerfettoSummary summary;
  json doc = Export(tmp / "t", &summary);
  REQUIRE(doc.is_object());
  REQUIRE(doc["traceEvents"].is_array());
  const json& events = doc["traceEvents"];
  CHECK(summary.events == events.size());
  CHECK(summary.ranks == 3);

  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;  // (pid, tid) -> [start, end]
  std::set<std::pair<int, int>> named_threads;
  std::set<int> named_processes;
  std::map<uint64_t, std::vector<const json*>> flows;
  size_t instants = 0;
  for (const json& e : events) {
    INFO(e.dump());
    // Fields every event must have, of the right types.
    REQUIRE(e.contains("ph"));
    REQUIRE(e["ph"].is_string());
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    const int tid = e["tid"];
    if (ph == "X") {
      REQUIRE(e["dur"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      slices[{pid, tid}].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    } else if (ph == "M") {
      const std::string name = e["name"];
      CHECK((name == "process_name" || name == "process_sort_index" || name == "process_labels" ||
             name == "thread_name" || name == "thread_sort_index"));
      REQUIRE(e["args"].is_object());
      if (name == "process_name") named_processes.insert(pid);
      if (name == "thread_name") named_threads.insert({pid, tid});
    } else if (ph == "s" || ph == "f") {
      REQUIRE(e.contains("id"));
      flows[e["id"].get<uint64_t>()].push_back(&e);
    } else if (ph == "i") {
      CHECK((e["s"] == "t" || e["s"] == "p" || e["s"] == "g"));
      ++instants;
    } else {
      FAIL("unexpected phase " << ph);
    }
  }
  CHECK(named_processes == std::set<int>{0, 1, 2});
  CHECK(instants >= 3 + 2);  // a mark on each rank, two fatal signals

  // Every track with slices is named, and its slices nest or are disjoint.
  for (auto& [track, list] : slices) {
    INFO("pid " << track.first << " tid " << track.second);
    CHECK(named_threads.count(track) == 1);
    std::sort(list.begin(), list.end());
    for (size_t i = 1; i < list.size(); ++i) CHECK(list[i].first >= list[i - 1].second - 1e-6);
  }

  // Flows come in pairs (one start, one finish) with matching ids, each end
  // inside a slice of its track so that viewers bind it.
  REQUIRE(!flows.empty());
  CHECK(summary.flows == flows.size());
  auto bound = [&](const json& e) {
    auto it = slices.find({e["pid"].get<int>(), e["tid"].get<int>()});
    if (it == slices.end()) return false;
    double ts = e["ts"];
    for (const auto& [a, b] : it->second) {
      if (a <= ts + 1e-6 && ts <= b + 1e-6) return true;
    }
    return false;
  };
  for (const auto& [id, pair] : flows) {
    INFO("flow " << id);
    REQUIRE(pair.size() == 2);
    CHECK((*pair[0])["ph"] == "s");
    CHECK((*pair[1])["ph"] == "f");
    CHECK((*pair[0])["name"] == (*pair[1])["name"]);
    CHECK(bound(*pair[0]));
    CHECK(bound(*pair[1]));
  }
}

TEST_CASE("the Perfetto export joins a collective across ranks and each message's send to its receive", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  json doc = Export(tmp / "t");
  size_t collective_arrows = 0;
  size_t message_arrows = 0;
  std::vector<json> open;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "s" && e["name"] == "same collective") ++collective_arrows;
    if (e["ph"] == "s" && e["name"] == "message") ++message_arrows;
    if (e["ph"] == "X" && e["args"]["state"] != "completed") open.push_back(e);
  }
  // The broadcast joins 3 ranks (2 arrows), the hung allreduce 2 (1 arrow);
  // the communicator creation is a collective of 3 too.
  CHECK(collective_arrows == 2 + 1 + 2);
  CHECK(message_arrows == 3);
  // Ranks 0 and 1 never returned from the allreduce: slices to the end of their trace.
  REQUIRE(open.size() >= 2);
  std::set<int> ranks;
  for (const json& e : open) {
    if (e["name"].get<std::string>().find("MPI_Allreduce #2") == 0) ranks.insert(e["pid"].get<int>());
  }
  CHECK(ranks == std::set<int>{0, 1});
}

TEST_CASE("the Perfetto export of some ranks shows only those", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  auto trace = TraceReader::Open(tmp / "t");
  REQUIRE(trace.ok());
  std::ostringstream out;
  PerfettoOptions o;
  o.ranks = {1};
  auto s = WritePerfetto(**trace, out, o);
  REQUIRE(s.ok());
  CHECK(s->ranks == 1);
  json doc = json::parse(out.str());
  for (const json& e : doc["traceEvents"]) CHECK(e["pid"] == 1);
}


// The slices of a document: name -> [start, end] in seconds, for each rank.
std::multimap<std::string, std::pair<double, double>> Slices(const json& doc) {
  std::multimap<std::string, std::pair<double, double>> slices;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"].get<double>() / 1e6;
    slices.emplace(e["name"].get<std::string>(), std::make_pair(ts, ts + e["dur"].get<double>() / 1e6));
  }
  return slices;
}

json ExportWith(const std::string& dir, const PerfettoOptions& o, PerfettoSummary* summary) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  std::ostringstream out;
  auto s = WritePerfetto(**trace, out, o);
  REQUIRE(s.ok());
  *summary = *s;
  return json::parse(out.str());
}

TEST_CASE("a Perfetto window keeps the operations that overlap it and the instants in it", "[interop]") {
  testing::TempDir tmp;
  testing::WriteTimedJob(tmp / "t", true);
  PerfettoOptions o;
  o.window = PerfettoWindow{4'000'000'000, 6'000'000'000};
  PerfettoSummary summary;
  json doc = ExportWith(tmp / "t", o, &summary);
  auto slices = Slices(doc);
  INFO(doc.dump(1));
  // The second allreduce on every rank; MPI_Init, the dup, the first and the
  // third (open from 9 s to the end) lie outside.
  CHECK(slices.size() == 3);
  CHECK(slices.count("MPI_Allreduce #2") == 3);
  for (const auto& [name, span] : slices) {
    CHECK(span.second >= 4.0);
    CHECK(span.first <= 6.0);
  }
  CHECK(summary.left_out == 3 * 4);
  REQUIRE(summary.window);
  CHECK(summary.window->start_ns == 4'000'000'000);
  size_t marks = 0;
  size_t signals = 0;
  std::set<int> processes;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "i" && e["cat"] == "mark") ++marks;
    if (e["ph"] == "i" && e["cat"] == "signal") ++signals;
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["pid"].get<int>());
  }
  CHECK(marks == 3);
  CHECK(signals == 0);  // at 12 s
  CHECK(processes == std::set<int>{0, 1, 2});
  CHECK(summary.flows == 2);  // from the first caller of the second allreduce to the two others

  SECTION("a window without an end runs to the end of the trace") {
    o.window = PerfettoWindow{8'000'000'000};
    json rest = ExportWith(tmp / "t", o, &summary);
    auto kept = Slices(rest);
    CHECK(kept.size() == 3);
    CHECK(kept.count("MPI_Allreduce #3 (never returned)") == 2);
    CHECK(kept.count("MPI_Finalize") == 1);
  }
}

TEST_CASE("a Perfetto window around the first finding is centred on its collective", "[interop]") {
  testing::TempDir tmp;
  testing::WriteTimedJob(tmp / "t", true);
  auto trace = TraceReader::Open(tmp / "t");
  REQUIRE(trace.ok());
  CheckOptions co;
  co.min_wait_ns = 0;
  auto report = CheckTrace(**trace, co);
  REQUIRE(report.ok());
  REQUIRE(!report->findings.empty());
  PerfettoOptions o;
  o.around = report->findings;
  o.around_ns = 1'000'000'000;
  PerfettoSummary summary;
  json doc = ExportWith(tmp / "t", o, &summary);
  REQUIRE(summary.window);
  CHECK(summary.window->start_ns == 8'500'000'000);
  CHECK(summary.window->end_ns == 9'500'000'000);
  CHECK(summary.finding >= 0);
  auto slices = Slices(doc);
  CHECK(slices.size() == 2);
  CHECK(slices.count("MPI_Allreduce #3 (never returned)") == 2);
  CHECK(doc["otherData"]["window_around"] == o.around[static_cast<size_t>(summary.finding)].title);

  SECTION("findings about the job as a whole give no window, and say so") {
    Finding config;
    config.kind = FindingKind::kConfig;
    config.title = "OMPI_MCA_btl differs";
    o.around = {config};
    std::ostringstream out;
    auto s = WritePerfetto(**trace, out, o);
    REQUIRE(!s.ok());
    CHECK(s.status().message().find("about the job as a whole") != std::string::npos);
  }
}

}  // namespace
}  // namespace replay
