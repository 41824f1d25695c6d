#include "replay/jsonl.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <set>
#include <sstream>

#include "analysis/synthetic_job.h"
#include "interop/exported.h"
#include "support/sample_events.h"
#include "support/temp_dir.h"
#include "trace/event_json.h"
#include "trace/python_sites.h"
#include "util/json.h"

namespace replay {
namespace {

using nlohmann::json;
using testing::SyntheticJob;

// Ranks 0 and 1 hang in an allreduce on WORLD that rank 2 never enters.
void WriteJob(const std::string& dir) { testing::WriteRingThenHang(dir, /*on_world=*/true); }

std::vector<json> Lines(const std::string& dir, const JsonLinesOptions& options = {}, JsonLinesSummary* summary = nullptr) {
  std::vector<json> lines;
  std::istringstream in(testing::Exported(dir, WriteJsonLines, options, summary));
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    INFO(line);
    REQUIRE(j.is_object());
    lines.push_back(std::move(j));
  }
  return lines;
}

// The line without what it adds to the event: the event as `dump --json` writes it.
json AsDumped(json line) {
  for (const char* key : {"rank", "realtime_ns", "comm_name", "parent_name", "peer_world", "root_world", "site"}) {
    line.erase(key);
  }
  if (line.contains("comm_rank")) {
    line["rank"] = line["comm_rank"];
    line.erase("comm_rank");
  }
  return line;
}

TEST_CASE("JSON Lines hold every event of every rank, each as dump --json writes it", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  JsonLinesSummary summary;
  std::vector<json> lines = Lines(tmp / "t", {}, &summary);
  auto trace = TraceReader::Open(tmp / "t");
  REQUIRE(trace.ok());
  size_t at = 0;
  for (size_t i = 0; i < (*trace)->ranks().size(); ++i) {
    auto rank = (*trace)->OpenRank(i);
    REQUIRE(rank.ok());
    for (const Event& e : (*rank)->events()) {
      REQUIRE(at < lines.size());
      const json& line = lines[at++];
      INFO(line.dump());
      CHECK(line["rank"] == (*rank)->rank());
      CHECK(line["realtime_ns"] == (*rank)->header().start_realtime_ns + e.time_ns);
      CHECK(AsDumped(line) == EventToJson(e, (*rank)->header()));
    }
  }
  CHECK(at == lines.size());
  CHECK(summary.events == lines.size());
  CHECK(summary.ranks == 3);
  CHECK(summary.notes.empty());
}

TEST_CASE("JSON Lines name communicators as check does and give peers as world ranks", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  std::set<std::string> bcast_comms;
  size_t sends = 0;
  size_t dups = 0;
  for (const json& line : Lines(tmp / "t")) {
    INFO(line.dump());
    if (line["kind"] == "op" && line["api"] == "MPI_Bcast") {
      bcast_comms.insert(line["comm_name"].get<std::string>());
      CHECK(line["root_world"] == 0);
    }
    if (line["kind"] == "op" && line["api"] == "MPI_Send") {
      ++sends;
      CHECK(line["comm_name"] == "WORLD");
      CHECK(line["peer_world"] == (line["rank"].get<int>() + 1) % 3);
    }
    if (line["kind"] == "op" && line["api"] == "MPI_Allreduce") CHECK(line["comm_name"] == "WORLD");
    if (line["kind"] == "comm_create" && line["api"] == "MPI_Comm_dup") {
      ++dups;
      CHECK(line["comm_rank"] == line["rank"]);  // WORLD's order
      CHECK(line["comm_name"] == "dup(WORLD)");
      CHECK(line["parent_name"] == "WORLD");
    }
  }
  CHECK(bcast_comms == std::set<std::string>{"dup(WORLD)"});
  CHECK(sends == 3);
  CHECK(dups == 3);
}

TEST_CASE("JSON Lines say where each call was made, Python frames first", "[interop]") {
  testing::TempDir tmp;
  testing::WritePythonSiteJob(tmp / "job");
  size_t with_site = 0;
  for (const json& line : Lines(tmp / "job")) {
    if (line.value("api", "") != "MPI_Allreduce") continue;
    if (line["rank"] == 0) {
      ++with_site;
      CHECK(line.value("site", "") == "step (train.py:42) < main (train.py:80)");
    } else {
      CHECK_FALSE(line.contains("site"));
    }
  }
  CHECK(with_site == 2);  // the call and its return
}

TEST_CASE("JSON Lines of some ranks hold only theirs", "[interop]") {
  testing::TempDir tmp;
  WriteJob(tmp / "t");
  JsonLinesOptions o;
  o.ranks = {1};
  std::vector<json> lines = Lines(tmp / "t", o);
  REQUIRE(!lines.empty());
  for (const json& line : lines) CHECK(line["rank"] == 1);
}

TEST_CASE("JSON Lines carry every kind of event", "[interop]") {
  testing::TempDir tmp;
  WriterOptions w;
  w.dir = tmp / "t";
  w.header.rank = 0;
  w.header.world_size = 1;
  w.header.api_names = testing::SyntheticApiNames();
  w.background_thread = false;
  auto writer = TraceWriter::Open(w);
  REQUIRE(writer.ok());
  std::vector<Event> events = testing::SampleEventsOfEveryKind();
  for (const Event& e : events) REQUIRE((*writer)->Append(e));
  REQUIRE((*writer)->Close(CloseReason::kFinalize).ok());
  std::vector<json> lines = Lines(tmp / "t");
  REQUIRE(lines.size() == events.size());
  std::set<std::string> kinds;
  for (const json& line : lines) kinds.insert(line["kind"].get<std::string>());
  CHECK(kinds.size() == events.size());
}

}  // namespace
}  // namespace replay
