// The HTML and Markdown reports; see replay/report.h.
#include "replay/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include "analysis/call_site.h"
#include "analysis/rank_set.h"
#include "bundle/redact.h"
#include "interop/timeline.h"
#include "replay/event_format.h"
#include "replay/version.h"
#include "util/clock.h"
#include "util/json.h"

namespace replay {
namespace {

using interop::RankTimeline;
using interop::Timeline;
using interop::TimelineOp;

std::string Esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string Key(uint64_t comm, uint64_t seq) { return Hex(comm) + ":" + std::to_string(seq); }

std::string Utc(int64_t realtime_ns) { return FormatUtc(realtime_ns, "%Y-%m-%d %H:%M:%S UTC"); }

std::string RanksText(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return analysis::FormatRanks(ranks);
}

// The recorded command as the page shows it: secrets redacted unless asked
// otherwise, and cut at 300 characters.
std::string ShownCommand(const JobManifest& m, const ReportOptions& options) {
  std::string cmd = CommandText(options.redact ? bundle::RedactedCommand(m.command) : m.command);
  return cmd.size() > 300 ? cmd.substr(0, 300) + " …" : cmd;
}

std::string TraceName(const TraceReader& trace, const ReportOptions& options) {
  if (!options.title.empty()) return options.title;
  std::string d = trace.dir();
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  size_t slash = d.rfind('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

// The versions of what the job ran with, as its first readable rank recorded
// them: "Open MPI v4.1.4 · NCCL 2.28.9 · replay 0.9.0".
std::string VersionsText(const TraceReader& trace) {
  for (const RankEntry& e : trace.ranks()) {
    if (!e.header_ok) continue;
    std::string text;
    for (const auto& [key, value] : e.header.versions) {
      if (key == "trace_epoch" || value.empty()) continue;
      std::string item = key == "mpi" ? value : key == "nccl" ? "NCCL " + value : key + " " + value;
      text += (text.empty() ? "" : " · ") + item;
    }
    return text;
  }
  return "";
}

// Short text for an operation in a box: "Allreduce #3".
std::string ShortName(const Timeline& tl, const TimelineOp& o) {
  std::string s = tl.apis[o.api];
  for (const char* prefix : {"MPI_", "nccl"}) {
    if (s.rfind(prefix, 0) == 0) s = s.substr(std::string(prefix).size());
  }
  if (!s.empty() && s[0] == ':') s = s.substr(1);
  if (o.collective()) s += " #" + std::to_string(o.seq);
  return s;
}

std::string OpTooltip(const Timeline& tl, const RankTimeline& r, const TimelineOp& o, const std::string& site) {
  std::string s = "rank " + std::to_string(r.rank) + ": " + tl.apis[o.api];
  if (o.comm != 0) s += " on " + tl.CommName(o.comm);
  if (o.collective()) s += " #" + std::to_string(o.seq);
  if (o.point_to_point() && o.peer >= 0) s += (o.is_send ? " to rank " : " from rank ") + std::to_string(o.peer);
  if (o.count != 0) s += "\ncount " + std::to_string(o.count) + " " + std::string(DataTypeName(o.dtype));
  if (o.bytes != 0) s += " (" + HumanBytes(o.bytes) + ")";
  if (o.end_ns >= 0) {
    s += "\ncompleted after " + HumanDuration(o.end_ns - o.start_ns);
  } else {
    s += std::string("\n") + (o.return_ns < 0 ? "never returned" : "never completed") + " (" +
         HumanDuration(r.end_ns - o.start_ns) + " until the trace ends)";
  }
  if (o.rc != 0) s += "\nreturn code " + std::to_string(o.rc);
  if (!site.empty()) s += "\ncalled from " + site;
  s += "\nevent #" + std::to_string(o.index) + ", thread " + std::to_string(o.thread);
  return s;
}

// A time axis with long gaps shortened: every start and end of a shown
// operation is a breakpoint, and the space between two grows with the log of
// the time between them, so microsecond calls and minute-long hangs both show.
class Axis {
 public:
  void Add(int64_t t) { points_.push_back(t); }
  void Finish(double max_width) {
    std::sort(points_.begin(), points_.end());
    points_.erase(std::unique(points_.begin(), points_.end()), points_.end());
    x_.assign(points_.size(), 0);
    for (size_t i = 1; i < points_.size(); ++i) {
      double dt_us = static_cast<double>(points_[i] - points_[i - 1]) / 1000.0;
      x_[i] = x_[i - 1] + std::min(80.0, 5.0 + 9.0 * std::log10(1.0 + dt_us));
    }
    double w = x_.empty() ? 0 : x_.back();
    scale_ = w > max_width ? max_width / w : 1.0;
  }
  double X(int64_t t) const {
    if (points_.empty()) return 0;
    auto it = std::lower_bound(points_.begin(), points_.end(), t);
    if (it == points_.end()) return x_.back() * scale_;
    size_t i = static_cast<size_t>(it - points_.begin());
    if (*it == t || i == 0) return x_[i] * scale_;
    double f = static_cast<double>(t - points_[i - 1]) / static_cast<double>(points_[i] - points_[i - 1]);
    return (x_[i - 1] + f * (x_[i] - x_[i - 1])) * scale_;
  }
  double width() const { return x_.empty() ? 0 : x_.back() * scale_; }

 private:
  std::vector<int64_t> points_;
  std::vector<double> x_;
  double scale_ = 1.0;
};

constexpr const char* kStyle = R"CSS(
:root{--fg:#1d2330;--dim:#5b6472;--line:#d8dde6;--bg:#fff;--panel:#f6f8fb;--red:#c62828;--amber:#b26a00;--green:#2e7d32;--blue:#2f6db5}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header,section,footer{padding:14px 28px}
header{background:var(--panel);border-bottom:1px solid var(--line)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:8px 0 10px}
.sub{color:var(--dim);margin:0}
.verdict{font-weight:600}.verdict.bad{color:var(--red)}.verdict.good{color:var(--green)}
ol.findings{padding-left:22px;margin:0}
.finding{margin:0 0 14px;padding:8px 12px;border-left:4px solid var(--amber);background:var(--panel);border-radius:4px}
.finding[data-f]{cursor:pointer}
.finding.first{border-left-color:var(--red)}
.kind{display:inline-block;font:600 12px ui-monospace,monospace;color:#fff;background:var(--amber);padding:1px 6px;border-radius:3px;margin-right:6px}
.first .kind{background:var(--red)}
.ftitle{font-weight:600}
a.show{margin-left:8px;font-size:12.5px;color:var(--blue)}
.details{margin:6px 0;padding-left:18px;font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace;color:#333}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0 0;font-size:13px}
dl.facts dt{color:var(--dim)}dl.facts dd{margin:0}
table{border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:var(--panel)}
td.mono,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
.st-bad{color:var(--red);font-weight:600}.st-ok{color:var(--green)}
.note{color:var(--dim);font-size:13px;margin:4px 0}
.note.focus{color:var(--fg)}
.tl-scroll{overflow:auto;max-height:68vh;border:1px solid var(--line);border-radius:4px;background:#fff}
.tl-inner{display:flex;width:max-content}
.tl-inner svg{flex:none;display:block}
.tl-labels{position:sticky;left:0;z-index:2;background:#fff;border-right:1px solid var(--line)}
svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
svg .rowlabel{font-weight:600}
svg .rowbg{fill:#fafbfc}svg .rowbg.odd{fill:#f1f3f7}
svg .op{stroke:#fff;stroke-width:.5}
svg .op.collective{fill:#7da7d9}svg .op.p2p{fill:#9ccc9c}svg .op.call{fill:#c9c9c9}
svg .op.open{fill:#f3b2a8;stroke:var(--red);stroke-width:1;stroke-dasharray:3 2}
svg .op.hl{fill:var(--red);stroke:#000;stroke-width:1.2}
svg .op.sel{stroke:#000;stroke-width:2}
svg .missing{fill:none;stroke:var(--red);stroke-width:1.5;stroke-dasharray:4 3}
svg .missinglabel{fill:var(--red);font-weight:600}
svg .oplabel{font-size:10px;pointer-events:none;fill:#102030}
svg .op.hl+.oplabel{fill:#fff}
svg .arrow{stroke:#6b7a90;stroke-width:.8;fill:none;opacity:.55}
svg .arrow.msg{stroke:#4c8c4c}
svg .arrow.hl{stroke:var(--red);stroke-width:1.6;opacity:.95}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:var(--dim)}
.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:-1px;border-radius:2px}
footer{color:var(--dim);font-size:12px;border-top:1px solid var(--line)}
)CSS";

// On load: labels wider than their box are hidden, and the timeline scrolls
// to the first finding. A click on a finding marks its operations and scrolls
// them into view.
constexpr const char* kScript = R"JS(
(function(){
  document.documentElement.classList.add('js');
  var ops = document.querySelectorAll('#timeline .op');
  document.body.setAttribute('data-ops', String(ops.length));
  document.body.setAttribute('data-findings', String(document.querySelectorAll('.finding').length));
  document.querySelectorAll('#timeline text.oplabel').forEach(function(t){
    if (t.getComputedTextLength() > Number(t.getAttribute('data-w')) - 4) t.setAttribute('display', 'none');
  });
  var sc = document.getElementById('tl-scroll');
  function reveal(x, y){
    if (!sc) return;
    var lw = Number(sc.getAttribute('data-label-w')) || 0;
    sc.scrollLeft = Math.max(0, x - (sc.clientWidth - lw) * 0.3);
    sc.scrollTop = Math.max(0, y - sc.clientHeight * 0.3);
  }
  if (sc) reveal(Number(sc.getAttribute('data-focus-x')), Number(sc.getAttribute('data-focus-y')));
  document.querySelectorAll('.finding[data-f]').forEach(function(li){
    li.addEventListener('click', function(ev){
      if (ev) ev.preventDefault();
      var n = li.getAttribute('data-f');
      document.querySelectorAll('#timeline .sel').forEach(function(e){ e.classList.remove('sel'); });
      document.querySelectorAll('#timeline [data-f~="' + n + '"]').forEach(function(e){ e.classList.add('sel'); });
      var t = document.getElementById('timeline'); if (t && t.scrollIntoView) t.scrollIntoView();
      reveal(Number(li.getAttribute('data-x')), Number(li.getAttribute('data-y')));
    });
  });
})();
)JS";

// Sizes of the timeline drawing, in pixels.
constexpr double kLabelWidth = 92;
constexpr double kLaneHeight = 22;
constexpr double kBoxHeight = 18;
constexpr double kRowPad = 4;
constexpr double kRowGap = 4;
constexpr size_t kMaxLanes = 6;          // per rank; more overlapping operations share the last
constexpr double kCharWidth = 6.2;      // a conservative width of one character of a box label
constexpr double kMarkerWidth = 150;    // a "missing from #N" marker with its text
constexpr size_t kMaxPlacedFindings = 8;

// A finding the timeline can show: the operations it is about and when it happened.
struct Placed {
  size_t number = 0;  // as the page numbers findings, from 1
  const Finding* finding = nullptr;
  std::vector<interop::OpRef> ops;
  int64_t time = 0;
  std::set<int32_t> missing;  // ranks that never entered its collective
};

std::vector<Placed> PlaceFindings(const Timeline& tl, const CheckReport& report) {
  std::vector<Placed> placed;
  for (size_t i = 0; i < report.findings.size() && placed.size() < kMaxPlacedFindings; ++i) {
    const Finding& f = report.findings[i];
    std::optional<int64_t> when = interop::FindingTime(tl, f);
    if (!when) continue;
    Placed p;
    p.number = i + 1;
    p.finding = &f;
    p.ops = interop::FindingOps(tl, f);
    p.time = *when;
    if (f.kind == FindingKind::kMissingRanks && f.comm && f.seq != 0) p.missing.insert(f.ranks.begin(), f.ranks.end());
    placed.push_back(std::move(p));
  }
  return placed;
}

// The window of operations around finding `index` of the placed ones: wider
// for the first.
std::pair<size_t, size_t> WindowOf(size_t index, size_t before, size_t after) {
  if (index == 0) return {before, after};
  return {std::min<size_t>(before, 8), std::min<size_t>(after, 4)};
}

// Ranges of a rank's operations by ordinal, inclusive: the windows a view holds.
class OrdinalRanges {
 public:
  // `before` operations before `centre` to `after` after it.
  void Around(uint64_t centre, size_t before, size_t after) {
    ranges_.push_back({centre > before ? centre - before : 0, centre + after});
  }
  bool Contains(uint64_t ordinal) const {
    return std::any_of(ranges_.begin(), ranges_.end(),
                       [&](const auto& r) { return ordinal >= r.first && ordinal <= r.second; });
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

// The operation of a rank under way when something happened at `time`: the
// last whose successor started later. Positions into `starts`, in call order.
template <typename StartAt>
size_t UnderWayAt(size_t n, int64_t time, const StartAt& start_at) {
  size_t k = 0;
  while (k + 1 < n && start_at(k + 1) <= time) ++k;
  return k;
}

// Which operations of each rank a view shows (positions into its ops): a
// window around where each placed finding is on that rank (its operation
// there, else what the rank was doing at that moment), wider for the first;
// the last operations of the rank when no finding can be placed. Windows are
// in call order (ordinals), so a timeline holding only some operations shows
// the same as one holding all.
std::vector<size_t> ShownOps(const Timeline& tl, size_t rank_index, const std::vector<Placed>& placed, size_t before,
                             size_t after) {
  const RankTimeline& rank = tl.ranks[rank_index];
  const auto& ops = rank.ops;
  if (ops.empty()) return {};
  OrdinalRanges ranges;
  if (placed.empty()) ranges.Around(rank.op_count > 0 ? rank.op_count - 1 : 0, before, 0);
  for (size_t pi = 0; pi < placed.size(); ++pi) {
    const Placed& p = placed[pi];
    std::optional<uint64_t> centre;
    for (const interop::OpRef& ref : p.ops) {
      if (ref.rank == rank_index) {
        centre = ops[ref.op].ordinal;
        break;
      }
    }
    if (!centre) centre = ops[UnderWayAt(ops.size(), p.time, [&](size_t k) { return ops[k].start_ns; })].ordinal;
    auto [b, a] = WindowOf(pi, before, after);
    ranges.Around(*centre, b, a);
  }
  std::vector<size_t> shown;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (ranges.Contains(ops[k].ordinal)) shown.push_back(k);
  }
  return shown;
}

// The timeline a report draws, holding only what it shows: a first pass over
// the ranks holds nothing but each operation's start and the operations the
// first findings are about; from them, where each finding that happened at a
// moment is on each rank; a second pass holds the windows around those.
Result<Timeline> ReportTimeline(const TraceReader& trace, const CheckReport& report, const ReportOptions& options) {
  constexpr size_t kCandidates = 32;  // findings looked for in the first pass
  constexpr size_t kAboutHeld = 16;   // operations held per finding and rank
  const size_t candidates = std::min(report.findings.size(), kCandidates);
  struct RankPass {
    std::vector<int64_t> starts;                  // by ordinal
    std::vector<std::set<uint64_t>> about;        // per candidate: the first ordinals it is about
  };
  std::map<int32_t, RankPass> pass;
  interop::TimelineOptions first;
  first.progress = options.progress;
  first.sink = [&](int32_t rank, const TimelineOp& o) {
    RankPass& r = pass[rank];
    if (r.starts.size() <= o.ordinal) r.starts.resize(o.ordinal + 1, INT64_MAX);
    r.starts[o.ordinal] = o.start_ns;
    if (r.about.empty()) r.about.resize(candidates);
    for (size_t i = 0; i < candidates; ++i) {
      if (!interop::FindingIsAbout(report.findings[i], rank, o)) continue;
      std::set<uint64_t>& held = r.about[i];
      held.insert(o.ordinal);
      if (held.size() > kAboutHeld) held.erase(std::prev(held.end()));
    }
  };
  REPLAY_ASSIGN_OR_RETURN(Timeline bare, interop::BuildTimeline(trace, first));

  // When each finding happened: its first operation on any rank, or (errors)
  // its first error or signal, which the bare timeline holds.
  std::vector<std::pair<size_t, int64_t>> placed;  // (finding, time)
  for (size_t i = 0; i < candidates && placed.size() < kMaxPlacedFindings; ++i) {
    std::optional<int64_t> earliest_op;
    for (const auto& [rank, r] : pass) {
      if (r.about.empty()) continue;
      for (uint64_t ordinal : r.about[i]) {
        earliest_op = earliest_op ? std::min(*earliest_op, r.starts[ordinal]) : r.starts[ordinal];
      }
    }
    if (auto when = interop::FindingTime(bare, report.findings[i], earliest_op)) placed.push_back({i, *when});
  }
  std::map<int32_t, OrdinalRanges> keep;
  for (const auto& [rank, r] : pass) {
    OrdinalRanges& ranges = keep[rank];
    if (r.starts.empty()) continue;
    if (placed.empty()) ranges.Around(r.starts.size() - 1, options.ops_before, 0);
    for (size_t pi = 0; pi < placed.size(); ++pi) {
      const auto& [i, time] = placed[pi];
      const std::set<uint64_t>& about = r.about.empty() ? std::set<uint64_t>{} : r.about[i];
      for (uint64_t ordinal : about) ranges.Around(ordinal, 0, 0);
      const uint64_t centre = !about.empty() ? *about.begin()
                                             : UnderWayAt(r.starts.size(), time, [&starts = r.starts](size_t k) {
                                                 return starts[k];
                                               });
      auto [b, a] = WindowOf(pi, options.ops_before, options.ops_after);
      ranges.Around(centre, b, a);
    }
  }
  interop::TimelineOptions second;
  second.keep = [&](int32_t rank, uint64_t ordinal) {
    auto at = keep.find(rank);
    return at != keep.end() && at->second.Contains(ordinal);
  };
  return interop::BuildTimeline(trace, second);
}

class HtmlPage {
 public:
  HtmlPage(const TraceReader& trace, const CheckReport& report, const ReportOptions& options, const Timeline& tl)
      : trace_(trace), report_(report), options_(options), tl_(tl), placed_(PlaceFindings(tl, report)) {}

  std::string Render() {
    const std::string name = TraceName(trace_, options_);
    out_ << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         << "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
         << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
         << "<title>replay report: " << Esc(name) << "</title><style>" << kStyle << "</style></head><body>\n";
    Header(name);
    // The timeline first, so that the page opens on the failing operation.
    TimelineSection();
    Findings();
    Ranks();
    Config();
    Notes();
    out_ << "<footer>Made by " << Esc(VersionLine()) << " (<span class=\"mono\">replay report</span>). "
         << "This page is self-contained: it loads nothing from the network.</footer>\n";
    out_ << "<script>" << kScript << "</script>\n</body></html>\n";
    return out_.str();
  }

 private:
  void Header(const std::string& name) {
    out_ << "<header><h1>replay report: " << Esc(name) << "</h1><p class=\"sub\">";
    size_t n = report_.findings.size();
    out_ << "<span class=\"verdict " << (n ? "bad" : "good") << "\">"
         << (n ? std::to_string(n) + (n == 1 ? " finding" : " findings") : "no findings") << "</span> · "
         << report_.ranks.size() << " ranks";
    if (report_.world_size > 0) out_ << " of " << report_.world_size;
    if (trace_.manifest()) {
      const JobManifest& m = *trace_.manifest();
      out_ << " · recorded " << Esc(Utc(m.created_realtime_ns)) << " · level " << Esc(std::string(LevelName(m.level)));
    }
    const std::string versions = VersionsText(trace_);
    if (!versions.empty()) out_ << " · " << Esc(versions);
    if (trace_.manifest()) {
      std::string cmd = ShownCommand(*trace_.manifest(), options_);
      if (!cmd.empty()) out_ << "</p><p class=\"sub mono\">" << Esc(cmd);
    }
    out_ << "</p></header>\n";
  }

  void Findings() {
    out_ << "<section id=\"findings\"><h2>Findings</h2>\n";
    if (report_.findings.empty()) {
      out_ << "<p>`replay check` found nothing wrong: every collective matched and completed, every message was "
              "received, and the ranks' configuration agrees.</p></section>\n";
      return;
    }
    out_ << "<ol class=\"findings\">\n";
    for (size_t i = 0; i < report_.findings.size(); ++i) {
      const Finding& f = report_.findings[i];
      out_ << "<li class=\"finding" << (i == 0 ? " first" : "") << "\" id=\"finding-" << i + 1 << "\"";
      auto at = position_.find(i + 1);
      if (at != position_.end()) {
        out_ << " data-f=\"" << i + 1 << "\" data-x=\"" << Num(at->second.first) << "\" data-y=\""
             << Num(at->second.second) << "\"";
      }
      out_ << "><span class=\"kind\">" << Esc(std::string(FindingKindName(f.kind))) << "</span><span class=\"ftitle\">"
           << Esc(f.title) << "</span>";
      if (at != position_.end()) out_ << "<a class=\"show\" href=\"#timeline\">show in the timeline</a>";
      out_ << "\n";
      if (!f.details.empty()) {
        out_ << "<ul class=\"details\">";
        for (size_t d = 0; d < f.details.size() && d < 24; ++d) out_ << "<li>" << Esc(f.details[d]) << "</li>";
        if (f.details.size() > 24) out_ << "<li>… " << f.details.size() - 24 << " more lines (see replay check)</li>";
        out_ << "</ul>\n";
      }
      out_ << "<dl class=\"facts\">";
      if (!f.ranks.empty()) out_ << "<dt>ranks</dt><dd>" << Esc(RanksText(f.ranks)) << "</dd>";
      if (f.comm) {
        out_ << "<dt>communicator</dt><dd>" << Esc(f.comm->name);
        if (!f.comm->members.empty()) out_ << " (ranks " << Esc(RanksText(f.comm->members)) << ")";
        out_ << "</dd>";
      }
      if (f.seq != 0) out_ << "<dt>sequence</dt><dd>#" << f.seq << (f.op.empty() ? "" : " (" + Esc(f.op) + ")") << "</dd>";
      if (f.call_site) out_ << "<dt>call site</dt><dd class=\"mono\">" << Esc(FormatCallSite(*f.call_site)) << "</dd>";
      std::string cats;
      for (const std::string& c : f.categories) cats += (cats.empty() ? "" : "; ") + c;
      if (!cats.empty()) out_ << "<dt>category</dt><dd>" << Esc(cats) << "</dd>";
      if (!f.fix.empty()) out_ << "<dt>fix</dt><dd>" << Esc(f.fix) << "</dd>";
      out_ << "</dl></li>\n";
    }
    out_ << "</ol></section>\n";
  }

  // Which ranks get a row: those at fault in the first placed finding first, then by rank.
  std::vector<size_t> Rows() {
    std::vector<size_t> rows;
    std::set<int32_t> chosen;
    auto add = [&](int32_t rank) {
      if (rows.size() >= options_.max_ranks || chosen.count(rank)) return;
      for (size_t i = 0; i < tl_.ranks.size(); ++i) {
        if (tl_.ranks[i].rank == rank) {
          rows.push_back(i);
          chosen.insert(rank);
        }
      }
    };
    if (!placed_.empty()) {
      for (int32_t r : placed_[0].finding->ranks) add(r);
    }
    for (const RankTimeline& r : tl_.ranks) add(r.rank);
    std::sort(rows.begin(), rows.end(), [&](size_t a, size_t b) { return tl_.ranks[a].rank < tl_.ranks[b].rank; });
    return rows;
  }

  void TimelineSection() {
    out_ << "<section id=\"timeline\"><h2>Timeline</h2>\n";
    const Placed* focus = placed_.empty() ? nullptr : &placed_[0];
    const std::vector<size_t> rows = Rows();
    std::vector<std::vector<size_t>> shown(rows.size());
    size_t total_ops = 0;
    size_t shown_ops = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      shown[i] = ShownOps(tl_, rows[i], placed_, options_.ops_before, options_.ops_after);
      total_ops += tl_.ranks[rows[i]].op_count;
      shown_ops += shown[i].size();
    }
    // Which placed findings each operation belongs to, and the focus's operations.
    std::map<interop::OpRef, std::string> finding_of;
    std::set<interop::OpRef> focus_ops;
    for (const Placed& p : placed_) {
      for (const interop::OpRef& ref : p.ops) {
        std::string& s = finding_of[ref];
        s += (s.empty() ? "" : " ") + std::to_string(p.number);
        if (&p == focus) focus_ops.insert(ref);
      }
    }

    auto end_of = [](const RankTimeline& r, const TimelineOp& o) { return std::max(o.start_ns, o.end_ns >= 0 ? o.end_ns : r.end_ns); };
    Axis axis;
    for (size_t i = 0; i < rows.size(); ++i) {
      const RankTimeline& r = tl_.ranks[rows[i]];
      for (size_t k : shown[i]) {
        axis.Add(r.ops[k].start_ns);
        axis.Add(end_of(r, r.ops[k]));
      }
    }
    for (const Placed& p : placed_) axis.Add(p.time);
    axis.Finish(6000);

    // Lay each row out in lanes: an operation takes the first lane free at its
    // start, so boxes (and the labels inside them) never overlap; past
    // kMaxLanes, overlapping operations share the last lane unlabelled.
    // "missing from" markers get lanes of their own below.
    struct Drawn {
      size_t op;
      double x0, w;
      size_t lane;
      bool crowded;
    };
    struct Marker {
      const Placed* placed;
      double x;
      size_t lane;
    };
    struct RowLayout {
      std::vector<Drawn> boxes;
      std::vector<Marker> markers;
      size_t lanes = 1;
      double y = 0;
      double h = 0;
    };
    std::vector<RowLayout> layout(rows.size());
    double y = kRowGap;
    for (size_t i = 0; i < rows.size(); ++i) {
      const RankTimeline& r = tl_.ranks[rows[i]];
      RowLayout& row = layout[i];
      std::vector<double> lane_end;
      for (size_t k : shown[i]) {
        const TimelineOp& o = r.ops[k];
        const double x0 = axis.X(o.start_ns);
        const double w = std::max(2.0, axis.X(end_of(r, o)) - x0);
        size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > x0) ++lane;
        bool crowded = false;
        if (lane == lane_end.size()) {
          if (lane_end.size() < kMaxLanes) {
            lane_end.push_back(0);
          } else {
            lane = kMaxLanes - 1;
            crowded = true;
          }
        }
        lane_end[lane] = std::max(lane_end[lane], x0 + w + 1);
        row.boxes.push_back({k, x0, w, lane, crowded});
      }
      std::vector<double> marker_end;
      for (const Placed& p : placed_) {
        if (!p.missing.count(r.rank)) continue;
        const double x = axis.X(p.time);
        size_t lane = 0;
        while (lane < marker_end.size() && marker_end[lane] > x) ++lane;
        if (lane == marker_end.size()) marker_end.push_back(0);
        marker_end[lane] = x + kMarkerWidth;
        row.markers.push_back({&p, x, lane_end.size() + lane});
      }
      row.lanes = std::max<size_t>(1, lane_end.size() + marker_end.size());
      row.y = y;
      row.h = 2 * kRowPad + kLaneHeight * static_cast<double>(row.lanes);
      y += row.h + kRowGap;
    }
    const double height = y;
    const double width = axis.width() + kMarkerWidth + 20;
    auto box_y = [&](size_t i, size_t lane) {
      return layout[i].y + kRowPad + kLaneHeight * static_cast<double>(lane) + (kLaneHeight - kBoxHeight) / 2;
    };

    // Where each placed finding is drawn: its leftmost operation, else its
    // first marker, else its moment on the first row. The page opens on the first.
    for (const Placed& p : placed_) {
      std::optional<std::pair<double, double>> at;
      for (size_t i = 0; i < rows.size(); ++i) {
        for (const Drawn& d : layout[i].boxes) {
          auto f = finding_of.find({rows[i], d.op});
          if (f == finding_of.end()) continue;
          if ((" " + f->second + " ").find(" " + std::to_string(p.number) + " ") == std::string::npos) continue;
          if (!at || d.x0 < at->first) at = std::make_pair(d.x0, box_y(i, d.lane));
        }
        for (const Marker& m : layout[i].markers) {
          if (m.placed == &p && !at) at = std::make_pair(m.x, box_y(i, m.lane));
        }
      }
      if (!at) at = std::make_pair(axis.X(p.time), layout.empty() ? 0.0 : layout[0].y);
      position_[p.number] = *at;
    }

    out_ << "<p class=\"note focus\">";
    if (focus != nullptr) {
      out_ << "Around finding " << focus->number << " (in red): " << Esc(focus->finding->title);
    } else {
      out_ << "The last operations of each rank";
    }
    out_ << ". " << shown_ops << " of " << total_ops << " operations";
    if (rows.size() < tl_.ranks.size()) out_ << " on " << rows.size() << " of " << tl_.ranks.size() << " ranks";
    out_ << ".</p>\n";

    const std::pair<double, double> focus_at = focus != nullptr ? position_[focus->number] : std::make_pair(axis.width(), 0.0);
    out_ << "<div class=\"tl-scroll\" id=\"tl-scroll\" data-label-w=\"" << Num(kLabelWidth) << "\" data-focus-x=\""
         << Num(focus_at.first) << "\" data-focus-y=\"" << Num(focus_at.second) << "\"><div class=\"tl-inner\">\n";

    // The rank labels, in a column that stays in place as the timeline scrolls.
    std::map<int32_t, const RankState*> states;
    for (const RankState& s : report_.ranks) states[s.rank] = &s;
    out_ << "<svg class=\"tl-labels\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(kLabelWidth) << "\" height=\""
         << Num(height) << "\" viewBox=\"0 0 " << Num(kLabelWidth) << " " << Num(height) << "\">\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const RankTimeline& r = tl_.ranks[rows[i]];
      auto st = states.find(r.rank);
      const bool bad = st != states.end() && (st->second->blocked || st->second->signal != 0);
      out_ << "<rect class=\"rowbg" << (i % 2 ? " odd" : "") << "\" x=\"0\" y=\"" << Num(layout[i].y) << "\" width=\""
           << Num(kLabelWidth) << "\" height=\"" << Num(layout[i].h) << "\"/><text class=\"rowlabel\" x=\"8\" y=\""
           << Num(box_y(i, 0) + 13) << "\"" << (bad ? " style=\"fill:#c62828\"" : "") << ">rank " << r.rank << "<title>"
           << Esc(st != states.end() ? st->second->status + ": " + st->second->doing : r.status) << "</title></text>\n";
    }
    out_ << "</svg>\n";

    out_ << "<svg class=\"tl-ops\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(width) << "\" height=\""
         << Num(height) << "\" viewBox=\"0 0 " << Num(width) << " " << Num(height) << "\">\n";
    out_ << "<defs><marker id=\"ah\" viewBox=\"0 0 6 6\" refX=\"5\" refY=\"3\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\">"
            "<path d=\"M0,0 L6,3 L0,6 z\" fill=\"#6b7a90\"/></marker>"
            "<marker id=\"ahr\" viewBox=\"0 0 6 6\" refX=\"5\" refY=\"3\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\">"
            "<path d=\"M0,0 L6,3 L0,6 z\" fill=\"#c62828\"/></marker></defs>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      out_ << "<rect class=\"rowbg" << (i % 2 ? " odd" : "") << "\" x=\"0\" y=\"" << Num(layout[i].y) << "\" width=\""
           << Num(width) << "\" height=\"" << Num(layout[i].h) << "\"/>\n";
    }

    struct Box {
      size_t row;
      double x, w, y;
    };
    std::map<std::pair<uint64_t, uint64_t>, std::vector<Box>> by_collective;
    std::map<interop::MessageKey, Box> sends;
    std::vector<std::pair<Box, interop::MessageKey>> receives;
    std::set<std::pair<uint64_t, uint64_t>> focus_keys;
    std::ostringstream boxes;
    for (size_t i = 0; i < rows.size(); ++i) {
      const RankTimeline& r = tl_.ranks[rows[i]];
      for (const Drawn& d : layout[i].boxes) {
        const TimelineOp& o = r.ops[d.op];
        const interop::OpRef ref{rows[i], d.op};
        const bool hl = focus_ops.count(ref) != 0;
        if (hl && o.collective()) focus_keys.insert({o.comm, o.seq});
        std::string cls = std::string("op ") + (o.collective() ? "collective" : o.point_to_point() ? "p2p" : "call");
        if (o.end_ns < 0) cls += " open";
        if (hl) cls += " hl";
        const double by = box_y(i, d.lane);
        boxes << "<rect class=\"" << cls << "\" x=\"" << Num(d.x0) << "\" y=\"" << Num(by) << "\" width=\"" << Num(d.w)
              << "\" height=\"" << Num(kBoxHeight) << "\" rx=\"2\"";
        if (o.collective()) boxes << " data-key=\"" << Key(o.comm, o.seq) << "\"";
        auto f = finding_of.find(ref);
        if (f != finding_of.end()) boxes << " data-f=\"" << f->second << "\"";
        boxes << "><title>" << Esc(OpTooltip(tl_, r, o, Site(rows[i], o.call_site))) << "</title></rect>\n";
        const std::string label = ShortName(tl_, o);
        if (!d.crowded && d.w >= kCharWidth * static_cast<double>(label.size()) + 6) {
          boxes << "<text class=\"oplabel\" x=\"" << Num(d.x0 + 3) << "\" y=\"" << Num(by + 13) << "\" data-w=\""
                << Num(d.w) << "\">" << Esc(label) << "</text>\n";
        }
        Box b{i, d.x0, d.w, by};
        if (o.collective()) {
          by_collective[{o.comm, o.seq}].push_back(b);
        } else if (o.point_to_point() && o.peer >= 0 && o.peer_seq != 0) {
          if (o.is_send) {
            sends[{o.comm, r.rank, o.peer, o.peer_seq}] = b;
          } else {
            receives.push_back({b, {o.comm, o.peer, r.rank, o.peer_seq}});
          }
        }
      }
      for (const Marker& m : layout[i].markers) {
        const Finding& f = *m.placed->finding;
        const double my = box_y(i, m.lane);
        boxes << "<rect class=\"missing\" x=\"" << Num(m.x) << "\" y=\"" << Num(my) << "\" width=\"36\" height=\""
              << Num(kBoxHeight) << "\" data-f=\"" << m.placed->number << "\"><title>rank " << r.rank << " never entered "
              << Esc(f.op) << " on " << Esc(f.comm->name) << " #" << f.seq << "</title></rect><text class=\"missinglabel\" x=\""
              << Num(m.x + 40) << "\" y=\"" << Num(my + 13) << "\">missing from #" << f.seq << "</text>\n";
      }
    }
    // Arrows under the boxes.
    size_t arrows = 0;
    auto arrow = [&](const Box& a, const Box& b, const std::string& cls) {
      if (arrows++ >= options_.max_arrows) return;
      const bool down = b.row > a.row;
      double xa = a.x + std::min(a.w, 6.0) / 2, xb = b.x + std::min(b.w, 6.0) / 2;
      double ya = down ? a.y + kBoxHeight : a.y, yb = down ? b.y : b.y + kBoxHeight;
      out_ << "<line class=\"arrow " << cls << "\" x1=\"" << Num(xa) << "\" y1=\"" << Num(ya) << "\" x2=\"" << Num(xb)
           << "\" y2=\"" << Num(yb) << "\" marker-end=\"url(#" << (cls.find("hl") != std::string::npos ? "ahr" : "ah")
           << ")\"/>\n";
    };
    for (auto& [key, list] : by_collective) {
      std::sort(list.begin(), list.end(), [](const Box& a, const Box& b) { return a.row < b.row; });
      const bool hl = focus_keys.count(key) != 0;
      for (size_t k = 1; k < list.size(); ++k) arrow(list[k - 1], list[k], hl ? "hl" : "");
    }
    for (const auto& [to, key] : receives) {
      auto it = sends.find(key);
      if (it != sends.end() && it->second.row != to.row) arrow(it->second, to, "msg");
    }
    out_ << boxes.str() << "</svg></div></div>\n";
    if (arrows > options_.max_arrows) {
      out_ << "<p class=\"note\">" << arrows - options_.max_arrows << " more arrows were left out.</p>\n";
    }
    out_ << "<p class=\"legend\"><span><i style=\"background:#7da7d9\"></i>collective</span><span><i style=\"background:#9ccc9c\"></i>point-to-point</span>"
            "<span><i style=\"background:#c9c9c9\"></i>other call</span><span><i style=\"background:#f3b2a8;border:1px dashed #c62828\"></i>never completed</span>";
    if (focus != nullptr) out_ << "<span><i style=\"background:#c62828\"></i>what finding " << focus->number << " is about</span>";
    out_ << "</p>\n";
    out_ << "<p class=\"note\">The time axis is compressed: long gaps are shortened, so widths show order and rough length, "
            "not scale. Operations that overlap in time on one rank are drawn one under another. Arrows join the "
            "operations of one collective (same communicator and sequence number) and each message's send and receive. "
            "Hover over an operation for its details; click a finding to mark its operations and scroll to them.</p>\n";
    out_ << "</section>\n";
  }

  // Where an operation of rank `rank_index` was called from, as check prints
  // call sites; empty when not known.
  const std::string& Site(size_t rank_index, uint64_t call_site) {
    static const std::string kNone;
    if (call_site == 0) return kNone;
    auto [at, fresh] = sites_.try_emplace({rank_index, call_site});
    if (fresh) {
      const RankTimeline& r = tl_.ranks[rank_index];
      CallSite site = symbols_.Resolve(call_site, r.header.modules, r.python_sites);
      if (site.known()) at->second = FormatCallSite(site);
    }
    return at->second;
  }

  void Ranks() {
    out_ << "<section id=\"ranks\"><h2>Ranks</h2><table><thead><tr><th>rank</th><th>status</th><th>host</th><th>events</th>"
            "<th>what it was doing at the end</th></tr></thead><tbody>\n";
    std::map<int32_t, const RankTimeline*> tl;
    for (const RankTimeline& r : tl_.ranks) tl[r.rank] = &r;
    for (const RankState& s : report_.ranks) {
      const bool bad = s.blocked || s.signal != 0 || s.status == "untraced" || s.status == "failed";
      auto t = tl.find(s.rank);
      out_ << "<tr><td>" << s.rank << "</td><td class=\"" << (bad ? "st-bad" : "st-ok") << "\">" << Esc(s.status)
           << (s.close_reason.empty() ? "" : " (" + Esc(s.close_reason) + ")") << "</td><td>"
           << Esc(t != tl.end() ? t->second->host : "") << "</td><td>" << s.events << "</td><td>" << Esc(s.doing)
           << "</td></tr>\n";
    }
    out_ << "</tbody></table></section>\n";
  }

  void Config() {
    out_ << "<section id=\"config\"><h2>Configuration differences</h2>\n";
    bool any = false;
    for (const Finding& f : report_.findings) {
      if (f.kind != FindingKind::kConfig) continue;
      nlohmann::json data = ParseJsonObject(f.data);
      auto settings = data.find("settings");
      if (settings == data.end() || !settings->is_array()) continue;
      if (!any) out_ << "<table><thead><tr><th>source</th><th>setting</th><th>value</th><th>ranks</th></tr></thead><tbody>\n";
      any = true;
      for (const auto& s : *settings) {
        const auto& values = s.value("values", nlohmann::json::array());
        bool first = true;
        for (const auto& v : values) {
          std::vector<int32_t> ranks;
          for (const auto& r : v.value("ranks", nlohmann::json::array())) ranks.push_back(r.get<int32_t>());
          std::string value = v.contains("value") && v["value"].is_string() ? v["value"].get<std::string>() : JsonText(v.value("value", nlohmann::json()));
          out_ << "<tr><td>" << (first ? Esc(s.value("source", "")) : "") << "</td><td class=\"mono\">"
               << (first ? Esc(s.value("key", "")) : "") << "</td><td class=\"mono\">" << Esc(value) << "</td><td>"
               << Esc(RanksText(ranks)) << "</td></tr>\n";
          first = false;
        }
      }
    }
    if (any) {
      out_ << "</tbody></table>\n";
    } else {
      out_ << "<p>None: environment, versions and MPI settings agree across the ranks (variables that differ by design, "
              "such as ranks and pids, are not compared).</p>\n";
    }
    out_ << "</section>\n";
  }

  void Notes() {
    if (report_.notes.empty() && tl_.notes.empty()) return;
    out_ << "<section id=\"notes\"><h2>Limits of this report</h2><ul>";
    for (const std::string& n : report_.notes) out_ << "<li>" << Esc(n) << "</li>";
    for (const std::string& n : tl_.notes) out_ << "<li>" << Esc(n) << "</li>";
    out_ << "</ul></section>\n";
  }

  const TraceReader& trace_;
  const CheckReport& report_;
  const ReportOptions& options_;
  const Timeline& tl_;
  const std::vector<Placed> placed_;
  analysis::SymbolResolver symbols_;
  std::map<std::pair<size_t, uint64_t>, std::string> sites_;  // (rank index, call site) -> text
  // Where each placed finding is drawn in the timeline (x, y), by its number.
  std::map<size_t, std::pair<double, double>> position_;
  std::ostringstream out_;
};

// Markdown table cell text: no newlines, pipes escaped.
std::string Cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out.push_back(c);
    }
  }
  return out;
}


// The first placed finding as a few operations of each rank around it, one
// line per rank, the finding's own in [brackets], collectives on another
// communicator than the finding's named:
//   rank 1  … Allreduce #3 · Bcast WORLD #4 · (missing from #5) · Allreduce WORLD #5, never returned
std::string TextTimeline(const Timeline& tl, const std::vector<Placed>& placed, size_t max_ranks) {
  if (placed.empty()) return "";
  const Placed& p = placed[0];
  const std::vector<Placed> focus(placed.begin(), placed.begin() + 1);
  std::set<interop::OpRef> about(p.ops.begin(), p.ops.end());
  std::ostringstream text;
  size_t rows = 0;
  for (size_t ri = 0; ri < tl.ranks.size() && rows < max_ranks; ++ri, ++rows) {
    const RankTimeline& r = tl.ranks[ri];
    std::vector<size_t> shown = ShownOps(tl, ri, focus, 3, 2);
    std::string line = "rank " + std::to_string(r.rank);
    line.resize(std::max<size_t>(line.size() + 2, 9), ' ');
    if (!shown.empty() && r.ops[shown.front()].ordinal > 0) line += "… ";
    bool first = true;
    bool marked = !p.missing.count(r.rank);
    auto item = [&](const std::string& s) {
      line += (first ? "" : " · ") + s;
      first = false;
    };
    for (size_t k : shown) {
      const TimelineOp& o = r.ops[k];
      if (!marked && o.start_ns > p.time) {
        item("(missing from #" + std::to_string(p.finding->seq) + ")");
        marked = true;
      }
      std::string s = ShortName(tl, o);
      if (o.collective() && p.finding->comm && o.comm != p.finding->comm->id) {
        s.insert(s.rfind(" #"), " " + tl.CommName(o.comm));
      }
      if (o.point_to_point() && o.peer >= 0) s += (o.is_send ? " to " : " from ") + std::to_string(o.peer);
      if (o.end_ns < 0) s += o.return_ns < 0 ? ", never returned" : ", never completed";
      item(about.count({ri, k}) ? "[" + s + "]" : s);
    }
    if (!marked) item("(missing from #" + std::to_string(p.finding->seq) + ")");
    if (!shown.empty() && r.ops[shown.back()].ordinal + 1 < r.op_count) line += " …";
    text << line << "\n";
  }
  if (rows < tl.ranks.size()) text << "… " << tl.ranks.size() - rows << " more ranks\n";
  return text.str();
}

}  // namespace

Result<std::string> RenderHtmlReport(const TraceReader& trace, const CheckReport& report, const ReportOptions& options) {
  REPLAY_ASSIGN_OR_RETURN(Timeline tl, ReportTimeline(trace, report, options));
  HtmlPage page(trace, report, options, tl);
  return page.Render();
}

Result<std::string> RenderMarkdownReport(const TraceReader& trace, const CheckReport& report, const ReportOptions& options) {
  REPLAY_ASSIGN_OR_RETURN(Timeline tl, ReportTimeline(trace, report, options));
  const std::vector<Placed> placed = PlaceFindings(tl, report);
  std::ostringstream md;
  const std::string name = TraceName(trace, options);
  size_t n = report.findings.size();
  md << "### replay check: " << (n ? std::to_string(n) + (n == 1 ? " finding" : " findings") : "no findings") << " in `"
     << name << "` (" << report.ranks.size() << " ranks";
  if (report.world_size > 0 && static_cast<size_t>(report.world_size) != report.ranks.size()) md << " of " << report.world_size;
  md << ")\n\n";
  if (trace.manifest() && !trace.manifest()->command.empty()) {
    md << "Command: `" << ShownCommand(*trace.manifest(), options) << "`\n\n";
  }
  const std::string versions = VersionsText(trace);
  if (!versions.empty() || trace.manifest()) {
    md << "Recorded";
    if (trace.manifest()) {
      const std::string when = Utc(trace.manifest()->created_realtime_ns);
      if (!when.empty()) md << " " << when;
      md << " at level `" << LevelName(trace.manifest()->level) << "`";
    }
    if (!versions.empty()) md << " with " << versions;
    md << ".\n\n";
  }
  for (size_t i = 0; i < n; ++i) {
    const Finding& f = report.findings[i];
    md << i + 1 << ". **" << FindingKindName(f.kind) << "**: " << f.title << "\n";
    for (size_t d = 0; d < f.details.size() && d < 8; ++d) md << "   - " << f.details[d] << "\n";
    if (f.details.size() > 8) md << "   - … " << f.details.size() - 8 << " more lines\n";
    if (f.comm) {
      md << "   - communicator: " << f.comm->name;
      if (!f.comm->members.empty()) md << " (ranks " << RanksText(f.comm->members) << ")";
      md << "\n";
    }
    if (f.call_site) md << "   - call site: `" << FormatCallSite(*f.call_site) << "`\n";
    std::string cats;
    for (const std::string& c : f.categories) cats += (cats.empty() ? "" : "; ") + c;
    if (!cats.empty()) md << "   - category: " << cats << "\n";
    if (!f.fix.empty()) md << "   - fix: " << f.fix << "\n";
  }
  if (n) md << "\n";
  const std::string timeline = TextTimeline(tl, placed, 16);
  if (!timeline.empty()) {
    md << "Around finding " << placed[0].number << ", what each rank called (its operations in [brackets]):\n\n```text\n"
       << timeline << "```\n\n";
  }
  md << "<details><summary>Ranks</summary>\n\n| rank | status | doing |\n|---:|---|---|\n";
  for (const RankState& s : report.ranks) {
    md << "| " << s.rank << " | " << Cell(s.status + (s.close_reason.empty() ? "" : " (" + s.close_reason + ")")) << " | "
       << Cell(s.doing) << " |\n";
  }
  md << "\n</details>\n\n";
  bool any = false;
  for (const Finding& f : report.findings) {
    if (f.kind != FindingKind::kConfig) continue;
    nlohmann::json data = ParseJsonObject(f.data);
    auto settings = data.find("settings");
    if (settings == data.end() || !settings->is_array()) continue;
    if (!any) md << "Configuration that differs across ranks:\n\n| setting | value | ranks |\n|---|---|---|\n";
    any = true;
    for (const auto& s : *settings) {
      for (const auto& v : s.value("values", nlohmann::json::array())) {
        std::vector<int32_t> ranks;
        for (const auto& r : v.value("ranks", nlohmann::json::array())) ranks.push_back(r.get<int32_t>());
        std::string value = v.contains("value") && v["value"].is_string() ? v["value"].get<std::string>() : "(unset)";
        md << "| `" << Cell(s.value("key", "")) << "` | `" << Cell(value) << "` | " << RanksText(ranks) << " |\n";
      }
    }
  }
  if (any) md << "\n";
  if (!report.notes.empty()) {
    md << "Limits of this check:\n";
    for (const std::string& note : report.notes) md << "- " << note << "\n";
    md << "\n";
  }
  md << "<sub>" << VersionLine() << ", `replay report --markdown`</sub>\n";
  return md.str();
}

}  // namespace replay
