// Trace Event Format output; see replay/perfetto.h for the layout of tracks
// and interop/perfetto_walk.h for the walk that lays them out.
#include "replay/perfetto.h"

#include <type_traits>
#include <variant>

#include "interop/perfetto_walk.h"
#include "replay/version.h"
#include "util/json.h"

namespace replay {
namespace {

using interop::PerfettoArrow;
using interop::PerfettoSlice;
using interop::PerfettoTrack;
using interop::RankTimeline;
using interop::TimelineInstant;
using nlohmann::json;

class Emitter {
 public:
  explicit Emitter(std::ostream& out) : out_(out) {}
  void Begin(const json& other) {
    out_ << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << JsonText(other)
         << ",\"traceEvents\":[\n";
  }
  void Event(const json& e) {
    if (count_ > 0) out_ << ",\n";
    out_ << JsonText(e);
    ++count_;
  }
  void End() { out_ << "\n]}\n"; }
  uint64_t count() const { return count_; }

 private:
  std::ostream& out_;
  uint64_t count_ = 0;
};

// Ranks are processes (pid = rank), tracks are threads (tid = track id).
class JsonSink : public interop::PerfettoSink {
 public:
  JsonSink(Emitter& em, int64_t start_ns) : em_(em), start_ns_(start_ns) {}

  void BeginRank(const RankTimeline& r, const std::vector<PerfettoTrack>& tracks) override {
    const int32_t pid = r.rank;
    std::string pname = "rank " + std::to_string(r.rank);
    if (!r.host.empty()) pname += " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
    em_.Event({{"name", "process_name"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
    em_.Event({{"name", "process_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", r.rank}}}});
    if (r.status != "complete") {
      em_.Event({{"name", "process_labels"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"labels", r.status}}}});
    }
    for (const PerfettoTrack& t : tracks) {
      em_.Event({{"name", "thread_name"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", t.id}, {"args", {{"name", t.name}}}});
      em_.Event({{"name", "thread_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", t.id}, {"args", {{"sort_index", t.id}}}});
    }
  }

  void Slice(const RankTimeline& r, const PerfettoSlice& s) override {
    json args = json::object();
    for (const interop::PerfettoArg& a : s.args) {
      std::visit([&](auto v) {
        if constexpr (std::is_same_v<decltype(v), std::string_view>) {
          args[a.name] = std::string(v);
        } else {
          args[a.name] = v;
        }
      }, a.value);
    }
    em_.Event({{"name", s.name}, {"cat", s.category}, {"ph", "X"}, {"ts", Us(s.start_ns)},
               {"dur", static_cast<double>(s.end_ns - s.start_ns) / 1000.0}, {"pid", r.rank}, {"tid", s.track},
               {"args", std::move(args)}});
  }

  void Instant(const RankTimeline& r, int32_t track, const TimelineInstant& in) override {
    const bool mark = in.kind == TimelineInstant::Kind::kMark;
    const char* cat = mark ? "mark" : in.kind == TimelineInstant::Kind::kError ? "error" : "signal";
    // Marks belong to their thread; errors and signals concern the whole process.
    em_.Event({{"name", in.text}, {"cat", cat}, {"ph", "i"}, {"s", mark ? "t" : "p"}, {"ts", Us(in.time_ns)},
               {"pid", r.rank}, {"tid", track}});
  }

  void Arrow(const PerfettoArrow& a) override {
    em_.Event({{"name", a.name}, {"cat", "flow"}, {"ph", "s"}, {"id", a.id}, {"ts", Us(a.from.time_ns)},
               {"pid", a.from.rank}, {"tid", a.from.track}});
    em_.Event({{"name", a.name}, {"cat", "flow"}, {"ph", "f"}, {"bp", "e"}, {"id", a.id}, {"ts", Us(a.to.time_ns)},
               {"pid", a.to.rank}, {"tid", a.to.track}});
  }

 private:
  double Us(int64_t ns) const { return static_cast<double>(ns - start_ns_) / 1000.0; }

  Emitter& em_;
  int64_t start_ns_;
};

}  // namespace

Result<PerfettoSummary> WritePerfetto(const TraceReader& trace, std::ostream& out, const PerfettoOptions& options) {
  REPLAY_ASSIGN_OR_RETURN(interop::PerfettoPlan plan, interop::PlanPerfetto(trace, options));
  const interop::Timeline& tl = plan.timeline;
  Emitter em(out);
  json other = {{"generator", VersionLine()}, {"trace", trace.dir()}};
  if (trace.manifest()) other["trace_uuid"] = UuidToString(trace.manifest()->trace_uuid);
  if (!tl.notes.empty()) other["notes"] = tl.notes;
  if (plan.window) {
    const PerfettoWindow& w = *plan.window;
    other["window_s"] = {static_cast<double>(w.start_ns) / 1e9,
                         w.end_ns == INT64_MAX ? json(nullptr) : json(static_cast<double>(w.end_ns) / 1e9)};
    if (plan.finding >= 0) other["window_around"] = options.around[static_cast<size_t>(plan.finding)].title;
  }
  em.Begin(other);
  JsonSink sink(em, tl.start_ns);
  REPLAY_ASSIGN_OR_RETURN(PerfettoSummary summary, interop::WalkPerfetto(plan, sink));
  em.End();
  summary.events = em.count();
  if (!out) return Status::IoError("writing the Perfetto trace failed");
  return summary;
}

}  // namespace replay
