// The walk the Perfetto writers share; see interop/perfetto_walk.h.
#include "interop/perfetto_walk.h"

#include <algorithm>
#include <map>
#include <utility>

namespace replay::interop {
namespace {

// A rank's track before lanes: (0, thread) or (1, communicator).
using TrackKey = std::pair<int, uint64_t>;

// Where an operation was drawn: enough to start or end an arrow at it.
struct Anchor {
  size_t rank = 0;  // into Timeline::ranks
  size_t op = 0;    // into its ops
  int32_t track = 0;
  int64_t time_ns = 0;
};

// One rank laid out: every operation's lane, whatever the window, so that a
// window puts each one where the whole trace does.
struct RankLayout {
  std::vector<size_t> order;           // ops by start time
  std::vector<int32_t> track;          // per op: its track; 0 outside the window
  std::vector<PerfettoTrack> tracks;   // by id - 1
  std::vector<bool> used;              // by id: shows something
  std::vector<std::pair<int32_t, const TimelineInstant*>> instants;  // in the window, with their track
};

int64_t EndOf(const RankTimeline& r, const TimelineOp& o) {
  return std::max(o.start_ns, o.end_ns >= 0 ? o.end_ns : r.end_ns);
}

RankLayout LayOut(const Timeline& tl, const RankTimeline& r, int64_t window_from, int64_t window_to) {
  RankLayout layout;
  struct Lane {
    int32_t track;
    int64_t end;
  };
  std::map<TrackKey, std::vector<Lane>> lanes_of;
  auto track_name = [&](const TrackKey& key) {
    return key.first == 0 ? "thread " + std::to_string(key.second) : tl.CommName(key.second);
  };
  // The first lane of `key` free at `start`, taken until `end`; a new one if none is.
  auto lane_for = [&](const TrackKey& key, int64_t start, int64_t end) {
    std::vector<Lane>& lanes = lanes_of[key];
    for (Lane& l : lanes) {
      if (l.end <= start) {
        l.end = end;
        return l.track;
      }
    }
    const int32_t id = static_cast<int32_t>(layout.tracks.size()) + 1;
    lanes.push_back({id, end});
    layout.tracks.push_back(
        {id, track_name(key) + (lanes.size() > 1 ? " (" + std::to_string(lanes.size()) + ")" : "")});
    return id;
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

  layout.order.resize(r.ops.size());
  for (size_t i = 0; i < layout.order.size(); ++i) layout.order[i] = i;
  std::stable_sort(layout.order.begin(), layout.order.end(),
                   [&](size_t a, size_t b) { return r.ops[a].start_ns < r.ops[b].start_ns; });
  layout.track.assign(r.ops.size(), 0);
  layout.used.assign(layout.tracks.size() + 1, false);
  for (size_t i : layout.order) {
    const TimelineOp& o = r.ops[i];
    const int64_t end = EndOf(r, o);
    const TrackKey key = o.comm != 0 ? TrackKey{1, o.comm} : TrackKey{0, o.thread};
    const int32_t track = lane_for(key, o.start_ns, end);
    if (layout.used.size() <= static_cast<size_t>(track)) layout.used.resize(static_cast<size_t>(track) + 1, false);
    if (o.start_ns > window_to || end < window_from) continue;
    layout.track[i] = track;
    layout.used[static_cast<size_t>(track)] = true;
  }
  // Instants go on their thread's first track.
  for (const TimelineInstant& in : r.instants) {
    if (in.time_ns < window_from || in.time_ns > window_to) continue;
    auto lanes = lanes_of.find({0, in.thread});
    const int32_t track = lanes != lanes_of.end() ? lanes->second.front().track : 0;
    layout.instants.emplace_back(track, &in);
    if (track != 0) layout.used[static_cast<size_t>(track)] = true;
  }
  return layout;
}

std::string SliceName(const Timeline& tl, const TimelineOp& o, bool ended) {
  std::string s = tl.apis[o.api];
  if (o.collective()) {
    s += " #" + std::to_string(o.seq);
  } else if (o.point_to_point() && o.peer >= 0) {
    s += (o.is_send ? " to " : " from ") + std::to_string(o.peer);
  }
  if (!ended) s += o.return_ns < 0 ? " (never returned)" : " (never completed)";
  return s;
}

// The slice of operation `o` (its arrows are filled in by the caller).
void DescribeSlice(const Timeline& tl, const RankTimeline& r, const TimelineOp& o, int32_t track, PerfettoSlice* s) {
  const bool ended = o.end_ns >= 0;
  s->op = &o;
  s->track = track;
  s->name = SliceName(tl, o, ended);
  s->category = o.collective() ? "collective" : o.point_to_point() ? "p2p" : "call";
  s->start_ns = o.start_ns;
  s->end_ns = EndOf(r, o);
  std::vector<PerfettoArg>& args = s->args;
  args.clear();
  args.push_back({"event", uint64_t{o.index}});
  args.push_back({"thread", uint64_t{o.thread}});
  s->comm = o.comm != 0 ? tl.CommName(o.comm) : std::string();
  if (o.comm != 0) args.push_back({"comm", std::string_view(s->comm)});
  if (o.seq != 0) args.push_back({"seq", uint64_t{o.seq}});
  if (o.point_to_point()) {
    args.push_back({"peer", int64_t{o.peer}});
    args.push_back({"tag", int64_t{o.tag}});
    if (o.peer_seq != 0) args.push_back({"message", uint64_t{o.peer_seq}});
  }
  if (o.count != 0) args.push_back({"count", int64_t{o.count}});
  if (o.dtype != DataType::kUnknown) args.push_back({"dtype", DataTypeName(o.dtype)});
  if (o.bytes != 0) args.push_back({"bytes", uint64_t{o.bytes}});
  if (o.root >= 0 && o.collective()) args.push_back({"root", int64_t{o.root}});
  if (o.rc != 0) args.push_back({"rc", int64_t{o.rc}});
  args.push_back({"state", std::string_view(ended ? "completed" : o.return_ns < 0 ? "never returned" : "never completed")});
  if (o.nonblocking && o.return_ns >= 0) {
    args.push_back({"returned_us", static_cast<double>(o.return_ns - tl.start_ns) / 1000.0});
  }
}

// Arrow ids by the operation they start or end at, sorted by operation.
using ArrowIndex = std::vector<std::pair<size_t, uint64_t>>;

std::span<const uint64_t> ArrowsAt(const ArrowIndex& index, size_t op, std::vector<uint64_t>* ids) {
  ids->clear();
  auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(op, uint64_t{0}));
  for (; it != index.end() && it->first == op; ++it) ids->push_back(it->second);
  return *ids;
}

}  // namespace

Result<PerfettoPlan> PlanPerfetto(const TraceReader& trace, const PerfettoOptions& options) {
  TimelineOptions timeline_options;
  timeline_options.ranks = options.ranks;
  timeline_options.progress = options.progress;
  PerfettoPlan plan;
  REPLAY_ASSIGN_OR_RETURN(plan.timeline, BuildTimeline(trace, timeline_options));
  const Timeline& tl = plan.timeline;
  if (options.around.empty()) {
    plan.window = options.window;
    return plan;
  }
  for (size_t i = 0; i < options.around.size() && !plan.window; ++i) {
    std::optional<int64_t> when = FindingTime(tl, options.around[i]);
    if (!when) continue;
    const int64_t centre = *when - tl.start_ns;
    plan.window = PerfettoWindow{std::max<int64_t>(0, centre - options.around_ns / 2), centre + options.around_ns / 2};
    plan.finding = static_cast<int>(i);
  }
  if (!plan.window) {
    const size_t n = options.around.size();
    return Status::NotFound(std::string(n == 1 ? "the finding" : "none of the " + std::to_string(n) + " findings") +
                            " happened at a moment the trace shows (" + (n == 1 ? "it is" : "they are") +
                            " about the job as a whole, e.g. configuration or a straggler)");
  }
  return plan;
}

PerfettoSummary WalkPerfetto(const PerfettoPlan& plan, bool arrows, PerfettoSink& sink) {
  const Timeline& tl = plan.timeline;
  const std::optional<PerfettoWindow>& window = plan.window;
  PerfettoSummary summary;
  summary.window = window;
  summary.finding = plan.finding;
  summary.ranks = tl.ranks.size();
  // The window in absolute nanoseconds, as the timeline counts.
  const int64_t window_from = window ? tl.start_ns + window->start_ns : INT64_MIN;
  const int64_t window_to =
      window && window->end_ns <= INT64_MAX - tl.start_ns ? tl.start_ns + window->end_ns : INT64_MAX;

  // Every rank is laid out, and its operations in the window matched, before
  // anything is drawn.
  std::vector<RankLayout> layouts;
  layouts.reserve(tl.ranks.size());
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Anchor>> collectives;  // (comm, seq) -> callers
  std::map<MessageKey, Anchor> sends;
  std::vector<std::pair<Anchor, MessageKey>> receives;
  for (size_t ri = 0; ri < tl.ranks.size(); ++ri) {
    const RankTimeline& r = tl.ranks[ri];
    layouts.push_back(LayOut(tl, r, window_from, window_to));
    const RankLayout& layout = layouts.back();
    for (size_t i : layout.order) {
      const TimelineOp& o = r.ops[i];
      if (layout.track[i] == 0) {
        ++summary.left_out;
        continue;
      }
      const Anchor a{ri, i, layout.track[i], o.start_ns};
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
  }

  // Arrows: from the first caller of a collective to each other caller, and
  // from each send to its receive.
  struct Joined {
    Anchor from;
    Anchor to;
    const char* name;
  };
  std::vector<Joined> joined;
  if (arrows) {
    for (auto& [key, callers] : collectives) {
      if (callers.size() < 2) continue;
      std::stable_sort(callers.begin(), callers.end(),
                       [](const Anchor& a, const Anchor& b) { return a.time_ns < b.time_ns; });
      for (size_t i = 1; i < callers.size(); ++i) joined.push_back({callers.front(), callers[i], "same collective"});
    }
    for (const auto& [to, key] : receives) {
      auto it = sends.find(key);
      if (it != sends.end()) joined.push_back({it->second, to, "message"});
    }
  }
  collectives.clear();
  sends.clear();
  receives.clear();
  std::vector<ArrowIndex> out_of(tl.ranks.size());
  std::vector<ArrowIndex> into(tl.ranks.size());
  for (size_t i = 0; i < joined.size(); ++i) {
    out_of[joined[i].from.rank].push_back({joined[i].from.op, i + 1});
    into[joined[i].to.rank].push_back({joined[i].to.op, i + 1});
  }
  for (ArrowIndex& index : out_of) std::sort(index.begin(), index.end());
  for (ArrowIndex& index : into) std::sort(index.begin(), index.end());

  PerfettoSlice slice;
  std::vector<uint64_t> ids_out;
  std::vector<uint64_t> ids_in;
  for (size_t ri = 0; ri < tl.ranks.size(); ++ri) {
    const RankTimeline& r = tl.ranks[ri];
    RankLayout& layout = layouts[ri];
    std::vector<PerfettoTrack> shown;
    for (PerfettoTrack& t : layout.tracks) {
      if (!window || layout.used[static_cast<size_t>(t.id)]) shown.push_back(std::move(t));
    }
    sink.BeginRank(r, shown);
    for (size_t i : layout.order) {
      if (layout.track[i] == 0) continue;
      DescribeSlice(tl, r, r.ops[i], layout.track[i], &slice);
      slice.arrows_out = ArrowsAt(out_of[ri], i, &ids_out);
      slice.arrows_in = ArrowsAt(into[ri], i, &ids_in);
      sink.Slice(r, slice);
      ++summary.slices;
    }
    for (const auto& [track, instant] : layout.instants) sink.Instant(r, track, *instant);
    layout = RankLayout{};  // drawn: its memory is not needed again
  }

  for (size_t i = 0; i < joined.size(); ++i) {
    const Joined& j = joined[i];
    auto end = [&](const Anchor& a) {
      return PerfettoArrowEnd{tl.ranks[a.rank].rank, a.track, a.time_ns};
    };
    sink.Arrow({i + 1, j.name, end(j.from), end(j.to)});
    ++summary.flows;
  }
  return summary;
}

}  // namespace replay::interop
