// The walk the Perfetto writers share; see interop/perfetto_walk.h.
#include "interop/perfetto_walk.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/call_site.h"

namespace replay::interop {
namespace {

// A rank's track before lanes: (0, thread) or (1, communicator).
using TrackKey = std::pair<int, uint64_t>;

// What planning keeps of an operation to lay it out.
struct OpSpan {
  int64_t start_ns = 0;
  int64_t end_ns = -1;  // as TimelineOp::end_ns
  uint32_t key = 0;     // into its rank's track keys
};

// What planning keeps of one rank while the others are read.
struct RankSpans {
  std::vector<OpSpan> ops;  // by ordinal
  std::vector<TrackKey> keys;
  std::map<TrackKey, uint32_t> key_index;
};

// A caller of a collective, or one side of a message.
struct Caller {
  uint64_t comm = 0;
  uint64_t seq = 0;
  int64_t start_ns = 0;
  uint64_t ordinal = 0;
  int32_t rank = 0;  // world rank until laid out, then into Timeline::ranks
  int32_t track = 0;
};
struct MessageSide {
  MessageKey key{};
  int64_t start_ns = 0;
  uint64_t ordinal = 0;
  int32_t rank = 0;
  int32_t track = 0;
};

int64_t EndOf(const RankTimeline& r, int64_t start_ns, int64_t end_ns) {
  return std::max(start_ns, end_ns >= 0 ? end_ns : r.end_ns);
}

// Every operation's lane, whatever the window, so that a window puts each one
// where the whole trace does.
PerfettoRankPlan LayOut(const Timeline& tl, const RankTimeline& r, const RankSpans& spans, int64_t window_from,
                        int64_t window_to, uint64_t* left_out) {
  PerfettoRankPlan layout;
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
  for (const TrackKey& key : spans.keys) {
    if (key.first == 1) comms.emplace_back(tl.CommName(key.second), key.second);
  }
  std::sort(comms.begin(), comms.end());
  for (const auto& c : comms) lane_for({1, c.second}, INT64_MIN, INT64_MIN);

  std::vector<uint32_t> order(spans.ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return spans.ops[a].start_ns < spans.ops[b].start_ns; });
  layout.track.assign(spans.ops.size(), 0);
  layout.used.assign(layout.tracks.size() + 1, false);
  for (uint32_t i : order) {
    const OpSpan& o = spans.ops[i];
    const int64_t end = EndOf(r, o.start_ns, o.end_ns);
    const int32_t track = lane_for(spans.keys[o.key], o.start_ns, end);
    if (layout.used.size() <= static_cast<size_t>(track)) layout.used.resize(static_cast<size_t>(track) + 1, false);
    if (o.start_ns > window_to || end < window_from) {
      ++*left_out;
      continue;
    }
    layout.track[i] = track;
    layout.used[static_cast<size_t>(track)] = true;
  }
  // Instants go on their thread's first track.
  for (size_t k = 0; k < r.instants.size(); ++k) {
    const TimelineInstant& in = r.instants[k];
    if (in.time_ns < window_from || in.time_ns > window_to) continue;
    auto lanes = lanes_of.find({0, in.thread});
    const int32_t track = lanes != lanes_of.end() ? lanes->second.front().track : 0;
    layout.instants.emplace_back(track, k);
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
void DescribeSlice(const Timeline& tl, const RankTimeline& r, const TimelineOp& o, int32_t track, std::string_view site,
                   PerfettoSlice* s) {
  const bool ended = o.end_ns >= 0;
  s->op = &o;
  s->track = track;
  s->name = SliceName(tl, o, ended);
  s->category = o.collective() ? "collective" : o.point_to_point() ? "p2p" : "call";
  s->start_ns = o.start_ns;
  s->end_ns = EndOf(r, o.start_ns, o.end_ns);
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
  if (!site.empty()) args.push_back({"site", site});
}

std::span<const uint64_t> ArrowsAt(const PerfettoArrowIndex& index, uint64_t ordinal, std::vector<uint64_t>* ids) {
  ids->clear();
  auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(ordinal, uint64_t{0}));
  for (; it != index.end() && it->first == ordinal; ++it) ids->push_back(it->second);
  return *ids;
}

// Drops what a vector holds, capacity included.
template <typename T>
void Release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

}  // namespace

Result<PerfettoPlan> PlanPerfetto(const TraceReader& trace, const PerfettoOptions& options) {
  PerfettoPlan plan;
  plan.trace = &trace;
  plan.ranks = options.ranks;

  // One read of every rank: spans to lay out, the callers of collectives and
  // the sides of messages to join, and when each finding of `around` happened.
  std::unordered_map<int32_t, RankSpans> spans;
  std::vector<Caller> callers;
  std::vector<MessageSide> sends;
  std::vector<MessageSide> receives;
  std::vector<std::optional<int64_t>> when(options.around.size());
  TimelineOptions timeline_options;
  timeline_options.ranks = options.ranks;
  timeline_options.progress = options.progress;
  timeline_options.sink = [&](int32_t rank, const TimelineOp& o) {
    RankSpans& s = spans[rank];
    const TrackKey key = o.comm != 0 ? TrackKey{1, o.comm} : TrackKey{0, o.thread};
    auto [k, added] = s.key_index.emplace(key, static_cast<uint32_t>(s.keys.size()));
    if (added) s.keys.push_back(key);
    if (s.ops.size() <= o.ordinal) s.ops.resize(o.ordinal + 1);
    s.ops[o.ordinal] = {o.start_ns, o.end_ns, k->second};
    if (options.flows) {
      if (o.collective()) {
        callers.push_back({o.comm, o.seq, o.start_ns, o.ordinal, rank, 0});
      } else if (o.point_to_point() && o.peer >= 0 && o.peer_seq != 0) {
        if (o.is_send) {
          sends.push_back({{o.comm, rank, o.peer, o.peer_seq}, o.start_ns, o.ordinal, rank, 0});
        } else {
          receives.push_back({{o.comm, o.peer, rank, o.peer_seq}, o.start_ns, o.ordinal, rank, 0});
        }
      }
    }
    for (size_t i = 0; i < options.around.size(); ++i) {
      if (FindingIsAbout(options.around[i], rank, o)) when[i] = when[i] ? std::min(*when[i], o.start_ns) : o.start_ns;
    }
  };
  REPLAY_ASSIGN_OR_RETURN(plan.timeline, BuildTimeline(trace, timeline_options));
  const Timeline& tl = plan.timeline;

  if (options.around.empty()) {
    plan.window = options.window;
  } else {
    for (size_t i = 0; i < options.around.size() && !plan.window; ++i) {
      std::optional<int64_t> at = FindingTime(tl, options.around[i], when[i]);
      if (!at) continue;
      const int64_t centre = *at - tl.start_ns;
      plan.window = PerfettoWindow{std::max<int64_t>(0, centre - options.around_ns / 2), centre + options.around_ns / 2};
      plan.finding = static_cast<int>(i);
    }
    if (!plan.window) {
      const size_t n = options.around.size();
      return Status::NotFound(std::string(n == 1 ? "the finding" : "none of the " + std::to_string(n) + " findings") +
                              " happened at a moment the trace shows (" + (n == 1 ? "it is" : "they are") +
                              " about the job as a whole, e.g. configuration or a straggler)");
    }
  }
  // The window in absolute nanoseconds, as the timeline counts.
  const std::optional<PerfettoWindow>& window = plan.window;
  const int64_t window_from = window ? tl.start_ns + window->start_ns : INT64_MIN;
  const int64_t window_to =
      window && window->end_ns <= INT64_MAX - tl.start_ns ? tl.start_ns + window->end_ns : INT64_MAX;

  // Lanes, rank by rank; the spans go as each rank is laid out.
  std::unordered_map<int32_t, int32_t> index_of;  // world rank -> into tl.ranks
  plan.layouts.reserve(tl.ranks.size());
  for (size_t ri = 0; ri < tl.ranks.size(); ++ri) {
    const RankTimeline& r = tl.ranks[ri];
    index_of[r.rank] = static_cast<int32_t>(ri);
    RankSpans& s = spans[r.rank];
    plan.layouts.push_back(LayOut(tl, r, s, window_from, window_to, &plan.left_out));
    spans.erase(r.rank);
  }
  // Each side where it was drawn; those outside the window join nothing.
  auto place = [&](auto& sides) {
    size_t kept = 0;
    for (auto& side : sides) {
      const int32_t ri = index_of.at(side.rank);
      const std::vector<int32_t>& track = plan.layouts[static_cast<size_t>(ri)].track;
      if (side.ordinal >= track.size() || track[side.ordinal] == 0) continue;
      side.rank = ri;
      side.track = track[side.ordinal];
      sides[kept++] = side;
    }
    sides.resize(kept);
    sides.shrink_to_fit();
  };
  place(callers);
  place(sends);
  place(receives);

  // Arrows: from the first caller of a collective (by start, then rank, then
  // call order) to each other caller, then from each send to its receive.
  auto anchor = [](const auto& side) {
    return PerfettoAnchor{static_cast<uint32_t>(side.rank), side.track, side.ordinal, side.start_ns};
  };
  std::sort(callers.begin(), callers.end(), [](const Caller& a, const Caller& b) {
    return std::tie(a.comm, a.seq, a.start_ns, a.rank, a.ordinal) < std::tie(b.comm, b.seq, b.start_ns, b.rank, b.ordinal);
  });
  for (size_t i = 0; i < callers.size();) {
    size_t j = i + 1;
    while (j < callers.size() && callers[j].comm == callers[i].comm && callers[j].seq == callers[i].seq) {
      plan.arrows.push_back({anchor(callers[i]), anchor(callers[j]), "same collective"});
      ++j;
    }
    i = j;
  }
  Release(callers);
  // A message's send: the last of its key by rank and call order.
  std::sort(sends.begin(), sends.end(), [](const MessageSide& a, const MessageSide& b) {
    return std::tie(a.key, a.rank, a.start_ns, a.ordinal) < std::tie(b.key, b.rank, b.start_ns, b.ordinal);
  });
  std::sort(receives.begin(), receives.end(), [](const MessageSide& a, const MessageSide& b) {
    return std::tie(a.rank, a.start_ns, a.ordinal) < std::tie(b.rank, b.start_ns, b.ordinal);
  });
  for (const MessageSide& to : receives) {
    auto end = std::upper_bound(sends.begin(), sends.end(), to.key,
                                [](const MessageKey& k, const MessageSide& s) { return k < s.key; });
    if (end == sends.begin() || std::prev(end)->key != to.key) continue;
    plan.arrows.push_back({anchor(*std::prev(end)), anchor(to), "message"});
  }
  Release(sends);
  Release(receives);
  for (size_t i = 0; i < plan.arrows.size(); ++i) {
    const PerfettoPlan::Joined& a = plan.arrows[i];
    plan.layouts[a.from.rank].out_of.push_back({a.from.ordinal, i + 1});
    plan.layouts[a.to.rank].into.push_back({a.to.ordinal, i + 1});
  }
  for (PerfettoRankPlan& layout : plan.layouts) {
    std::sort(layout.out_of.begin(), layout.out_of.end());
    std::sort(layout.into.begin(), layout.into.end());
  }
  return plan;
}

Result<PerfettoSummary> WalkPerfetto(PerfettoPlan& plan, PerfettoSink& sink) {
  const Timeline& tl = plan.timeline;
  PerfettoSummary summary;
  summary.window = plan.window;
  summary.finding = plan.finding;
  summary.ranks = tl.ranks.size();
  summary.left_out = plan.left_out;

  std::vector<std::string> apis = tl.apis;
  analysis::SymbolResolver symbols;
  PerfettoSlice slice;
  std::vector<uint64_t> ids_out;
  std::vector<uint64_t> ids_in;
  for (size_t ri = 0; ri < tl.ranks.size(); ++ri) {
    const RankTimeline& r = tl.ranks[ri];
    PerfettoRankPlan& layout = plan.layouts[ri];
    std::vector<PerfettoTrack> shown;
    for (PerfettoTrack& t : layout.tracks) {
      if (!plan.window || layout.used[static_cast<size_t>(t.id)]) shown.push_back(std::move(t));
    }
    sink.BeginRank(r, shown);
    // Call sites resolved once each, Python frames first.
    std::unordered_map<uint64_t, std::string> sites;
    auto SiteOf = [&](uint64_t call_site) -> std::string_view {
      if (call_site == 0) return {};
      auto [at, fresh] = sites.try_emplace(call_site);
      if (fresh) {
        CallSite site = symbols.Resolve(call_site, r.header.modules, r.python_sites);
        if (site.known()) at->second = FormatCallSite(site);
      }
      return at->second;
    };
    TimelineOptions again;
    again.ranks = {r.rank};
    again.sink = [&](int32_t, const TimelineOp& o) {
      if (o.ordinal >= layout.track.size() || layout.track[o.ordinal] == 0) return;
      DescribeSlice(tl, r, o, layout.track[o.ordinal], SiteOf(o.call_site), &slice);
      slice.arrows_out = ArrowsAt(layout.out_of, o.ordinal, &ids_out);
      slice.arrows_in = ArrowsAt(layout.into, o.ordinal, &ids_in);
      sink.Slice(r, slice);
      ++summary.slices;
    };
    REPLAY_RETURN_IF_ERROR(ScanTimelineOps(*plan.trace, again, &apis));
    for (const auto& [track, k] : layout.instants) sink.Instant(r, track, r.instants[k]);
    layout = PerfettoRankPlan{};  // drawn: its memory is not needed again
  }

  for (size_t i = 0; i < plan.arrows.size(); ++i) {
    const PerfettoPlan::Joined& j = plan.arrows[i];
    auto end = [&](const PerfettoAnchor& a) { return PerfettoArrowEnd{tl.ranks[a.rank].rank, a.track, a.time_ns}; };
    sink.Arrow({i + 1, j.name, end(j.from), end(j.to)});
    ++summary.flows;
  }
  return summary;
}

}  // namespace replay::interop
