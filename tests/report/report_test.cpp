#include "replay/report.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <optional>
#include <png.h>
#include <regex>
#include <sstream>

#include "analysis/synthetic_job.h"
#include "support/checked_trace.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "trace/python_sites.h"

namespace replay {
namespace {

using testing::CheckedTrace;
using testing::SyntheticJob;
using testing::TempDir;

// 4 ranks on dup(WORLD): a broadcast, an allreduce, then rank 1 passes
// another count to the second allreduce (#3) and the others hang in it.
// Rank 3 runs with another NCCL_ALGO.
void WriteJob(const std::string& dir) {
  testing::WriteCountMismatch(dir, 1, /*bcast=*/true, [](int rank, RankHeader* h) {
    h->environment.push_back({"NCCL_ALGO", rank == 3 ? "Tree" : "Ring"});
  });
}

// The job, written into tmp/job and checked: its check leads with the count mismatch.
CheckedTrace WriteAndCheck(const TempDir& tmp) {
  WriteJob(tmp / "job");
  CheckedTrace c = testing::OpenAndCheck(tmp / "job");
  REQUIRE(!c.report.findings.empty());
  REQUIRE(c.report.findings[0].kind == FindingKind::kMismatch);
  return c;
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
  CheckedTrace c = WriteAndCheck(tmp);
  auto rendered = RenderMarkdownReport(*c.trace, c.report);
  REQUIRE(rendered.ok());
  const std::string md = *rendered;
  INFO(md);
  CHECK(md.rfind("### replay check: ", 0) == 0);
  CHECK(md.find("in `job` (4 ranks)") != std::string::npos);
  CHECK(md.find("1. **mismatch**: " + c.report.findings[0].title) != std::string::npos);
  CHECK(md.find("communicator: dup(WORLD) (ranks 0-3)") != std::string::npos);
  CHECK(md.find("| 1 | complete (finalize) |") != std::string::npos);
  CHECK(md.find("| `NCCL_ALGO` | `Ring` | 0-2 |") != std::string::npos);
  CHECK(md.find("| `NCCL_ALGO` | `Tree` | 3 |") != std::string::npos);
  CHECK(md.find("with Open MPI v4.1.4") != std::string::npos);
  // A small text timeline around the first finding: the mismatched allreduce in brackets on every rank.
  CHECK(md.find("Around finding 1, what each rank called") != std::string::npos);
  CHECK(md.find("rank 1   … Comm_dup WORLD #1 · Bcast #1 · Allreduce #2 · [Allreduce #3] · Finalize\n") != std::string::npos);
  CHECK(md.find("rank 0   … Comm_dup WORLD #1 · Bcast #1 · Allreduce #2 · [Allreduce #3, never returned]") != std::string::npos);
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
  CheckedTrace c = WriteAndCheck(tmp);
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

// Runs headless Chromium on `page`, in a window of `width` x `height`, and
// returns the DOM after its scripts ran, or nullopt when Chromium is not
// installed. With `screenshot`, writes what the window shows there instead.
std::optional<std::string> RenderInChromium(const std::string& page, const std::string& profile_dir, int width = 1280,
                                            int height = 800, const std::string& screenshot = "") {
  testing::RunResult which = testing::Run("command -v chromium", 10);
  if (which.exit_code != 0) return std::nullopt;
  const std::string what = screenshot.empty() ? " --dump-dom" : " --screenshot=" + screenshot;
  testing::RunResult r = testing::Run("chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" +
                                          profile_dir + " --window-size=" + std::to_string(width) + "," +
                                          std::to_string(height) + what + " file://" + page + " 2>/dev/null",
                                      90);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

TEST_CASE("the HTML report rendered in headless Chromium shows the findings and the failing collective", "[report]") {
  TempDir tmp;
  CheckedTrace c = WriteAndCheck(tmp);
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
  CHECK(text.find("Around finding 1 (in red): " + c.report.findings[0].title) != std::string::npos);
  // The failing collective is drawn highlighted, with its arrows.
  CHECK(std::regex_search(*dom, std::regex("class=\"op collective[^\"]* hl\"")));
  CHECK(dom->find("class=\"arrow hl\"") != std::string::npos);
}

// 4 ranks on dup(WORLD), 30 steps of a ring exchange (Irecv and Isend, then a
// Waitall, so operations overlap on each rank) and an allreduce; at step 31
// rank 3 enters a barrier on WORLD instead, while the others wait in the
// allreduce: two findings, far to the right of a long timeline.
void WriteLongJob(const std::string& dir) {
  SyntheticJob job(dir, 4);
  job.InitAll();
  std::vector<int32_t> all = {0, 1, 2, 3};
  std::vector<uint64_t> grad(4);
  for (int r = 0; r < 4; ++r) grad[static_cast<size_t>(r)] = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), 1, all);
  for (uint64_t step = 1; step <= 30; ++step) {
    std::vector<std::vector<uint64_t>> reqs(4);
    for (int r = 0; r < 4; ++r) {
      reqs[static_cast<size_t>(r)].push_back(job.Irecv(r, (r + 3) % 4, 7, step));
      reqs[static_cast<size_t>(r)].push_back(job.Isend(r, (r + 1) % 4, 7, step));
    }
    for (int r = 0; r < 4; ++r) job.Wait(r, reqs[static_cast<size_t>(r)], 2);
    for (int r = 0; r < 4; ++r) job.Allreduce(r, grad[static_cast<size_t>(r)], step);
  }
  // Rank 0 is a Python program: its last call says where in it it was made.
  PythonSite site{1, 0, {{"step", "train.py", 42}, {"main", "train.py", 80}}};
  job.Append(0, Event::MakeInfo(std::string(kPythonSiteKey), EncodePythonSite(site)));
  for (int r = 0; r < 3; ++r) job.Allreduce(r, grad[static_cast<size_t>(r)], 31, 1024, false, r == 0 ? kPythonSiteTag | 1 : 0);
  job.Collective(3, testing::kMpiBarrier, OpKind::kBarrier, SyntheticJob::World(), 2, 0, 0, 0, false);
  for (int r = 0; r < 4; ++r) job.Die(r, SIGTERM);
}

// Measures the page as Chromium lays it out, from a script appended to it: how
// many of the first finding's operations are in view, whether rank labels
// are, how many labels overlap, and, after a click on the second finding, how
// many of its operations are in view. The results go into attributes of <body>.
constexpr const char* kMeasure = R"JS(<script>
(function(){
  var b = document.body, vw = window.innerWidth, vh = window.innerHeight;
  var sc = document.getElementById('tl-scroll');
  var lab = document.querySelector('.tl-labels').getBoundingClientRect();
  function view(){ var s = sc.getBoundingClientRect();
    return {left: Math.max(0, lab.right), right: Math.min(vw, s.right), top: Math.max(0, s.top), bottom: Math.min(vh, s.bottom)}; }
  function inView(e, v){ var r = e.getBoundingClientRect();
    return r.width > 0 && r.left >= v.left - 0.5 && r.right <= v.right + 0.5 && r.top >= v.top - 0.5 && r.bottom <= v.bottom + 0.5; }
  function list(q){ return Array.prototype.slice.call(document.querySelectorAll(q)); }
  var v = view();
  var hl = list('#timeline rect.op.hl').filter(function(e){ return inView(e, v); });
  b.setAttribute('data-hl-visible', String(hl.length));
  if (hl.length) { var r = hl[0].getBoundingClientRect();
    b.setAttribute('data-hl-rect', [r.left, r.top, r.width, r.height].map(Math.round).join(',')); }
  b.setAttribute('data-scroll-left', String(sc.scrollLeft));
  var s = sc.getBoundingClientRect();
  b.setAttribute('data-labels-visible', String(list('.tl-labels text.rowlabel').filter(function(e){
    var r = e.getBoundingClientRect(); return r.left >= s.left && r.right <= s.right && r.top >= s.top && r.bottom <= s.bottom; }).length));
  function meets(a, c){ return a.left < c.right - 0.5 && c.left < a.right - 0.5 && a.top < c.bottom - 0.5 && c.top < a.bottom - 0.5; }
  var texts = list('.tl-ops text').filter(function(e){ return e.getAttribute('display') !== 'none'; })
      .map(function(e){ return e.getBoundingClientRect(); });
  var overlaps = 0;
  for (var i = 0; i < texts.length; ++i) for (var j = i + 1; j < texts.length; ++j) if (meets(texts[i], texts[j])) ++overlaps;
  b.setAttribute('data-labels', String(texts.length));
  b.setAttribute('data-label-overlaps', String(overlaps));
  var spill = 0;
  list('.tl-ops text.oplabel').forEach(function(t){
    if (t.getAttribute('display') === 'none') return;
    var box = t.previousElementSibling.getBoundingClientRect(), r = t.getBoundingClientRect();
    if (r.left < box.left - 0.5 || r.right > box.right + 0.5) ++spill; });
  b.setAttribute('data-label-spill', String(spill));
  var boxes = list('.tl-ops rect.op').map(function(e){ return e.getBoundingClientRect(); });
  var box_overlaps = 0;
  for (var i = 0; i < boxes.length; ++i) for (var j = i + 1; j < boxes.length; ++j) if (meets(boxes[i], boxes[j])) ++box_overlaps;
  b.setAttribute('data-box-overlaps', String(box_overlaps));
  var li = document.querySelector('.finding[data-f="2"]');
  if (li) { li.querySelector('a.show').click(); v = view();
    b.setAttribute('data-f2-visible', String(list('#timeline [data-f~="2"]').filter(function(e){ return inView(e, v); }).length));
    b.setAttribute('data-f2-selected', String(list('#timeline .sel').length)); }
})();
</script>)JS";

long Attribute(const std::string& dom, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(dom, m, std::regex(name + "=\"(-?[0-9.]+)\""))) return -1;
  return std::lround(std::stod(m[1]));
}

struct Pixels {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;
};

Pixels ReadPng(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&image, path.c_str()) != 0);
  image.format = PNG_FORMAT_RGBA;
  Pixels p;
  p.width = static_cast<int>(image.width);
  p.height = static_cast<int>(image.height);
  p.rgba.resize(PNG_IMAGE_SIZE(image));
  REQUIRE(png_image_finish_read(&image, nullptr, p.rgba.data(), 0, nullptr) != 0);
  return p;
}

TEST_CASE("the HTML report opens on the failing operation: in view without scrolling, labels in place, findings link to their operations", "[report]") {
  TempDir tmp;
  WriteLongJob(tmp / "job");
  auto [trace, report] = testing::OpenAndCheck(tmp / "job");
  REQUIRE(report.findings.size() >= 2);
  CHECK(report.findings[0].kind == FindingKind::kMissingRanks);
  CHECK(report.findings[0].seq == 31);
  auto html = RenderHtmlReport(*trace, report);
  REQUIRE(html.ok());
  // The timeline is wider than the window: the failing allreduce is far to the right.
  std::smatch m;
  REQUIRE(std::regex_search(*html, m, std::regex("data-focus-x=\"([0-9.]+)\"")));
  CHECK(std::stod(m[1]) > 1400);
  // Each operation's details say where it was called from.
  CHECK(html->find("called from step (train.py:42) &lt; main (train.py:80)") != std::string::npos);
  testing::WriteFile(tmp / "report.html", *html);
  std::string measured = *html;
  measured.insert(measured.rfind("</body>"), kMeasure);
  testing::WriteFile(tmp / "measure.html", measured);
  auto dom = RenderInChromium(tmp / "measure.html", tmp / "profile");
  if (!dom) {
    WARN("SKIPPED: chromium is not installed (apt-get install chromium), so the page was not rendered");
    return;
  }
  INFO(Text(dom->substr(dom.value().find("<body"), 600)));
  // In a 1280 x 800 window, without scrolling the page: the timeline has
  // scrolled to the failing allreduce, whose boxes are in view beside the rank
  // labels, and every rank label is in view.
  CHECK(Attribute(*dom, "data-scroll-left") > 0);
  CHECK(Attribute(*dom, "data-hl-visible") >= 3);
  CHECK(Attribute(*dom, "data-labels-visible") == 4);
  // No two labels overlap, no label runs out of its box, and no two boxes overlap.
  CHECK(Attribute(*dom, "data-labels") > 10);
  CHECK(Attribute(*dom, "data-label-overlaps") == 0);
  CHECK(Attribute(*dom, "data-label-spill") == 0);
  CHECK(Attribute(*dom, "data-box-overlaps") == 0);
  // The second finding's link marks its operations and brings them into view.
  CHECK(Attribute(*dom, "data-f2-selected") >= 1);
  CHECK(Attribute(*dom, "data-f2-visible") >= 1);

  // The screenshot shows it: where the page says the first red box is, the
  // pixels are the red of the failing operation.
  REQUIRE(std::regex_search(*dom, m, std::regex("data-hl-rect=\"([0-9]+),([0-9]+),([0-9]+),([0-9]+)\"")));
  const int x = std::stoi(m[1]), y = std::stoi(m[2]), w = std::stoi(m[3]), h = std::stoi(m[4]);
  REQUIRE(RenderInChromium(tmp / "report.html", tmp / "profile", 1280, 800, tmp / "shot.png"));
  Pixels shot = ReadPng(tmp / "shot.png");
  REQUIRE(shot.width == 1280);
  REQUIRE(shot.height == 800);
  size_t red = 0, all = 0;
  for (int py = y + 2; py < y + h - 2 && py < shot.height; ++py) {
    for (int px = x + 2; px < x + w - 2 && px < shot.width; ++px) {
      const uint8_t* p = &shot.rgba[(static_cast<size_t>(py) * static_cast<size_t>(shot.width) + static_cast<size_t>(px)) * 4];
      ++all;
      if (std::abs(p[0] - 0xc6) < 24 && std::abs(p[1] - 0x28) < 24 && std::abs(p[2] - 0x28) < 24) ++red;
    }
  }
  INFO("box at " << x << "," << y << " " << w << "x" << h << ": " << red << " of " << all << " pixels red");
  CHECK(all > 20);
  CHECK(red * 2 > all);
}

TEST_CASE("the Markdown report of a hang marks where each rank is and which ranks never came", "[report]") {
  TempDir tmp;
  WriteLongJob(tmp / "job");
  auto [trace, report] = testing::OpenAndCheck(tmp / "job");
  auto md = RenderMarkdownReport(*trace, report);
  REQUIRE(md.ok());
  INFO(*md);
  CHECK(md->find("rank 0   … Isend to 1 · Waitall · Allreduce #30 · [Allreduce #31, never returned]\n") != std::string::npos);
  CHECK(md->find("rank 3   … Irecv from 2 · Isend to 0 · Waitall · Allreduce #30 · (missing from #31) · Barrier WORLD #2, never returned\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace replay
