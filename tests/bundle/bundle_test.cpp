#include "replay/bundle.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <set>
#include <sstream>

#include "analysis/check_json.h"
#include "analysis/synthetic_job.h"
#include "bundle/secret_corpus.h"
#include "replay/check.h"
#include "replay/flight_recorder.h"
#include "replay/jsonl.h"
#include "replay/perfetto.h"
#include "replay/report.h"
#include "support/checked_trace.h"
#include "support/live_writer.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::SyntheticJob;
using testing::TempDir;

// Planted in the recorded environment and command line of every rank.
constexpr const char* kHfToken = "hf_QpZrT8wXy2LmN4vB6cD8eF0gH2jK4lM6nP";
constexpr const char* kAwsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr const char* kUrlPassword = "hunter2correcthorse";
constexpr const char* kApiKey = "k3y-from-the-command-line-77";

void PlantSecrets(int rank, RankHeader* h) {
  h->environment.push_back({"HF_TOKEN", kHfToken});
  h->environment.push_back({"AWS_SECRET_ACCESS_KEY", kAwsSecret});
  h->environment.push_back({"MLFLOW_TRACKING_URI", std::string("https://alice:") + kUrlPassword + "@mlflow.example.com/x"});
  h->environment.push_back({"TOKENIZERS_PARALLELISM", "false"});
  h->environment.push_back({"NCCL_SSL_KEY_FILE", "/etc/ssl/nccl.key"});
  h->command_line = {"./train", "--api-key", kApiKey, "--lr=0.1", "--rank-hint=" + std::to_string(rank)};
}

// A 4-rank job in which rank 2 passes a different count to the gradient
// allreduce, and the others hang in it.
void WriteMismatchJob(const std::string& dir, std::function<void(int, RankHeader*)> hook = nullptr) {
  testing::WriteCountMismatch(dir, 2, /*bcast=*/false, std::move(hook));
}

nlohmann::json CheckJson(const std::string& dir) {
  nlohmann::json j = CheckReportToJson(testing::CheckDir(dir));
  j.erase("trace");
  return j;
}

// Everything a reader of the bundle could see: its bytes, the bytes of every
// file it unpacks to, and what the unpacked headers and manifest decode to.
std::string EverythingIn(const std::string& bundle, const std::string& unpack_dir) {
  std::string all = testing::ReadFile(bundle);
  auto unpacked = UnpackBundle(bundle, unpack_dir);
  REQUIRE(unpacked.ok());
  for (const std::string& f : unpacked->files) all += testing::ReadFile(unpack_dir + "/" + f);
  all += unpacked->header;
  auto trace = TraceReader::Open(unpack_dir);
  REQUIRE(trace.ok());
  if ((*trace)->manifest()) {
    for (const std::string& a : (*trace)->manifest()->command) all += a + "\n";
  }
  for (const RankEntry& e : (*trace)->ranks()) {
    for (const auto& [k, v] : e.header.environment) all += k + "=" + v + "\n";
    for (const std::string& a : e.header.command_line) all += a + "\n";
  }
  return all;
}

TEST_CASE("a bundle unpacks to the same trace, and its header holds the same check result", "[bundle]") {
  TempDir tmp;
  WriteMismatchJob(tmp / "job");
  BundleOptions o;
  o.check = true;
  auto summary = WriteBundle(tmp / "job", tmp / "job.rpb", o);
  REQUIRE(summary.ok());
  CHECK(summary->ranks == 4);
  CHECK(summary->bytes == std::filesystem::file_size(tmp / "job.rpb"));
  CHECK(summary->findings > 0);
  CHECK(IsBundleFile(tmp / "job.rpb"));

  auto header_text = ReadBundleHeader(tmp / "job.rpb");
  REQUIRE(header_text.ok());
  nlohmann::json header = nlohmann::json::parse(*header_text);
  CHECK(header["format"] == "replay-bundle");
  CHECK(header["bundle_version"] == kBundleVersion);
  CHECK(header["trace"] == "job");
  CHECK(header["ranks_included"] == nlohmann::json::array({0, 1, 2, 3}));
  CHECK(header["topology"]["hosts"][0]["host"] == "node0");
  CHECK(header["check"]["findings"][0]["kind"] == "mismatch");

  auto unpacked = UnpackBundle(tmp / "job.rpb", tmp / "out");
  REQUIRE(unpacked.ok());
  CHECK(unpacked->header == *header_text);
  auto a = TraceReader::Open(tmp / "job");
  auto b = TraceReader::Open(tmp / "out");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE((*a)->ranks().size() == (*b)->ranks().size());
  for (size_t i = 0; i < (*a)->ranks().size(); ++i) {
    auto ra = (*a)->OpenRank(i);
    auto rb = (*b)->OpenRank(i);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    CHECK((*ra)->rank() == (*rb)->rank());
    CHECK((*ra)->events().size() == (*rb)->events().size());
    CHECK((*ra)->status() == (*rb)->status());
  }
  CHECK(CheckJson(tmp / "job") == CheckJson(tmp / "out"));
}

TEST_CASE("a bundle of a running rank holds every event appended before it, once and in order", "[bundle]") {
  // The writer seals blocks (moving events from the ring to the events
  // stream) and rewrites its open block while the bundle is made.
  TempDir tmp;
  testing::LiveWriter live(tmp / "job");
  REQUIRE(live.ok());
  BundleOptions bo;
  bo.check = false;
  bo.zstd_level = 1;
  int bundles = 0;
  // Bundles for two seconds while the writer appends (at least three: under a
  // sanitizer one bundle of the grown rank takes seconds).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((std::chrono::steady_clock::now() < deadline && bundles < 50) || bundles < 3) {
    uint64_t before = live.appended();
    std::string out = tmp / ("b" + std::to_string(bundles));
    REQUIRE(WriteBundle(tmp / "job", out + ".rpb", bo).ok());
    ++bundles;
    REQUIRE(UnpackBundle(out + ".rpb", out).ok());
    auto r = RankReader::Open(out + "/rank-00000");
    REQUIRE(r.ok());
    INFO("bundle " << bundles << ": " << (*r)->events().size() << " events, " << before << " appended before it");
    testing::RequireAllPublished(**r, before);
    std::filesystem::remove_all(out);
    std::filesystem::remove(out + ".rpb");
  }
  live.Stop();
  REQUIRE(live.writer().Close(CloseReason::kFinalize).ok());
}

TEST_CASE("secrets in the environment and command line are in no byte of the bundle, and are listed", "[bundle]") {
  TempDir tmp;
  WriteMismatchJob(tmp / "job", PlantSecrets);
  auto summary = WriteBundle(tmp / "job", tmp / "job.rpb");
  REQUIRE(summary.ok());
  const std::string all = EverythingIn(tmp / "job.rpb", tmp / "out");
  for (const char* secret : {kHfToken, kAwsSecret, kUrlPassword, kApiKey}) {
    INFO(secret);
    CHECK(all.find(secret) == std::string::npos);
  }
  // What is not a secret stays, and the rest of a URL with a password too.
  CHECK(all.find("TOKENIZERS_PARALLELISM=false") != std::string::npos);
  CHECK(all.find("NCCL_SSL_KEY_FILE=/etc/ssl/nccl.key") != std::string::npos);
  CHECK(all.find("@mlflow.example.com/x") != std::string::npos);
  CHECK(all.find("--lr=0.1") != std::string::npos);

  // Four distinct secrets, equal on every rank: four placeholders.
  CHECK(summary->redacted == 4);
  const nlohmann::json redaction = nlohmann::json::parse(summary->header)["redaction"];
  CHECK(redaction["enabled"] == true);
  CHECK(redaction["secrets"] == 4);
  std::set<std::string> names;
  for (const auto& item : redaction["items"]) {
    names.insert(item["name"].get<std::string>());
    if (item["where"] == "environment") CHECK(item["ranks"] == nlohmann::json::array({0, 1, 2, 3}));
  }
  CHECK(names == std::set<std::string>{"HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_URI", "--api-key"});

  // Equal secrets stay equal, so the configuration check sees no difference.
  const nlohmann::json header = nlohmann::json::parse(summary->header);
  for (const auto& f : header["check"]["findings"]) CHECK(f["kind"] != "config");
}

// Every command line of the secret corpus, one after the other.
std::vector<std::string> CorpusCommand() {
  std::vector<std::string> argv;
  for (const bundle::SecretForm& f : bundle::SecretCorpus()) {
    if (f.variable.empty()) argv.insert(argv.end(), f.argv.begin(), f.argv.end());
  }
  return argv;
}

// The corpus planted in every rank's command line and environment; rank 3 has
// another GITHUB_TOKEN, so that the configuration check shows the setting.
void PlantCorpus(int rank, RankHeader* h) {
  h->command_line = CorpusCommand();
  for (const bundle::SecretForm& f : bundle::SecretCorpus()) {
    if (!f.variable.empty()) h->environment.push_back({f.variable, f.argv[0]});
  }
  if (rank == 3) h->environment.push_back({"GITHUB_TOKEN", "S99-differs-on-rank-3"});
}

bool OwnerOnly(const std::filesystem::path& p) {
  using std::filesystem::perms;
  return (std::filesystem::status(p).permissions() & (perms::group_all | perms::others_all)) == perms::none;
}

TEST_CASE("no secret of the corpus survives in a bundle, a report or an export, and what they write is private",
          "[bundle]") {
  TempDir tmp;
  // The manifest holds the launcher's command line, planted too.
  auto manifest = [](JobManifest* m) { m->command = CorpusCommand(); };
  {
    SyntheticJob job(tmp / "job", 4, PlantCorpus, manifest);
    job.InitAll();
    for (int r = 0; r < 4; ++r) job.Finalize(r);
  }
  std::vector<std::string> secrets;
  for (const bundle::SecretForm& f : bundle::SecretCorpus()) secrets.push_back(f.secret);
  secrets.push_back("S99-differs-on-rank-3");
  auto none_in = [&](const std::string& what, const std::string& text) {
    for (const std::string& secret : secrets) {
      INFO(what << ": " << secret);
      CHECK(text.find(secret) == std::string::npos);
    }
  };

  auto summary = WriteBundle(tmp / "job", tmp / "job.rpb");
  REQUIRE(summary.ok());
  none_in("bundle", EverythingIn(tmp / "job.rpb", tmp / "out"));
  CHECK(OwnerOnly(tmp / "job.rpb"));
  CHECK(OwnerOnly(tmp / "out"));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp / "out")) {
    INFO(entry.path());
    CHECK(OwnerOnly(entry.path()));
  }
  // The header names what was redacted, never a value.
  const nlohmann::json redaction = nlohmann::json::parse(summary->header)["redaction"];
  CHECK(redaction["secrets"].get<size_t>() >= bundle::SecretCorpus().size());

  auto trace = TraceReader::Open(tmp / "job");
  REQUIRE(trace.ok());
  CheckOptions co;
  co.redact = true;
  auto report = CheckTrace(**trace, co);
  REQUIRE(report.ok());
  const std::string check_json = CheckReportJson(*report);
  none_in("check --json with redaction", check_json);
  // The setting that differs is still named, its values as placeholders.
  CHECK(check_json.find("GITHUB_TOKEN") != std::string::npos);
  CHECK(check_json.find("[REDACTED:") != std::string::npos);

  ReportOptions ro;
  auto html = RenderHtmlReport(**trace, *report, ro);
  REQUIRE(html.ok());
  none_in("HTML report", *html);
  CHECK(html->find("GITHUB_TOKEN") != std::string::npos);
  auto rendered_md = RenderMarkdownReport(**trace, *report, ro);
  REQUIRE(rendered_md.ok());
  const std::string md = *rendered_md;
  none_in("Markdown report", md);
  CHECK(md.find("Command: `") != std::string::npos);

  std::ostringstream jsonl;
  REQUIRE(WriteJsonLines(**trace, jsonl).ok());
  none_in("JSON Lines export", jsonl.str());
  std::ostringstream perfetto;
  REQUIRE(WritePerfetto(**trace, perfetto).ok());
  none_in("Perfetto export", perfetto.str());
  FlightRecorderExportOptions fo;
  fo.json = true;
  auto dumps = ExportFlightRecorder(**trace, tmp / "fr", fo);
  REQUIRE(dumps.ok());
  CHECK(OwnerOnly(tmp / "fr"));
  for (const std::string& d : *dumps) {
    none_in("Flight Recorder export", testing::ReadFile(d));
    CHECK(OwnerOnly(d));
  }

  // Asked not to redact, the report shows what was recorded.
  ro.redact = false;
  auto unredacted = RenderMarkdownReport(**trace, *report, ro);
  REQUIRE(unredacted.ok());
  CHECK(unredacted->find("S01-pw-space") != std::string::npos);
}

TEST_CASE("a bundle made with --no-redact keeps the secrets, readable by its owner only", "[bundle]") {
  TempDir tmp;
  WriteMismatchJob(tmp / "job", PlantSecrets);
  BundleOptions o;
  o.redact = false;
  auto summary = WriteBundle(tmp / "job", tmp / "job.rpb", o);
  REQUIRE(summary.ok());
  CHECK(summary->redacted == 0);
  CHECK(nlohmann::json::parse(summary->header)["redaction"]["enabled"] == false);
  const std::string all = EverythingIn(tmp / "job.rpb", tmp / "out");
  CHECK(all.find(kHfToken) != std::string::npos);
  CHECK(all.find(kApiKey) != std::string::npos);
  // Kept secrets make the file private to its owner.
  CHECK((std::filesystem::status(tmp / "job.rpb").permissions() & std::filesystem::perms::others_read) ==
        std::filesystem::perms::none);
}

TEST_CASE("a bundle of some ranks holds only those", "[bundle]") {
  TempDir tmp;
  WriteMismatchJob(tmp / "job");
  BundleOptions o;
  o.ranks = {1, 3};
  auto summary = WriteBundle(tmp / "job", tmp / "some.rpb", o);
  REQUIRE(summary.ok());
  CHECK(summary->ranks == 2);
  CHECK(nlohmann::json::parse(summary->header)["ranks_included"] == nlohmann::json::array({1, 3}));
  auto unpacked = UnpackBundle(tmp / "some.rpb", tmp / "out");
  REQUIRE(unpacked.ok());
  auto t = TraceReader::Open(tmp / "out");
  REQUIRE(t.ok());
  REQUIRE((*t)->ranks().size() == 2);
  CHECK((*t)->ranks()[0].rank == 1);
  CHECK((*t)->ranks()[1].rank == 3);

  o.ranks = {7};
  auto bad = WriteBundle(tmp / "job", tmp / "bad.rpb", o);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("rank 7 is not in") != std::string::npos);
  CHECK(!std::filesystem::exists(tmp / "bad.rpb"));
}

TEST_CASE("a truncated, damaged or foreign bundle is an error that says so and leaves nothing behind", "[bundle]") {
  TempDir tmp;
  WriteMismatchJob(tmp / "job");
  REQUIRE(WriteBundle(tmp / "job", tmp / "job.rpb").ok());
  const std::string bytes = testing::ReadFile(tmp / "job.rpb");
  REQUIRE(bytes.size() > 200);

  SECTION("cut anywhere") {
    for (size_t cut : {size_t{0}, size_t{7}, size_t{20}, size_t{40}, bytes.size() / 3, bytes.size() / 2,
                       bytes.size() - 40, bytes.size() - 1}) {
      DYNAMIC_SECTION("at byte " << cut) {
        testing::WriteFile(tmp / "cut.rpb", bytes.substr(0, cut));
        auto r = UnpackBundle(tmp / "cut.rpb", tmp / "out");
        REQUIRE(!r.ok());
        INFO(r.status().message());
        const std::string& m = r.status().message();
        CHECK((m.find("cut short") != std::string::npos || m.find("not a replay bundle") != std::string::npos ||
               m.find("damaged") != std::string::npos));
        CHECK(!std::filesystem::exists(tmp / "out"));
      }
    }
  }
  SECTION("a byte flipped in the header or in a file") {
    for (size_t at : {size_t{40}, bytes.size() / 2, bytes.size() - 20}) {
      DYNAMIC_SECTION("at byte " << at) {
        std::string damaged = bytes;
        damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
        testing::WriteFile(tmp / "bad.rpb", damaged);
        auto r = UnpackBundle(tmp / "bad.rpb", tmp / "out");
        REQUIRE(!r.ok());
        INFO(r.status().message());
        CHECK(r.status().code() == Status::Code::kCorruption);
        CHECK(!std::filesystem::exists(tmp / "out"));
      }
    }
  }
  SECTION("not a bundle") {
    testing::WriteFile(tmp / "notes.txt", "these are not the bytes you are looking for\n");
    CHECK(!IsBundleFile(tmp / "notes.txt"));
    auto r = ReadBundleHeader(tmp / "notes.txt");
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Status::Code::kNotATrace);
    CHECK(r.status().message().find("is not a replay bundle") != std::string::npos);
    CHECK(!UnpackBundle(tmp / "missing.rpb", tmp / "out").ok());
  }
  SECTION("into a directory that is not empty") {
    std::filesystem::create_directories(tmp / "full/keep");
    auto r = UnpackBundle(tmp / "job.rpb", tmp / "full");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("not empty") != std::string::npos);
    CHECK(std::filesystem::exists(tmp / "full/keep"));
  }
}

}  // namespace
}  // namespace replay
