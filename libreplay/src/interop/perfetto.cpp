// Trace Event Format output; see replay/perfetto.h for the layout of tracks.
#include "replay/perfetto.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "interop/timeline.h"
#include "replay/event_format.h"
#include "replay/version.h"
#include "util/json.h"

namespace replay {
namespace {

using interop::Timeline;
using interop::TimelineOp;
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

// Where an operation was drawn: enough to start or end an arrow at it.
struct Anchor {
  int32_t pid;
  int32_t tid;
  double ts;
};

std::string OpName(const Timeline& tl, const TimelineOp& o, bool ended) {
  std::string s = tl.apis[o.api];
  if (o.collective()) {
    s += " #" + std::to_string(o.seq);
  } else if (o.point_to_point() && o.peer >= 0) {
    s += (o.is_send ? " to " : " from ") + std::to_string(o.peer);
  }
  if (!ended) s += o.return_ns < 0 ? " (never returned)" : " (never completed)";
  return s;
}

}  // namespace

Result<PerfettoSummary> WritePerfetto(const TraceReader& trace, std::ostream& out, const PerfettoOptions& options) {
  interop::TimelineOptions timeline_options;
  timeline_options.ranks = options.ranks;
  timeline_options.progress = options.progress;
  REPLAY_ASSIGN_OR_RETURN(Timeline tl, interop::BuildTimeline(trace, timeline_options));
  auto us = [&](int64_t ns) { return static_cast<double>(ns - tl.start_ns) / 1000.0; };

  PerfettoSummary summary;
  std::optional<PerfettoWindow> window;
  if (options.around.empty()) {
    window = options.window;
  } else {
    for (size_t i = 0; i < options.around.size() && !window; ++i) {
      std::optional<int64_t> when = interop::FindingTime(tl, options.around[i]);
      if (!when) continue;
      const int64_t centre = *when - tl.start_ns;
      window = PerfettoWindow{std::max<int64_t>(0, centre - options.around_ns / 2), centre + options.around_ns / 2};
      summary.finding = static_cast<int>(i);
    }
    if (!window) {
      const size_t n = options.around.size();
      return Status::NotFound(std::string(n == 1 ? "the finding" : "none of the " + std::to_string(n) + " findings") +
                              " happened at a moment the trace shows (" + (n == 1 ? "it is" : "they are") +
                              " about the job as a whole, e.g. configuration or a straggler)");
    }
  }
  summary.window = window;
  // The window in absolute nanoseconds, as the timeline counts.
  const int64_t window_from = window ? tl.start_ns + window->start_ns : INT64_MIN;
  const int64_t window_to = window && window->end_ns <= INT64_MAX - tl.start_ns ? tl.start_ns + window->end_ns : INT64_MAX;
  Emitter em(out);
  json other = {{"generator", VersionLine()}, {"trace", trace.dir()}};
  if (trace.manifest()) other["trace_uuid"] = UuidToString(trace.manifest()->trace_uuid);
  if (!tl.notes.empty()) other["notes"] = tl.notes;
  if (window) {
    other["window_s"] = {static_cast<double>(window->start_ns) / 1e9,
                         window->end_ns == INT64_MAX ? json(nullptr) : json(static_cast<double>(window->end_ns) / 1e9)};
    if (summary.finding >= 0) other["window_around"] = options.around[static_cast<size_t>(summary.finding)].title;
  }
  em.Begin(other);

  std::map<std::pair<uint64_t, uint64_t>, std::vector<Anchor>> collectives;  // (comm, seq) -> callers
  std::map<interop::MessageKey, Anchor> sends;
  std::vector<std::pair<Anchor, interop::MessageKey>> receives;

  for (const interop::RankTimeline& r : tl.ranks) {
    const int32_t pid = r.rank;
    std::string pname = "rank " + std::to_string(r.rank);
    if (!r.host.empty()) pname += " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
    em.Event({{"name", "process_name"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
    em.Event({{"name", "process_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", r.rank}}}});
    if (r.status != "complete") {
      em.Event({{"name", "process_labels"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", {{"labels", r.status}}}});
    }

    // Tracks: a thread's calls outside communicators, then one per
    // communicator, each spread over lanes so that slices never overlap.
    struct Lane {
      int32_t tid;
      int64_t end;
    };
    std::map<std::pair<int, uint64_t>, std::vector<Lane>> tracks;  // (0 thread | 1 comm, id) -> lanes
    std::map<int32_t, std::string> tid_names;
    int32_t next_tid = 1;
    auto track_name = [&](const std::pair<int, uint64_t>& key) {
      return key.first == 0 ? "thread " + std::to_string(key.second) : tl.CommName(key.second);
    };
    auto lane_for = [&](const std::pair<int, uint64_t>& key, int64_t start, int64_t end) {
      std::vector<Lane>& lanes = tracks[key];
      for (Lane& l : lanes) {
        if (l.end <= start) {
          l.end = end;
          return l.tid;
        }
      }
      int32_t tid = next_tid++;
      lanes.push_back({tid, end});
      tid_names[tid] = track_name(key) + (lanes.size() > 1 ? " (" + std::to_string(lanes.size()) + ")" : "");
      return tid;
    };
    // Tracks are created in a stable order: threads, then communicators by name.
    for (uint32_t t : r.threads) lane_for({0, t}, INT64_MIN, INT64_MIN);
    std::vector<std::pair<std::string, uint64_t>> comms;
    for (const TimelineOp& o : r.ops) {
      if (o.comm != 0) comms.emplace_back(tl.CommName(o.comm), o.comm);
    }
    std::sort(comms.begin(), comms.end());
    comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
    for (const auto& c : comms) lane_for({1, c.second}, INT64_MIN, INT64_MIN);

    std::vector<size_t> order(r.ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto end_of = [&](const TimelineOp& o) {
      return std::max(o.start_ns, o.end_ns >= 0 ? o.end_ns : r.end_ns);
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return r.ops[a].start_ns < r.ops[b].start_ns;
    });
    std::vector<json> slices;
    slices.reserve(r.ops.size());
    std::set<int32_t> used;  // tracks that show something
    for (size_t i : order) {
      const TimelineOp& o = r.ops[i];
      const bool ended = o.end_ns >= 0;
      const int64_t end = end_of(o);
      std::pair<int, uint64_t> key = o.comm != 0 ? std::make_pair(1, o.comm) : std::make_pair(0, uint64_t{o.thread});
      // Lanes are taken whether the operation is shown or not, so that a
      // window puts each one where the whole trace does.
      int32_t tid = lane_for(key, o.start_ns, end);
      if (o.start_ns > window_to || end < window_from) {
        ++summary.left_out;
        continue;
      }
      used.insert(tid);
      json args = {{"event", o.index}, {"thread", o.thread}};
      if (o.comm != 0) args["comm"] = tl.CommName(o.comm);
      if (o.seq != 0) args["seq"] = o.seq;
      if (o.point_to_point()) {
        args["peer"] = o.peer;
        args["tag"] = o.tag;
        if (o.peer_seq != 0) args["message"] = o.peer_seq;
      }
      if (o.count != 0) args["count"] = o.count;
      if (o.dtype != DataType::kUnknown) args["dtype"] = std::string(DataTypeName(o.dtype));
      if (o.bytes != 0) args["bytes"] = o.bytes;
      if (o.root >= 0 && o.collective()) args["root"] = o.root;
      if (o.rc != 0) args["rc"] = o.rc;
      args["state"] = ended ? "completed" : o.return_ns < 0 ? "never returned" : "never completed";
      if (o.nonblocking && o.return_ns >= 0) args["returned_us"] = us(o.return_ns);
      const char* cat = o.collective() ? "collective" : o.point_to_point() ? "p2p" : "call";
      slices.push_back({{"name", OpName(tl, o, ended)}, {"cat", cat}, {"ph", "X"}, {"ts", us(o.start_ns)},
                        {"dur", static_cast<double>(end - o.start_ns) / 1000.0}, {"pid", pid}, {"tid", tid},
                        {"args", std::move(args)}});
      Anchor a{pid, tid, us(o.start_ns)};
      if (o.collective()) {
        collectives[{o.comm, o.seq}].push_back(a);
      } else if (o.point_to_point() && o.peer >= 0 && o.peer_seq != 0) {
        if (o.is_send) {
          sends[{o.comm, r.rank, o.peer, o.peer_seq}] = a;
        } else {
          receives.push_back({a, {o.comm, o.peer, r.rank, o.peer_seq}});
        }
      }
    }
    // Instants go on their thread's first track.
    std::vector<std::pair<int32_t, const interop::TimelineInstant*>> instants;
    for (const interop::TimelineInstant& in : r.instants) {
      if (in.time_ns < window_from || in.time_ns > window_to) continue;
      auto lanes = tracks.find({0, in.thread});
      int32_t tid = lanes != tracks.end() ? lanes->second.front().tid : 0;
      instants.emplace_back(tid, &in);
      used.insert(tid);
    }
    for (const auto& [tid, name] : tid_names) {
      if (window && used.count(tid) == 0) continue;
      em.Event({{"name", "thread_name"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
      em.Event({{"name", "thread_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    }
    for (const json& s : slices) em.Event(s);
    summary.slices += slices.size();
    for (const auto& [tid, instant] : instants) {
      const interop::TimelineInstant& in = *instant;
      const char* cat = in.kind == interop::TimelineInstant::Kind::kMark    ? "mark"
                        : in.kind == interop::TimelineInstant::Kind::kError ? "error"
                                                                            : "signal";
      em.Event({{"name", in.text}, {"cat", cat}, {"ph", "i"}, {"s", in.kind == interop::TimelineInstant::Kind::kMark ? "t" : "p"},
                {"ts", us(in.time_ns)}, {"pid", pid}, {"tid", tid}});
    }
  }

  if (options.flows) {
    uint64_t id = 1;
    auto arrow = [&](const Anchor& from, const Anchor& to, const char* name) {
      em.Event({{"name", name}, {"cat", "flow"}, {"ph", "s"}, {"id", id}, {"ts", from.ts}, {"pid", from.pid}, {"tid", from.tid}});
      em.Event({{"name", name}, {"cat", "flow"}, {"ph", "f"}, {"bp", "e"}, {"id", id}, {"ts", to.ts}, {"pid", to.pid}, {"tid", to.tid}});
      ++id;
      ++summary.flows;
    };
    for (auto& [key, callers] : collectives) {
      if (callers.size() < 2) continue;
      std::stable_sort(callers.begin(), callers.end(), [](const Anchor& a, const Anchor& b) { return a.ts < b.ts; });
      for (size_t i = 1; i < callers.size(); ++i) arrow(callers.front(), callers[i], "same collective");
    }
    for (const auto& [to, key] : receives) {
      auto it = sends.find(key);
      if (it != sends.end()) arrow(it->second, to, "message");
    }
  }
  em.End();
  summary.events = em.count();
  summary.ranks = tl.ranks.size();
  if (!out) return Status::IoError("writing the Perfetto trace failed");
  return summary;
}

}  // namespace replay
