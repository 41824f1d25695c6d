#include "replay/report.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <optional>
#include <regex>
#include <sstream>

#include "analysis/synthetic_job.h"
#include "support/run.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::SyntheticJob;
using testing::TempDir;

// 4 ranks on dup(WORLD): a broadcast, an allreduce, then rank 1 passes
// another count to the second allreduce (#3) and the others hang in it.
// Rank 3 runs with another NCCL_ALGO.
void WriteJob(const std::string& dir) {
  SyntheticJob job(dir, 4, [](int rank, RankHeader* h) {
    h->environment.push_back({"NCCL_ALGO", rank == 3 ? "Tree" : "Ring"});
  });
  job.InitAll();
  std::vector<int32_t> all = {0, 1, 2, 3};
  for (int r = 0; r < 4; ++r) {
    uint64_t grad = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), 1, all);
    job.Collective(r, testing::kMpiBcast, OpKind::kBcast, grad, 1, 16, r == 0 ? 0xb0 : 0, r == 0 ? 0 : 0xb0, true, 0, 0, 0);
    job.Allreduce(r, grad, 2, 2048);
    job.Allreduce(r, grad, 3, r == 1 ? 1024 : 2048, r == 1);
    if (r == 1) {
      job.Finalize(r);
    } else {
      job.Die(r, SIGTERM);
    }
  }
}

struct Checked {
  std::unique_ptr<TraceReader> trace;
  CheckReport report;
};

Checked Check(const std::string& dir) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  CheckOptions o;
  o.min_wait_ns = 0;
  auto report = CheckTrace(**trace, o);
  REQUIRE(report.ok());
  REQUIRE(!report->findings.empty());
  REQUIRE(report->findings[0].kind == FindingKind::kMismatch);
  return {std::move(trace).value(), std::move(report).value()};
}

// The text of an HTML fragment as a browser shows it: tags out, entities decoded.
std::string Text(const std::string& html) {
  std::string s = std::regex_replace(html, std::regex("<[^>]*>"), "");
  for (auto [from, to] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) s.replace(at, std::strlen(from), to);
  }
  return s;
}

TEST_CASE("the Markdown report holds the findings, the rank states and the configuration that differs", "[report]") {
  TempDir tmp;
  WriteJob(tmp / "job");
  Checked c = Check(tmp / "job");
  const std::string md = RenderMarkdownReport(*c.trace, c.report);
  INFO(md);
  CHECK(md.rfind("### replay check: ", 0) == 0);
  CHECK(md.find("in `job` (4 ranks)") != std::string::npos);
  CHECK(md.find("1. **mismatch**: " + c.report.findings[0].title) != std::string::npos);
  CHECK(md.find("communicator: dup(WORLD) (ranks 0-3)") != std::string::npos);
  CHECK(md.find("| 1 | complete (finalize) |") != std::string::npos);
  CHECK(md.find("| `NCCL_ALGO` | `Ring` | 0-2 |") != std::string::npos);
  CHECK(md.find("| `NCCL_ALGO` | `Tree` | 3 |") != std::string::npos);
  // Nothing in it breaks a Markdown table: every table row has the columns of its header.
  std::istringstream lines(md);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| ", 0) != 0) continue;
    std::string unescaped = std::regex_replace(line, std::regex("\\\\\\|"), "");
    size_t bars = static_cast<size_t>(std::count(unescaped.begin(), unescaped.end(), '|'));
    CHECK(bars == 4);
  }
}

TEST_CASE("the HTML report is one page that loads nothing from the network", "[report]") {
  TempDir tmp;
  WriteJob(tmp / "job");
  Checked c = Check(tmp / "job");
  auto html = RenderHtmlReport(*c.trace, c.report);
  REQUIRE(html.ok());
  CHECK(html->rfind("<!DOCTYPE html>", 0) == 0);
  for (const char* external : {"src=\"http", "href=\"http", "src=\"//", "@import", "url(http"}) {
    INFO(external);
    CHECK(html->find(external) == std::string::npos);
  }
  CHECK(html->find("default-src 'none'") != std::string::npos);
  const std::string text = Text(*html);
  CHECK(text.find(c.report.findings[0].title) != std::string::npos);
  // The collective of the first finding is highlighted on every rank (all four entered it).
  std::regex hl("<rect class=\"op collective[^\"]* hl\"[^>]*data-key=\"[0-9a-fx]+:3\"");
  auto n = std::distance(std::sregex_iterator(html->begin(), html->end(), hl), std::sregex_iterator());
  CHECK(n == 4);
  CHECK(html->find("class=\"arrow hl\"") != std::string::npos);
}

// Runs headless Chromium on `page` and returns the DOM after its script ran,
// or nullopt when Chromium is not installed.
std::optional<std::string> RenderInChromium(const std::string& page, const std::string& profile_dir) {
  testing::RunResult which = testing::Run("command -v chromium", 10);
  if (which.exit_code != 0) return std::nullopt;
  testing::RunResult r = testing::Run("chromium --headless --no-sandbox --disable-gpu --user-data-dir=" + profile_dir +
                                          " --dump-dom file://" + page + " 2>/dev/null",
                                      90);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

TEST_CASE("the HTML report rendered in headless Chromium shows the findings and the failing collective", "[report]") {
  TempDir tmp;
  WriteJob(tmp / "job");
  Checked c = Check(tmp / "job");
  auto html = RenderHtmlReport(*c.trace, c.report);
  REQUIRE(html.ok());
  testing::WriteFile(tmp / "report.html", *html);
  auto dom = RenderInChromium(tmp / "report.html", tmp / "profile");
  if (!dom) {
    WARN("SKIPPED: chromium is not installed (apt-get install chromium), so the page was not rendered");
    return;
  }
  INFO(dom->substr(0, 4000));
  // The page's script ran: it counts what it shows into attributes of <body>.
  std::smatch m;
  REQUIRE(std::regex_search(*dom, m, std::regex("data-findings=\"([0-9]+)\"")));
  CHECK(std::stoul(m[1]) == c.report.findings.size());
  REQUIRE(std::regex_search(*dom, m, std::regex("data-ops=\"([0-9]+)\"")));
  CHECK(std::stoul(m[1]) > 10);
  const std::string text = Text(*dom);
  CHECK(text.find("replay report: job") != std::string::npos);
  CHECK(text.find(c.report.findings[0].title) != std::string::npos);
  CHECK(text.find("Around MPI_Allreduce on dup(WORLD) #3") != std::string::npos);
  // The failing collective is drawn highlighted, with its arrows.
  CHECK(std::regex_search(*dom, std::regex("class=\"op collective[^\"]* hl\"")));
  CHECK(dom->find("class=\"arrow hl\"") != std::string::npos);
}

}  // namespace
}  // namespace replay
