#include "replay/flight_recorder.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>

#include "analysis/synthetic_job.h"
#include "interop/pickle.h"
#include "replay/check.h"
#include "support/checked_trace.h"
#include "support/temp_dir.h"
#include "util/json.h"

namespace replay {
namespace {

using nlohmann::json;
using testing::SyntheticJob;
using testing::TempDir;
using testing::Titles;

// Dumps of a 4-rank job (the layout PyTorch writes, version 2.4): a broadcast
// and an allreduce complete, then rank 2 passes 2048 elements to the third
// collective, an allreduce, where the others pass 4096, and every rank hangs
// in it. As JSON documents and as pickles (protocols 4 and 2, made by
// Python's pickle module).
std::string Fixture(const std::string& name) { return std::string(REPLAY_SOURCE_DIR) + "/tests/interop/data/" + name; }

// With the check's default options, its minimum wait included.
CheckReport CheckDir(const std::string& dir) { return testing::CheckDir(dir, CheckOptions{}); }

TEST_CASE("Flight Recorder dumps of a count mismatch are diagnosed as one, JSON or pickle", "[interop]") {
  for (const char* set : {"fr_mismatch_json", "fr_mismatch_pickle"}) {
    DYNAMIC_SECTION(set) {
      TempDir tmp;
      auto files = FindFlightRecorderDumps(Fixture(set));
      REQUIRE(files.ok());
      REQUIRE(files->size() == 4);
      for (const std::string& f : *files) CHECK(LooksLikeFlightRecorderDump(f));
      auto imported = ImportFlightRecorder(*files, tmp / "t");
      REQUIRE(imported.ok());
      CHECK(imported->ranks == 4);
      CHECK(imported->entries == 12);
      CHECK(imported->version == "2.4");

      CheckReport report = CheckDir(tmp / "t");
      INFO(Titles(report));
      REQUIRE(!report.findings.empty());
      const Finding& f = report.findings[0];
      CHECK(f.kind == FindingKind::kMismatch);
      CHECK(f.ranks == std::vector<int32_t>{2});
      CHECK(f.seq == 3);
      CHECK(f.op == "nccl:all_reduce");
      REQUIRE(f.comm);
      CHECK(f.comm->name.find("default_pg") != std::string::npos);
      CHECK(f.comm->members == std::vector<int32_t>{0, 1, 2, 3});
      CHECK(ParseJsonObject(f.data)["field"] == "count");
      CHECK(f.title.find("2048") != std::string::npos);
      CHECK(f.title.find("4096") != std::string::npos);
    }
  }
}

TEST_CASE("Flight Recorder dumps are found by directory, by prefix or one by one", "[interop]") {
  auto by_prefix = FindFlightRecorderDumps(Fixture("fr_mismatch_json/nccl_trace_rank_"));
  REQUIRE(by_prefix.ok());
  CHECK(by_prefix->size() == 4);
  auto one = FindFlightRecorderDumps(Fixture("fr_mismatch_pickle/nccl_trace_rank_3"));
  REQUIRE(one.ok());
  CHECK(one->size() == 1);

  TempDir tmp;
  testing::WriteFile(tmp / "rank_0.txt", "not a dump\n");
  CHECK(!LooksLikeFlightRecorderDump(tmp / "rank_0.txt"));
  auto none = FindFlightRecorderDumps(tmp.path());
  REQUIRE(!none.ok());
  CHECK(none.status().code() == Status::Code::kNotFound);
}

TEST_CASE("damaged or hostile Flight Recorder dumps are refused with a reason", "[interop]") {
  TempDir tmp;
  const std::string good = testing::ReadFile(Fixture("fr_mismatch_pickle/nccl_trace_rank_0"));
  SECTION("a pickle cut short") {
    for (size_t cut : {size_t{3}, good.size() / 2, good.size() - 1}) {
      testing::WriteFile(tmp / "nccl_trace_rank_0", good.substr(0, cut));
      auto r = ImportFlightRecorder({tmp / "nccl_trace_rank_0"}, tmp / "t");
      REQUIRE(!r.ok());
      CHECK(r.status().message().find("nccl_trace_rank_0") != std::string::npos);
    }
  }
  SECTION("a pickle that would run code") {
    // pickle.dumps(os.system) in protocol 2: GLOBAL 'posix system'.
    testing::WriteFile(tmp / "nccl_trace_rank_0", std::string("\200\002cposix\012system\012q\000.", 19));
    auto r = ImportFlightRecorder({tmp / "nccl_trace_rank_0"}, tmp / "t");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("would run Python code (GLOBAL") != std::string::npos);
  }
  SECTION("JSON that is not a dump") {
    testing::WriteFile(tmp / "nccl_trace_rank_0.json", "{\"hello\": 1}");
    auto r = ImportFlightRecorder({tmp / "nccl_trace_rank_0.json"}, tmp / "t");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kNotATrace);
  }
  SECTION("entries of the wrong type") {
    testing::WriteFile(tmp / "nccl_trace_rank_0.json", "{\"version\": \"2.4\", \"entries\": {\"a\": 1}}");
    auto r = ImportFlightRecorder({tmp / "nccl_trace_rank_0.json"}, tmp / "t");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("\"entries\" is not a list") != std::string::npos);
  }
}

// A broadcast and an allreduce, then rank 3 passes another count to the
// next allreduce and the others hang in it.
void WriteMismatchJob(const std::string& dir) { testing::WriteCountMismatch(dir, 3, /*bcast=*/true); }

// The trace in `dir` exported as Flight Recorder dumps into `out`: JSON
// documents, or without `as_json` pickles.
std::vector<std::string> Export(const std::string& dir, const std::string& out, bool as_json) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  FlightRecorderExportOptions o;
  o.json = as_json;
  auto files = ExportFlightRecorder(**trace, out, o);
  REQUIRE(files.ok());
  return std::move(files).value();
}

TEST_CASE("a trace exported as Flight Recorder dumps and imported again is diagnosed the same", "[interop]") {
  for (bool as_json : {false, true}) {
    DYNAMIC_SECTION((as_json ? "JSON" : "pickle")) {
      TempDir tmp;
      WriteMismatchJob(tmp / "t");
      const std::vector<std::string> files = Export(tmp / "t", tmp / "fr", as_json);
      REQUIRE(files.size() == 4);
      CHECK(files.front() == tmp / (as_json ? "fr/nccl_trace_rank_0.json" : "fr/nccl_trace_rank_0"));

      // The documented layout: version, pg_config, pg_status, entries with their fields.
      const std::string bytes = testing::ReadFile(files.at(1));
      auto doc = as_json ? Result<json>(json::parse(bytes)) : interop::ReadPickle(bytes, files.at(1));
      REQUIRE(doc.ok());
      CHECK((*doc)["version"].is_string());
      REQUIRE((*doc)["pg_config"].is_object());
      REQUIRE((*doc)["entries"].is_array());
      REQUIRE((*doc)["entries"].size() >= 3);
      for (const json& e : (*doc)["entries"]) {
        for (const char* key : {"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id",
                                "profiling_name", "time_created_ns", "input_sizes", "input_dtypes", "output_sizes",
                                "output_dtypes", "state", "time_discovered_started_ns",
                                "time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p", "frames"}) {
          INFO(key);
          CHECK(e.contains(key));
        }
        CHECK(e["process_group"].size() == 2);
      }
      const json& last = (*doc)["entries"].back();
      CHECK(last["profiling_name"] == "nccl:all_reduce");
      CHECK(last["state"] == "started");
      CHECK(last["retired"] == false);

      auto found = FindFlightRecorderDumps(tmp / "fr");
      REQUIRE(found.ok());
      auto imported = ImportFlightRecorder(*found, tmp / "back");
      REQUIRE(imported.ok());
      CHECK(imported->ranks == 4);
      CheckReport before = CheckDir(tmp / "t");
      CheckReport after = CheckDir(tmp / "back");
      INFO("before:\n" << Titles(before) << "after:\n" << Titles(after));
      REQUIRE(!before.findings.empty());
      REQUIRE(!after.findings.empty());
      CHECK(after.findings[0].kind == before.findings[0].kind);
      CHECK(after.findings[0].ranks == before.findings[0].ranks);
      CHECK(ParseJsonObject(after.findings[0].data)["field"] == ParseJsonObject(before.findings[0].data)["field"]);
      CHECK(after.findings[0].kind == FindingKind::kMismatch);
      CHECK(after.findings[0].ranks == std::vector<int32_t>{3});
    }
  }
}


TEST_CASE("exporting a trace whose counts overflow when multiplied by the group size holds them at the limit",
          "[interop]") {
  // Found by the analysis fuzz target: an allgather's count times the group
  // size overflowed int64.
  TempDir tmp;
  {
    SyntheticJob job(tmp / "t", 2);
    job.InitAll();
    for (int r = 0; r < 2; ++r) {
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllgather, SyntheticJob::World(), 1,
                     int64_t{5'688'729'441'642'968'969}, 0, 0);
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllgather, SyntheticJob::World(), 2,
                     -int64_t{5'688'729'441'642'968'969}, 0, 0);
      job.Finalize(r);
    }
  }
  const std::vector<std::string> files = Export(tmp / "t", tmp / "fr", true);
  json doc = json::parse(testing::ReadFile(files.front()));
  std::vector<int64_t> outs;
  for (const json& e : doc["entries"]) {
    if (e["profiling_name"] == "nccl:all_gather") outs.push_back(e["output_sizes"][0][0].get<int64_t>());
  }
  CHECK(outs == std::vector<int64_t>{INT64_MAX, INT64_MIN});
}

}  // namespace
}  // namespace replay
