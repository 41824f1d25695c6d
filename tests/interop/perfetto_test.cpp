#include "replay/perfetto.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "analysis/synthetic_job.h"
#include "interop/exported.h"
#include "interop/pftrace_reader.h"
#include "interop/timed_job.h"
#include "replay/check.h"
#include "support/checked_trace.h"
#include "support/temp_dir.h"
#include "trace/python_sites.h"
#include "util/json.h"

namespace replay {
namespace {

using nlohmann::json;
using testing::SyntheticJob;

// Ranks 0 and 1 hang in an allreduce on dup(WORLD) that rank 2 never enters.
void WriteJob(const std::string& dir) { testing::WriteRingThenHang(dir, /*on_world=*/false); }

json Export(const std::string& dir, PerfettoSummary* summary = nullptr) {
  json doc = json::parse(testing::Exported(dir, WritePerfetto, PerfettoOptions{}, summary), nullptr, false);
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

TEST_CASE("a Perfetto slice says where its call was made, Python frames first", "[interop]") {
  testing::TempDir tmp;
  testing::WritePythonSiteJob(tmp / "job");
  json doc = Export(tmp / "job");
  size_t allreduces = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"].get<std::string>().find("MPI_Allreduce") != 0) continue;
    ++allreduces;
    if (e["pid"] == 0) {
      CHECK(e["args"].value("site", "") == "step (train.py:42) < main (train.py:80)");
    } else {
      CHECK_FALSE(e["args"].contains("site"));
    }
  }
  CHECK(allreduces == 2);
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
  return json::parse(testing::Exported(dir, WritePerfetto, o, summary));
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
  auto [trace, report] = testing::OpenAndCheck(tmp / "t");
  REQUIRE(!report.findings.empty());
  PerfettoOptions o;
  o.around = report.findings;
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
    auto s = WritePerfetto(*trace, out, o);
    REQUIRE(!s.ok());
    CHECK(s.status().message().find("about the job as a whole") != std::string::npos);
  }
}

// The protobuf form (WritePerfettoProto).

using testing::Pftrace;
using testing::ReadPftrace;

Pftrace ExportProto(const std::string& dir, const PerfettoOptions& o = {}, PerfettoSummary* summary = nullptr) {
  return ReadPftrace(testing::Exported(dir, WritePerfettoProto, o, summary));
}

json ExportJson(const std::string& dir, const PerfettoOptions& o = {}) {
  PerfettoSummary unused;
  return ExportWith(dir, o, &unused);
}

// Both forms as one comparable list of lines: processes, tracks, slices with
// their arguments, instants and arrows, each with its rank, track and times
// in microseconds from the start of the trace.
std::vector<std::string> Lines(const json& doc) {
  std::map<std::pair<int, int>, std::string> track_names;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") track_names[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  auto where = [&](const json& e) {
    auto it = track_names.find({e["pid"].get<int>(), e["tid"].get<int>()});
    return "rank " + std::to_string(e["pid"].get<int>()) + " [" + (it != track_names.end() ? it->second : "") + "] ";
  };
  std::vector<std::string> lines;
  std::map<uint64_t, std::string> flow_from;
  std::map<uint64_t, std::string> flow_to;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") {
      lines.push_back("process " + std::to_string(e["pid"].get<int>()) + " " + e["args"]["name"].get<std::string>());
    } else if (ph == "M" && e["name"] == "process_labels") {
      lines.push_back("labels " + std::to_string(e["pid"].get<int>()) + " " + e["args"]["labels"].get<std::string>());
    } else if (ph == "M" && e["name"] == "thread_sort_index") {
      lines.push_back("track " + where(e) + std::to_string(e["args"]["sort_index"].get<int>()));
    } else if (ph == "X") {
      lines.push_back("slice " + where(e) + e["name"].get<std::string>() + " " + e["cat"].get<std::string>() + " " +
                      json(e["ts"]).dump() + "+" + json(e["dur"]).dump() + " " + e["args"].dump());
    } else if (ph == "i") {
      lines.push_back("instant " + where(e) + e["name"].get<std::string>() + " " + e["cat"].get<std::string>() + " " +
                      json(e["ts"]).dump());
    } else if (ph == "s") {
      flow_from[e["id"]] = where(e) + json(e["ts"]).dump();
    } else if (ph == "f") {
      flow_to[e["id"]] = where(e) + json(e["ts"]).dump();
    }
  }
  for (const auto& [id, from] : flow_from) lines.push_back("arrow " + from + " -> " + flow_to[id]);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<std::string> Lines(const Pftrace& t) {
  auto us = [](uint64_t ns) { return json(static_cast<double>(ns) / 1000.0).dump(); };
  std::vector<std::string> lines;
  for (const auto& [uuid, track] : t.tracks) {
    if (track.is_process) {
      lines.push_back("process " + std::to_string(track.pid - 1) + " " + track.process_name);
      for (const std::string& l : track.labels) lines.push_back("labels " + std::to_string(track.pid - 1) + " " + l);
    } else {
      lines.push_back("track rank " + std::to_string(t.tracks.at(track.parent).pid - 1) + " [" + track.name + "] " +
                      std::to_string(track.order));
    }
  }
  std::map<uint64_t, std::string> flow_from;
  std::map<uint64_t, std::string> flow_to;
  for (const testing::PftraceSlice& s : t.slices) {
    const std::string where = "rank " + std::to_string(s.rank) + " [" + s.track + "] ";
    lines.push_back("slice " + where + s.name + " " + s.category + " " + us(s.begin_ns) + "+" +
                    us(s.end_ns - s.begin_ns) + " " + s.args.dump());
    // A JSON arrow starts and ends at its slices' starts.
    for (uint64_t id : s.flows_out) flow_from[id] = where + us(s.begin_ns);
    for (uint64_t id : s.flows_in) flow_to[id] = where + us(s.begin_ns);
  }
  for (const testing::PftraceInstant& in : t.instants) {
    lines.push_back("instant rank " + std::to_string(in.rank) + " [" + in.track + "] " + in.name + " " + in.category +
                    " " + us(in.ns));
  }
  for (const auto& [id, from] : flow_from) lines.push_back("arrow " + from + " -> " + flow_to[id]);
  std::sort(lines.begin(), lines.end());
  return lines;
}

void CheckSameTimeline(const std::string& dir, const PerfettoOptions& o) {
  PerfettoSummary summary;
  Pftrace proto = ExportProto(dir, o, &summary);
  PerfettoSummary json_summary;
  json doc = ExportWith(dir, o, &json_summary);
  std::vector<std::string> expected = Lines(doc);
  std::vector<std::string> got = Lines(proto);
  REQUIRE(!expected.empty());
  CHECK(got == expected);
  CHECK(summary.slices == json_summary.slices);
  CHECK(summary.flows == json_summary.flows);
  CHECK(summary.left_out == json_summary.left_out);
  CHECK(summary.ranks == json_summary.ranks);
  CHECK(summary.events == proto.packets);
}

TEST_CASE("the protobuf export shows what the JSON export shows: processes, tracks, slices, arguments, instants, arrows",
          "[interop]") {
  testing::TempDir tmp;
  SECTION("the whole trace") {
    WriteJob(tmp / "t");
    CheckSameTimeline(tmp / "t", {});
  }
  SECTION("some ranks") {
    WriteJob(tmp / "t");
    PerfettoOptions o;
    o.ranks = {0, 2};
    CheckSameTimeline(tmp / "t", o);
  }
  SECTION("a rank still running, labelled so") {
    {
      SyntheticJob job(tmp / "t", 2);
      job.InitAll();
      job.Allreduce(0, SyntheticJob::World(), 1);
      job.Allreduce(1, SyntheticJob::World(), 1, 1024, false);
      job.Finalize(0);
      job.KeepRunning(1);
      CheckSameTimeline(tmp / "t", {});
      Pftrace t = ExportProto(tmp / "t");
      std::vector<std::string> labels;
      for (const auto& [uuid, track] : t.tracks) labels.insert(labels.end(), track.labels.begin(), track.labels.end());
      CHECK(labels == std::vector<std::string>{"still being written"});
    }
  }
  SECTION("without arrows") {
    WriteJob(tmp / "t");
    PerfettoOptions o;
    o.flows = false;
    CheckSameTimeline(tmp / "t", o);
  }
  SECTION("a window, and a window that runs to the end") {
    testing::WriteTimedJob(tmp / "t", true);
    PerfettoOptions o;
    o.window = PerfettoWindow{4'000'000'000, 6'000'000'000};
    CheckSameTimeline(tmp / "t", o);
    o.window = PerfettoWindow{8'000'000'000};
    CheckSameTimeline(tmp / "t", o);
  }
  SECTION("a window around the first finding") {
    testing::WriteTimedJob(tmp / "t", true);
    CheckReport report = testing::CheckDir(tmp / "t");
    REQUIRE(!report.findings.empty());
    PerfettoOptions o;
    o.around = report.findings;
    CheckSameTimeline(tmp / "t", o);
  }
}

TEST_CASE("the protobuf export has one process per rank, its tracks under it, and arrows Perfetto joins", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  PerfettoSummary summary;
  Pftrace t = ExportProto(tmp / "t", {}, &summary);
  CHECK(summary.ranks == 3);
  CHECK(t.process_ordering);

  // One process per rank: pid rank + 1 (never 0, which Perfetto gives the
  // kernel's idle task), named after rank, host and recorded pid.
  std::map<int32_t, const testing::PftraceTrack*> processes;
  for (const auto& [uuid, track] : t.tracks) {
    if (!track.is_process) continue;
    CHECK(processes.emplace(track.pid, &track).second);
    CHECK(track.explicit_children);
    CHECK(track.order == track.pid - 1);
    CHECK(track.process_name.rfind("rank " + std::to_string(track.pid - 1) + " (", 0) == 0);
    CHECK(track.process_name.find(", pid ") != std::string::npos);
  }
  REQUIRE(processes.size() == 3);
  CHECK(processes.begin()->first == 1);
  CHECK(processes.rbegin()->first == 3);
  for (const auto& [uuid, track] : t.tracks) {
    if (!track.is_process) CHECK(t.tracks.at(track.parent).is_process);
  }

  // As many slices per rank as the JSON form has.
  json doc = ExportJson(tmp / "t");
  std::map<int, size_t> json_slices;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") ++json_slices[e["pid"].get<int>()];
  }
  std::map<int, size_t> proto_slices;
  for (const testing::PftraceSlice& s : t.slices) ++proto_slices[s.rank];
  CHECK(proto_slices == json_slices);
  CHECK(summary.slices == t.slices.size());

  // Each arrow's id starts at one slice and terminates at another, and
  // Perfetto reads its start first (it reads by time, ties in file order).
  std::map<uint64_t, const testing::PftraceSlice*> from;
  std::map<uint64_t, const testing::PftraceSlice*> to;
  for (const testing::PftraceSlice& s : t.slices) {
    for (uint64_t id : s.flows_out) CHECK(from.emplace(id, &s).second);
    for (uint64_t id : s.flows_in) CHECK(to.emplace(id, &s).second);
  }
  REQUIRE(!from.empty());
  CHECK(from.size() == summary.flows);
  CHECK(from.size() == to.size());
  for (const auto& [id, start] : from) {
    INFO("arrow " << id);
    auto end = to.find(id);
    REQUIRE(end != to.end());
    CHECK(start != end->second);
    CHECK((end->second->end_ns > start->begin_ns ||
           (end->second->end_ns == start->begin_ns && end->second->end_packet > start->begin_packet)));
  }
  // The broadcast's arrows: from its first caller to both others.
  size_t bcast_arrows = 0;
  for (const testing::PftraceSlice& s : t.slices) {
    if (s.name == "MPI_Bcast #1") bcast_arrows += s.flows_out.size();
  }
  CHECK(bcast_arrows == 2);

  // Ranks 0 and 1 never returned from the allreduce: slices to the end of
  // their trace, named so.
  std::set<int> hung;
  for (const testing::PftraceSlice& s : t.slices) {
    if (s.name == "MPI_Allreduce #2 (never returned)") {
      hung.insert(s.rank);
      CHECK(s.args["state"] == "never returned");
    }
  }
  CHECK(hung == std::set<int>{0, 1});
}

TEST_CASE("the protobuf export's interned names start over past their bound, and every name still resolves",
          "[interop]") {
  testing::TempDir tmp;
  constexpr int kMarks = 70'000;  // distinct names, more than the bound of 65,536
  {
    SyntheticJob job(tmp / "t", 1);
    job.Init(0);
    for (int i = 0; i < kMarks; ++i) {
      job.Mark(0, "step", i);
      if (i % 4096 == 4095) job.Flush(0);  // the ring holds fewer
    }
    job.Finalize(0);
  }
  Pftrace t = ExportProto(tmp / "t");
  CHECK(t.clears >= 2);  // the first packet's, then at least one more
  REQUIRE(t.instants.size() == static_cast<size_t>(kMarks));
  for (int i = 0; i < kMarks; i += 997) CHECK(t.instants[static_cast<size_t>(i)].name == "step=" + std::to_string(i));
  CHECK(t.instants.back().name == "step=" + std::to_string(kMarks - 1));
  CHECK(t.instants.back().category == "mark");
}

TEST_CASE("the protobuf export fails when its stream does", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  auto trace = TraceReader::Open(tmp / "t");
  REQUIRE(trace.ok());
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  auto s = WritePerfettoProto(**trace, out);
  REQUIRE(!s.ok());
  CHECK(s.status().message().find("writing the Perfetto trace failed") != std::string::npos);
}

}  // namespace
}  // namespace replay
