// End-to-end: a recorded job bundled, reported and exported with the `replay`
// command, every command reading bundles and Flight Recorder dumps, and the
// export's streams and windows (the Perfetto timeline as JSON and as protobuf).
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "e2e/e2e.h"
#include "interop/pftrace_reader.h"
#include "interop/timed_job.h"
#include "replay/bundle.h"
#include "replay/trace_reader.h"
#include "util/json.h"

namespace replay {
namespace {

// Planted in the environment of the recorded job (and, for the last, on the
// recorded command line), where a real job carries credentials.
constexpr const char* kHfToken = "hf_QpZrT8wXy2LmN4vB6cD8eF0gH2jK4lM6nP";
constexpr const char* kAwsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr const char* kUrlPassword = "hunter2correcthorse";
constexpr const char* kWandbKey = "0123456789abcdef0123456789abcdef01234567";

// Records 4 ranks of the trainer at level data; rank 1 passes half the count
// to the gradient allreduce of step 2 and the job hangs (stopped after 8 s).
void RecordMismatch(const std::string& dir) {
  std::string env = std::string("export HF_TOKEN=") + kHfToken + " AWS_SECRET_ACCESS_KEY=" + kAwsSecret +
                    " MLFLOW_TRACKING_URI=https://alice:" + kUrlPassword + "@mlflow.example.com/api" +
                    " REPLAY_ENV_PREFIXES=OMPI_,REPLAY_,HF_,AWS_,MLFLOW_,WANDB_; ";
  RunResult r = Run(env + Replay() + " record --level data -o " + dir + " -- env WANDB_API_KEY=" + kWandbKey + " " +
                        testing::Mpirun(4) + " " + testing::MpiTrain() +
                        " --ckpt-every 0 --steps 6 --fault mismatch:rank=1,step=2",
                    8);
  INFO(r.output);
  REQUIRE(std::filesystem::exists(dir + "/rank-00003"));
}

json CheckJson(const std::string& path, int* exit_code) {
  RunResult r = Run(Replay() + " check --json " + path, 60);
  INFO(r.output);
  *exit_code = r.exit_code;
  REQUIRE((r.exit_code == 0 || r.exit_code == 1));
  return json::parse(r.output);
}

// `replay export` of `trace` with `options`, which must succeed: what it printed.
std::string Exported(const std::string& trace, const std::string& options) {
  RunResult e = Run(Replay() + " export " + trace + " " + options, 60);
  INFO(e.output);
  REQUIRE(e.exit_code == 0);
  return e.output;
}

// All a reader of the bundle could see: its bytes, the files it unpacks to,
// and what their headers and manifest decode to.
std::string EverythingIn(const std::string& bundle, const std::string& unpack_dir) {
  std::string all = testing::ReadFile(bundle);
  auto unpacked = UnpackBundle(bundle, unpack_dir);
  REQUIRE(unpacked.ok());
  for (const std::string& f : unpacked->files) all += testing::ReadFile(unpack_dir + "/" + f);
  auto trace = TraceReader::Open(unpack_dir);
  REQUIRE(trace.ok());
  for (const std::string& a : (*trace)->manifest()->command) all += a + "\n";
  for (const RankEntry& e : (*trace)->ranks()) {
    for (const auto& [k, v] : e.header.environment) all += k + "=" + v + "\n";
    for (const std::string& a : e.header.command_line) all += a + "\n";
  }
  return all;
}

std::vector<std::string> UnpackedFiles(const std::string& bundle, const std::string& dir) {
  auto unpacked = UnpackBundle(bundle, dir);
  REQUIRE(unpacked.ok());
  return unpacked->files;
}

bool AnyPayloads(const std::vector<std::string>& files) {
  return std::any_of(files.begin(), files.end(), [](const std::string& f) { return f.find("/payloads") != std::string::npos; });
}

TEST_CASE("a recorded job's bundle is small, redacted, and every command reads it like the directory", "[e2e]") {
  TempDir tmp;
  const std::string t = tmp / "job";
  RecordMismatch(t);

  // The planted secrets were recorded.
  {
    auto trace = TraceReader::Open(t);
    REQUIRE(trace.ok());
    const RankHeader& h = (*trace)->ranks()[0].header;
    CHECK(h.Env("HF_TOKEN") == kHfToken);
    CHECK(h.Env("WANDB_API_KEY") == kWandbKey);
  }

  RunResult b = Run(Replay() + " bundle " + t + " -o " + (tmp / "job.rpb"), 120);
  INFO(b.output);
  REQUIRE(b.exit_code == 0);
  CHECK(b.output.find("4 ranks") != std::string::npos);
  CHECK(std::regex_search(b.output, std::regex("in [0-9.]+ s")));
  CHECK(b.output.find("HF_TOKEN (secret name)") != std::string::npos);
  // Small enough to attach to a GitHub issue (25 MB), by far.
  CHECK(std::filesystem::file_size(tmp / "job.rpb") < 4u << 20);

  SECTION("check on the bundle says what check on the directory says") {
    int dir_rc = -1;
    int bundle_rc = -1;
    json from_dir = CheckJson(t, &dir_rc);
    json from_bundle = CheckJson(tmp / "job.rpb", &bundle_rc);
    CHECK(dir_rc == 1);
    CHECK(bundle_rc == dir_rc);
    REQUIRE(!from_dir["findings"].empty());
    CHECK(from_dir["findings"][0]["kind"] == "mismatch");
    CHECK(from_bundle["findings"] == from_dir["findings"]);
    CHECK(from_bundle["ranks"] == from_dir["ranks"]);
    CHECK(from_bundle["trace"] == tmp / "job.rpb");
    // And the check the bundle carries in its header is the same.
    auto header_text = ReadBundleHeader(tmp / "job.rpb");
    REQUIRE(header_text.ok());
    json header = json::parse(*header_text);
    CHECK(header["check"]["findings"] == from_dir["findings"]);
  }
  SECTION("info, dump and report read the bundle") {
    RunResult info = Run(Replay() + " info --json " + (tmp / "job.rpb"), 60);
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    CHECK(json::parse(info.output)["ranks"].size() == 4);
    RunResult dump = Run(Replay() + " dump --rank 1 --events 0-5 " + (tmp / "job.rpb"), 60);
    CHECK(dump.exit_code == 0);
    RunResult md = Run(Replay() + " report --markdown " + (tmp / "job.rpb"), 60);
    INFO(md.output);
    REQUIRE(md.exit_code == 0);
    CHECK(md.output.find("1. **mismatch**") != std::string::npos);
    RunResult html = Run(Replay() + " report " + (tmp / "job.rpb") + " -o " + (tmp / "r.html"), 60);
    INFO(html.output);
    REQUIRE(html.exit_code == 0);
    CHECK(testing::ReadFile(tmp / "r.html").find("<span class=\"kind\">mismatch</span>") != std::string::npos);
  }
  SECTION("the secrets are in no byte of it, and are listed as redacted") {
    const std::string all = EverythingIn(tmp / "job.rpb", tmp / "out");
    for (const char* secret : {kHfToken, kAwsSecret, kUrlPassword, kWandbKey}) {
      INFO(secret);
      CHECK(all.find(secret) == std::string::npos);
    }
    CHECK(all.find("@mlflow.example.com/api") != std::string::npos);
    auto header_text = ReadBundleHeader(tmp / "job.rpb");
    REQUIRE(header_text.ok());
    json header = json::parse(*header_text);
    std::set<std::string> names;
    for (const auto& item : header["redaction"]["items"]) names.insert(item["name"].get<std::string>());
    for (const char* name : {"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_URI", "WANDB_API_KEY"}) {
      INFO(name);
      CHECK(names.count(name) == 1);
    }
  }
  SECTION("info and report of the directory show the command without its secrets, private files") {
    RunResult info = Run(Replay() + " info " + t, 60);
    INFO(info.output);
    REQUIRE(info.exit_code == 0);
    CHECK(info.output.find("WANDB_API_KEY=[REDACTED:") != std::string::npos);
    CHECK(info.output.find(kWandbKey) == std::string::npos);
    RunResult info_json = Run(Replay() + " info --json " + t, 60);
    CHECK(info_json.output.find(kWandbKey) == std::string::npos);
    RunResult kept = Run(Replay() + " info --no-redact " + t, 60);
    CHECK(kept.output.find(kWandbKey) != std::string::npos);
    RunResult md = Run(Replay() + " report --markdown " + t, 60);
    REQUIRE(md.exit_code == 0);
    CHECK(md.output.find(kWandbKey) == std::string::npos);
    RunResult html = Run(Replay() + " report " + t + " -o " + (tmp / "r.html"), 60);
    REQUIRE(html.exit_code == 0);
    const std::string page = testing::ReadFile(tmp / "r.html");
    for (const char* secret : {kHfToken, kAwsSecret, kUrlPassword, kWandbKey}) {
      INFO(secret);
      CHECK(page.find(secret) == std::string::npos);
    }
    Exported(t, "--format jsonl -o " + (tmp / "t.jsonl"));
    using std::filesystem::perms;
    for (const char* f : {"r.html", "t.jsonl", "job.rpb"}) {
      INFO(f);
      CHECK((std::filesystem::status(tmp / f).permissions() & (perms::group_all | perms::others_all)) == perms::none);
    }
  }
  SECTION("--no-payloads leaves the received bytes out, --ranks keeps a subset") {
    CHECK(AnyPayloads(UnpackedFiles(tmp / "job.rpb", tmp / "all")));
    RunResult np = Run(Replay() + " bundle --no-payloads " + t + " -o " + (tmp / "np.rpb"), 120);
    INFO(np.output);
    REQUIRE(np.exit_code == 0);
    CHECK(!AnyPayloads(UnpackedFiles(tmp / "np.rpb", tmp / "np")));
    CHECK(std::filesystem::file_size(tmp / "np.rpb") < std::filesystem::file_size(tmp / "job.rpb"));

    RunResult some = Run(Replay() + " bundle --ranks 0,2-3 " + t + " -o " + (tmp / "some.rpb"), 120);
    INFO(some.output);
    REQUIRE(some.exit_code == 0);
    int rc = -1;
    json k = CheckJson(tmp / "some.rpb", &rc);
    // The rank left out is still one of the job's: check lists it as untraced.
    std::vector<int> ranks;
    for (const auto& r : k["ranks"]) {
      if (r["status"] != "untraced") ranks.push_back(r["rank"]);
    }
    CHECK(ranks == std::vector<int>{0, 2, 3});
    CHECK(k["ranks"][1]["status"] == "untraced");

    RunResult bad = Run(Replay() + " bundle --ranks 0,x " + t + " -o " + (tmp / "bad.rpb"), 60);
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("--ranks") != std::string::npos);
  }
  SECTION("exported as Flight Recorder dumps, the job is diagnosed the same") {
    Exported(t, "--format flight-recorder -o " + (tmp / "fr"));
    CHECK(std::filesystem::exists(tmp / "fr/nccl_trace_rank_3"));
    int rc = -1;
    json k = CheckJson(tmp / "fr", &rc);
    CHECK(rc == 1);
    REQUIRE(!k["findings"].empty());
    CHECK(k["findings"][0]["kind"] == "mismatch");
    CHECK(k["findings"][0]["ranks"] == json::array({1}));
  }
  SECTION("exported for Perfetto, it is one JSON document of trace events") {
    Exported(t, "--format perfetto -o " + (tmp / "trace.json"));
    json doc = json::parse(testing::ReadFile(tmp / "trace.json"));
    std::set<int> pids;
    for (const auto& ev : doc["traceEvents"]) pids.insert(ev["pid"].get<int>());
    CHECK(pids == std::set<int>{0, 1, 2, 3});
  }
  SECTION("exported as a Perfetto protobuf trace, it has the JSON form's processes, operations and arrows") {
    Exported(t, "--format perfetto -o " + (tmp / "trace.json"));
    const std::string out = Exported(t, "--format pftrace -o " + (tmp / "trace.pftrace"));
    INFO(out);
    CHECK(out.find("(open in ui.perfetto.dev or trace_processor)") != std::string::npos);
    testing::Pftrace p = testing::ReadPftrace(testing::ReadFile(tmp / "trace.pftrace"));
    std::set<int> ranks;
    for (const auto& [uuid, track] : p.tracks) {
      if (track.is_process) ranks.insert(track.pid - 1);
    }
    CHECK(ranks == std::set<int>{0, 1, 2, 3});
    json doc = json::parse(testing::ReadFile(tmp / "trace.json"));
    std::multiset<std::string> json_slices;
    size_t json_arrows = 0;
    for (const auto& ev : doc["traceEvents"]) {
      if (ev["ph"] == "X") json_slices.insert(std::to_string(ev["pid"].get<int>()) + " " + ev["name"].get<std::string>());
      if (ev["ph"] == "s") ++json_arrows;
    }
    std::multiset<std::string> slices;
    size_t arrows = 0;
    for (const testing::PftraceSlice& sl : p.slices) {
      slices.insert(std::to_string(sl.rank) + " " + sl.name);
      arrows += sl.flows_out.size();
    }
    CHECK(slices == json_slices);
    CHECK(arrows == json_arrows);
    CHECK(std::filesystem::file_size(tmp / "trace.pftrace") < std::filesystem::file_size(tmp / "trace.json") / 2);
  }
}

TEST_CASE("commands given a damaged or foreign file say what it is and exit 2", "[e2e]") {
  TempDir tmp;
  testing::WriteFile(tmp / "notes.txt", "nothing to see here\n");
  // Section names must be the same on every run of the test case: no paths in them.
  struct Command {
    const char* name;
    bool takes_output;  // ends in -o, which wants a path next
  };
  for (Command c : {Command{"check", false}, Command{"info", false}, Command{"report --markdown", false},
                    Command{"bundle -o", true}, Command{"export --format perfetto -o", true}}) {
    const char* cmd = c.name;
    DYNAMIC_SECTION(cmd) {
      const std::string out = c.takes_output ? " " + (tmp / "out") : "";
      RunResult r = Run(Replay() + " " + cmd + out + " " + (tmp / "notes.txt"), 60);
      INFO(r.output);
      CHECK(r.exit_code == 2);
      CHECK(r.output.find("neither a bundle") != std::string::npos);
    }
  }
  SECTION("a truncated bundle") {
    // A bundle of the Flight Recorder dumps in the test data, cut in half.
    const std::string dumps = std::string(REPLAY_SOURCE_DIR) + "/tests/interop/data/fr_mismatch_json";
    RunResult b = Run(Replay() + " bundle " + dumps + " -o " + (tmp / "fr.rpb"), 60);
    INFO(b.output);
    REQUIRE(b.exit_code == 0);
    const std::string bytes = testing::ReadFile(tmp / "fr.rpb");
    testing::WriteFile(tmp / "cut.rpb", bytes.substr(0, bytes.size() / 2));
    RunResult r = Run(Replay() + " check " + (tmp / "cut.rpb"), 60);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("the bundle is incomplete") != std::string::npos);
    // The whole one reads.
    RunResult whole = Run(Replay() + " check " + (tmp / "fr.rpb"), 60);
    CHECK(whole.exit_code == 1);
  }
}

TEST_CASE("check reads a directory of Flight Recorder dumps and names the mismatch", "[e2e]") {
  for (const char* set : {"fr_mismatch_json", "fr_mismatch_pickle"}) {
    DYNAMIC_SECTION(set) {
      RunResult r = Run(Replay() + " check " + REPLAY_SOURCE_DIR + "/tests/interop/data/" + set, 60);
      INFO(r.output);
      CHECK(r.exit_code == 1);
      CHECK(r.output.find("1. mismatch") != std::string::npos);
      CHECK(r.output.find("rank 2 passes count 2048") != std::string::npos);
    }
  }
}


uint64_t EventCount(const std::string& dir) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  uint64_t n = 0;
  for (size_t i = 0; i < (*trace)->ranks().size(); ++i) {
    auto rank = (*trace)->OpenRank(i);
    REQUIRE(rank.ok());
    n += (*rank)->events().size();
  }
  return n;
}

std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    json j = json::parse(line, nullptr, false);
    REQUIRE(j.is_object());
    lines.push_back(std::move(j));
  }
  return lines;
}

TEST_CASE("export --format jsonl writes one JSON object per event, ranks and communicators named", "[e2e][cli]") {
  TempDir tmp;
  const std::string t = tmp / "t";
  testing::WriteTimedJob(t, true);
  const uint64_t events = EventCount(t);
  SECTION("to a file") {
    const std::string out = Exported(t, "--format jsonl -o " + (tmp / "events.jsonl"));
    INFO(out);
    CHECK(out.find("pd.read_json") != std::string::npos);
    std::vector<json> lines = JsonLines(testing::ReadFile(tmp / "events.jsonl"));
    CHECK(lines.size() == events);
    std::set<int> ranks;
    size_t allreduces = 0;
    for (const json& line : lines) {
      INFO(line.dump());
      ranks.insert(line["rank"].get<int>());
      CHECK(line["index"].is_number_unsigned());
      CHECK(line["time_ns"].is_number());
      if (line["kind"] == "op" && line["api"] == "MPI_Allreduce") {
        ++allreduces;
        CHECK(line["comm_name"] == "dup(WORLD)");
        CHECK(line["comm"].get<std::string>().rfind("0x", 0) == 0);
      }
      if (line["kind"] == "comm_create" && line["api"] == "MPI_Init") CHECK(line["comm_name"].get<std::string>().find("WORLD") == 0);
    }
    CHECK(ranks == std::set<int>{0, 1, 2});
    CHECK(allreduces == 3 + 3 + 2);
  }
  SECTION("to stdout, with -o - or without -o") {
    for (const std::string& out : {std::string(" -o -"), std::string()}) {
      RunResult e = RunApart(Replay() + " export " + t + " -f jsonl" + out, 60);
      INFO(e.error);
      REQUIRE(e.exit_code == 0);
      CHECK(JsonLines(e.output).size() == events);
    }
  }
  SECTION("of a directory that is no trace: a clear error") {
    RunResult e = RunApart(Replay() + " export " + (tmp / "nowhere") + " --format jsonl -o " + (tmp / "x.jsonl"), 60);
    CHECK(e.exit_code == 2);
    CHECK(e.error.rfind("replay export: ", 0) == 0);
    CHECK(e.error.find(tmp / "nowhere") != std::string::npos);
    CHECK(!std::filesystem::exists(tmp / "x.jsonl"));
  }
}

// Names of the Perfetto slices in `path`, and the earliest and latest second they cover.
std::multiset<std::string> SliceNames(const std::string& path, double* first_s, double* last_s) {
  json doc = json::parse(testing::ReadFile(path));
  std::multiset<std::string> names;
  *first_s = 1e18;
  *last_s = -1;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    names.insert(e["name"].get<std::string>());
    const double ts = e["ts"].get<double>() / 1e6;
    *first_s = std::min(*first_s, ts);
    *last_s = std::max(*last_s, ts + e["dur"].get<double>() / 1e6);
  }
  return names;
}

TEST_CASE("export --window keeps what happens in a stretch of time", "[e2e][cli]") {
  TempDir tmp;
  const std::string t = tmp / "t";
  testing::WriteTimedJob(t, true);
  double first = 0;
  double last = 0;
  SECTION("a time range") {
    const std::string out = Exported(t, "--format perfetto --window 4:6 -o " + (tmp / "w.json"));
    INFO(out);
    CHECK(out.find("4.000-6.000 s") != std::string::npos);
    auto names = SliceNames(tmp / "w.json", &first, &last);
    CHECK(names == std::multiset<std::string>{"MPI_Allreduce #2", "MPI_Allreduce #2", "MPI_Allreduce #2"});
    CHECK(first >= 4.0);
    CHECK(last <= 6.0);
  }
  SECTION("from a time to the end") {
    Exported(t, "-f perfetto --window 8: -o " + (tmp / "w.json"));
    auto names = SliceNames(tmp / "w.json", &first, &last);
    CHECK(names.size() == 3);
    CHECK(names.count("MPI_Allreduce #3 (never returned)") == 2);
    CHECK(names.count("MPI_Finalize") == 1);
  }
  SECTION("around the first finding") {
    const std::string out = Exported(t, "-f perfetto --window first-finding:2 -o " + (tmp / "w.json"));
    INFO(out);
    CHECK(out.find("8.000-10.000 s") != std::string::npos);
    CHECK(out.find("around finding 1") != std::string::npos);
    auto names = SliceNames(tmp / "w.json", &first, &last);
    CHECK(names.count("MPI_Allreduce #3 (never returned)") == 2);
    CHECK(names.count("MPI_Allreduce #2") == 0);
  }
  SECTION("as a Perfetto protobuf trace, the same window, and one line to say what was written") {
    Exported(t, "--format perfetto --window 4:6 -o " + (tmp / "w.json"));
    const std::string out = Exported(t, "--format pftrace --window 4:6 -o " + (tmp / "w.pftrace"));
    INFO(out);
    std::vector<std::string> lines = testing::Grep(out, "replay export");
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("w.pftrace: 3 ranks, 3 operations in 4.000-6.000 s (12 outside), 2 arrows") != std::string::npos);
    testing::Pftrace p = testing::ReadPftrace(testing::ReadFile(tmp / "w.pftrace"));
    std::multiset<std::string> names;
    for (const testing::PftraceSlice& sl : p.slices) names.insert(sl.name);
    CHECK(names == SliceNames(tmp / "w.json", &first, &last));
    CHECK(names == std::multiset<std::string>{"MPI_Allreduce #2", "MPI_Allreduce #2", "MPI_Allreduce #2"});

    const std::string around_out = Exported(t, "-f pftrace --window first-finding:2 -o " + (tmp / "f.pftrace"));
    INFO(around_out);
    CHECK(around_out.find("8.000-10.000 s") != std::string::npos);
    CHECK(around_out.find("around finding 1") != std::string::npos);
    testing::Pftrace around = testing::ReadPftrace(testing::ReadFile(tmp / "f.pftrace"));
    names.clear();
    for (const testing::PftraceSlice& sl : around.slices) names.insert(sl.name);
    CHECK(names.count("MPI_Allreduce #3 (never returned)") == 2);
    CHECK(names.count("MPI_Allreduce #2") == 0);
  }
  SECTION("around the first finding of a trace without findings: says so and writes nothing") {
    testing::WriteTimedJob(tmp / "ok", false);
    RunResult e = RunApart(Replay() + " export " + (tmp / "ok") + " -f perfetto --window first-finding -o " + (tmp / "w.json"), 60);
    INFO(e.output << e.error);
    CHECK(e.exit_code == 2);
    CHECK(e.error.find("check finds nothing wrong") != std::string::npos);
    CHECK(e.error.find("leave --window out") != std::string::npos);
    CHECK(!std::filesystem::exists(tmp / "w.json"));
  }
  SECTION("a window that is not one gets an error naming the form") {
    for (std::string format : {"perfetto", "pftrace"}) {
      for (std::string bad : {"5", "6:4", "a:b", "first-finding:0", "first-finding:x", "first", "-1:2"}) {
        RunResult e = RunApart(Replay() + " export " + t + " -f " + format + " --window=" + bad + " -o " + (tmp / "w.out"), 60);
        INFO(format << " --window " << bad << ": " << e.error);
        CHECK(e.exit_code == 2);
        CHECK(e.error.find("--window " + bad + ":") != std::string::npos);
        CHECK(e.error.find("START:END") != std::string::npos);
        CHECK(e.error.find("first-finding[:SECONDS]") != std::string::npos);
        CHECK(!std::filesystem::exists(tmp / "w.out"));
      }
    }
    RunResult jsonl = RunApart(Replay() + " export " + t + " -f jsonl --window 1:2", 60);
    CHECK(jsonl.exit_code == 2);
    CHECK(jsonl.error.find("--window is for --format perfetto or pftrace") != std::string::npos);
  }
}

}  // namespace
}  // namespace replay
