#include "interop/timeline.h"

#include <string.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "analysis/comm_lineage.h"
#include "replay/event_format.h"

namespace replay::interop {
namespace {

// Walks a rank's events into operations. An operation is held while it is
// under way and handed on when it ends (its call returned, or the wait that
// completed it), or at the end of the walk when it never did: to `sink` when
// there is one, else into the rank's ops when `keep` takes its ordinal. The
// ops are then put in call order.
class RankScan {
 public:
  RankScan(const RankReader& reader, std::vector<std::string>* apis, std::unordered_map<std::string, uint32_t>* api_index,
           analysis::CommLineage* lineage, const TimelineKeep* keep = nullptr, const TimelineSink* sink = nullptr)
      : reader_(reader), apis_(*apis), api_index_(*api_index), lineage_(*lineage), keep_(keep), sink_(sink) {}

  RankTimeline Run() {
    const RankHeader& h = reader_.header();
    r_.rank = reader_.rank();
    r_.host = h.host;
    r_.pid = h.pid;
    r_.status = std::string(RankStatusName(reader_.status()));
    r_.start_ns = h.start_realtime_ns;
    r_.end_ns = h.start_realtime_ns;
    r_.header = h;
    std::set<uint32_t> threads;
    (void)reader_.ForEachEvent([&](const Event& e) {
      Visit(e, &threads);
      return true;
    });
    if (h.close_realtime_ns > 0) r_.end_ns = std::max(r_.end_ns, h.close_realtime_ns);
    r_.threads.assign(threads.begin(), threads.end());
    r_.op_count = next_ordinal_;
    // What the threads were inside when the trace ends: their calls, and the
    // requests a wait among them waits for.
    std::vector<uint64_t> waited;
    for (const auto& [thread, i] : open_) {
      const TimelineOp& o = live_.at(i);
      if (o.kind != OpKind::kWait) {
        waited.push_back(i);
        continue;
      }
      auto w = wait_requests_.find(thread);
      if (w == wait_requests_.end()) continue;
      for (int64_t request : w->second) {
        auto p = pending_.find(static_cast<uint64_t>(request));
        if (p != pending_.end()) waited.push_back(p->second);
      }
    }
    // What never ended, in call order.
    std::vector<uint64_t> unended;
    for (const auto& [ordinal, o] : live_) unended.push_back(ordinal);
    std::sort(unended.begin(), unended.end());
    for (uint64_t ordinal : unended) Emit(live_.at(ordinal));
    live_.clear();
    std::sort(r_.ops.begin(), r_.ops.end(), [](const TimelineOp& a, const TimelineOp& b) { return a.ordinal < b.ordinal; });
    for (uint64_t ordinal : waited) {
      auto at = std::lower_bound(r_.ops.begin(), r_.ops.end(), ordinal,
                                 [](const TimelineOp& o, uint64_t n) { return o.ordinal < n; });
      if (at != r_.ops.end() && at->ordinal == ordinal) r_.waited.push_back(static_cast<size_t>(at - r_.ops.begin()));
    }
    std::sort(r_.waited.begin(), r_.waited.end());
    r_.waited.erase(std::unique(r_.waited.begin(), r_.waited.end()), r_.waited.end());
    return std::move(r_);
  }

 private:
  void Visit(const Event& e, std::set<uint32_t>* threads_seen) {
      std::set<uint32_t>& threads = *threads_seen;
      r_.end_ns = std::max(r_.end_ns, Abs(e.time_ns));
      switch (e.kind) {
        case EventKind::kOp:
          threads.insert(e.thread);
          OnOp(e);
          break;
        case EventKind::kReturn: OnReturn(e); break;
        case EventKind::kCompletion: OnCompletion(e); break;
        case EventKind::kCommCreate: OnCommCreate(e); break;
        case EventKind::kMark:
          r_.instants.push_back({TimelineInstant::Kind::kMark, e.thread, Abs(e.time_ns),
                                 e.text + "=" + std::to_string(e.mark.value)});
          break;
        case EventKind::kError:
          r_.instants.push_back({TimelineInstant::Kind::kError, e.thread, Abs(e.time_ns),
                                 std::string(ErrorSourceName(e.error.source)) + " error " +
                                     std::to_string(e.error.code) + (e.text.empty() ? "" : ": " + e.text)});
          break;
        case EventKind::kSignal:
          r_.instants.push_back({TimelineInstant::Kind::kSignal, e.thread, Abs(e.time_ns), SignalName(e.signal.signo)});
          break;
        case EventKind::kInfo:
          if (e.info_key() == kPythonSiteKey) {
            if (auto site = DecodePythonSite(e.info_value())) r_.python_sites[site->id] = std::move(*site);
          }
          break;
        default:
          break;
      }
  }

  int64_t Abs(int64_t t) const { return reader_.header().start_realtime_ns + t; }

  uint32_t Api(uint16_t api) {
    std::string name = reader_.header().ApiName(api);
    auto [it, inserted] = api_index_.try_emplace(name, static_cast<uint32_t>(apis_.size()));
    if (inserted) apis_.push_back(name);
    return it->second;
  }

  // World rank of communicator rank `peer` of `comm`.
  int32_t World(uint64_t comm, int32_t peer) const {
    if (peer < 0) return peer;
    auto it = members_.find(comm);
    if (it == members_.end() || static_cast<size_t>(peer) >= it->second.size()) return peer;
    return it->second[static_cast<size_t>(peer)];
  }

  void OnOp(const Event& e) {
    const OpEvent& op = e.op;
    TimelineOp o;
    o.index = e.index;
    o.thread = e.thread;
    o.api = Api(op.api);
    o.kind = op.kind;
    o.nonblocking = (op.flags & op_flags::kNonBlocking) != 0;
    o.is_send = op.kind == OpKind::kSend || op.kind == OpKind::kSendrecv;
    o.comm = op.comm;
    o.seq = IsCollective(op.kind) ? op.seq : 0;
    o.peer = o.point_to_point() && op.peer >= 0 ? World(op.comm, op.peer) : op.peer;
    o.tag = op.tag;
    o.peer_seq = op.peer_seq;
    o.count = op.count;
    o.dtype = op.dtype;
    o.bytes = op.bytes;
    o.recv_count = op.recv_count;
    o.root = op.root;
    o.start_ns = Abs(e.time_ns);
    o.call_site = e.call_site;
    if ((op.flags & op_flags::kInGroup) != 0) o.group = op.group;
    o.ordinal = next_ordinal_++;
    // A call the thread was still inside did not return: it ends unreturned.
    if (auto prev = open_.find(e.thread); prev != open_.end()) {
      auto p = live_.find(prev->second);
      if (p != live_.end()) Finish(p);
    }
    open_[e.thread] = o.ordinal;
    if (op.kind == OpKind::kWait) {
      wait_requests_[e.thread] = e.list;
    } else {
      wait_requests_.erase(e.thread);
    }
    if (o.nonblocking && op.request != 0) request_of_[o.ordinal] = op.request;
    live_.emplace(o.ordinal, o);
  }

  void Emit(const TimelineOp& o) {
    if (sink_ != nullptr && *sink_) {
      (*sink_)(r_.rank, o);
    } else if (keep_ == nullptr || !*keep_ || (*keep_)(r_.rank, o.ordinal)) {
      r_.ops.push_back(o);
    }
  }
  // Hands on a live operation and forgets it.
  void Finish(std::unordered_map<uint64_t, TimelineOp>::iterator it) {
    Emit(it->second);
    live_.erase(it);
  }

  void Matched(TimelineOp& o, int32_t source, uint64_t peer_seq) {
    if (o.is_send || !o.point_to_point()) return;
    if (source >= 0) o.peer = World(o.comm, source);
    if (peer_seq != 0) o.peer_seq = peer_seq;
  }

  void OnReturn(const Event& e) {
    auto it = open_.find(e.thread);
    if (it == open_.end()) return;
    uint64_t i = it->second;
    open_.erase(it);
    auto live = live_.find(i);
    if (live == live_.end()) return;
    TimelineOp& o = live->second;
    o.return_ns = Abs(e.time_ns);
    o.rc = e.ret.rc;
    uint64_t request = e.ret.request;
    if (request == 0) {
      auto r = request_of_.find(i);
      if (r != request_of_.end()) request = r->second;
    }
    request_of_.erase(i);
    if (o.nonblocking && request != 0 && e.ret.rc == 0) {
      // A request used again before its completion was seen: the earlier
      // operation never completed.
      if (auto prev = pending_.find(request); prev != pending_.end()) {
        auto p = live_.find(prev->second);
        if (p != live_.end() && p->first != i) Finish(p);
      }
      pending_[request] = i;
      return;
    }
    o.end_ns = o.return_ns;
    Matched(o, e.ret.source, e.ret.peer_seq);
    Finish(live);
  }

  void OnCompletion(const Event& e) {
    auto it = pending_.find(e.completion.request);
    if (it == pending_.end()) return;
    auto live = live_.find(it->second);
    pending_.erase(it);
    if (live == live_.end()) return;
    TimelineOp& o = live->second;
    o.end_ns = Abs(e.time_ns);
    if (e.completion.rc != 0) o.rc = e.completion.rc;
    if (!e.completion.cancelled) Matched(o, e.completion.source, e.completion.peer_seq);
    Finish(live);
  }

  void OnCommCreate(const Event& e) {
    analysis::CommRecord rec = analysis::CommRecordOf(e, reader_.header());
    members_[rec.id] = rec.members;
    lineage_.Add(rec, reader_.rank());
  }

  const RankReader& reader_;
  std::vector<std::string>& apis_;
  std::unordered_map<std::string, uint32_t>& api_index_;
  analysis::CommLineage& lineage_;
  const TimelineKeep* keep_;
  const TimelineSink* sink_;
  RankTimeline r_;
  uint64_t next_ordinal_ = 0;
  std::unordered_map<uint64_t, TimelineOp> live_;     // ordinal -> op under way
  std::unordered_map<uint32_t, uint64_t> open_;       // thread -> op inside a call
  std::unordered_map<uint64_t, uint64_t> request_of_; // op -> its request, from the call
  std::unordered_map<uint64_t, uint64_t> pending_;    // request -> op
  std::unordered_map<uint64_t, std::vector<int32_t>> members_;
  std::unordered_map<uint32_t, std::vector<int64_t>> wait_requests_;  // thread -> requests of the wait it is in
};

}  // namespace

std::string Timeline::CommName(uint64_t comm) const {
  auto it = comms.find(comm);
  if (it != comms.end()) return it->second.name;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "comm 0x%llx", static_cast<unsigned long long>(comm));
  return buf;
}

namespace {

// Opens each chosen rank as a stream and scans it; `done` gets each scan's result.
// Fails when no rank could be read.
Status ScanRanks(const TraceReader& trace, const TimelineOptions& options, std::vector<std::string>* apis,
                 analysis::CommLineage* lineage, std::vector<std::string>* notes,
                 const std::function<void(RankTimeline)>& done) {
  std::unordered_map<std::string, uint32_t> api_index;
  for (size_t i = 0; i < apis->size(); ++i) api_index.emplace((*apis)[i], static_cast<uint32_t>(i));
  std::set<int32_t> wanted(options.ranks.begin(), options.ranks.end());
  const size_t n = trace.ranks().size();
  ReadProgress progress;
  progress.ranks = n;
  size_t scanned = 0;
  for (size_t i = 0; i < n; ++i) {
    const RankEntry& entry = trace.ranks()[i];
    if (!wanted.empty() && wanted.count(entry.rank) == 0) continue;
    ReadOptions stream;
    stream.stream = true;
    auto reader = trace.OpenRank(i, stream);
    if (!reader.ok()) {
      notes->push_back(entry.name + ": " + reader.status().message());
      continue;
    }
    RankScan scan(**reader, apis, &api_index, lineage, &options.keep, &options.sink);
    done(scan.Run());
    ++scanned;
    progress.ranks_done = i + 1;
    progress.events_done += (*reader)->header().event_count;
    if (options.progress) options.progress(progress);
  }
  if (scanned == 0) return Status::NotFound(trace.dir() + ": no rank to show");
  return Status::Ok();
}

}  // namespace

Result<Timeline> BuildTimeline(const TraceReader& trace, const TimelineOptions& options) {
  Timeline tl;
  analysis::CommLineage lineage;
  std::set<uint64_t> comm_ids;
  TimelineOptions scan = options;
  if (options.sink) {
    // Handed over, not held: their communicators are noted on the way.
    scan.sink = [&](int32_t rank, const TimelineOp& o) {
      if (o.comm != 0) comm_ids.insert(o.comm);
      options.sink(rank, o);
    };
  }
  REPLAY_RETURN_IF_ERROR(ScanRanks(trace, scan, &tl.apis, &lineage, &tl.notes, [&](RankTimeline r) {
    for (const TimelineOp& o : r.ops) {
      if (o.comm != 0) comm_ids.insert(o.comm);
    }
    tl.ranks.push_back(std::move(r));
  }));
  lineage.Finish();
  for (uint64_t id : comm_ids) tl.comms[id] = TimelineComm{lineage.Name(id), lineage.Members(id)};
  std::sort(tl.ranks.begin(), tl.ranks.end(), [](const RankTimeline& a, const RankTimeline& b) { return a.rank < b.rank; });
  tl.start_ns = tl.ranks.front().start_ns;
  tl.end_ns = tl.ranks.front().end_ns;
  for (const RankTimeline& r : tl.ranks) {
    tl.start_ns = std::min(tl.start_ns, r.start_ns);
    tl.end_ns = std::max(tl.end_ns, r.end_ns);
  }
  return tl;
}

Status ScanTimelineOps(const TraceReader& trace, const TimelineOptions& options, std::vector<std::string>* apis) {
  analysis::CommLineage lineage;
  std::vector<std::string> notes;
  return ScanRanks(trace, options, apis, &lineage, &notes, [](RankTimeline) {});
}

RankTimeline ScanRank(const RankReader& reader, std::vector<std::string>* apis) {
  std::unordered_map<std::string, uint32_t> api_index;
  for (size_t i = 0; i < apis->size(); ++i) api_index.emplace((*apis)[i], static_cast<uint32_t>(i));
  analysis::CommLineage lineage;
  RankScan scan(reader, apis, &api_index, &lineage);
  RankTimeline r = scan.Run();
  lineage.Finish();
  std::set<uint64_t> ids;
  for (const TimelineOp& o : r.ops) {
    if (o.comm != 0) ids.insert(o.comm);
  }
  for (uint64_t id : ids) r.comms[id] = TimelineComm{lineage.Name(id), lineage.Members(id)};
  return r;
}

bool FindingIsAbout(const Finding& finding, int32_t rank, const TimelineOp& o) {
  if (finding.comm && finding.seq != 0) return o.collective() && o.comm == finding.comm->id && o.seq == finding.seq;
  if (!finding.ranks.empty() && std::find(finding.ranks.begin(), finding.ranks.end(), rank) == finding.ranks.end()) {
    return false;
  }
  if (finding.kind == FindingKind::kError) return o.rc != 0;
  if (finding.kind == FindingKind::kUnmatchedP2p) return o.point_to_point() && o.end_ns < 0;
  return false;
}

std::vector<OpRef> FindingOps(const Timeline& timeline, const Finding& finding) {
  std::vector<OpRef> ops;
  for (size_t ri = 0; ri < timeline.ranks.size(); ++ri) {
    const RankTimeline& r = timeline.ranks[ri];
    for (size_t k = 0; k < r.ops.size(); ++k) {
      if (FindingIsAbout(finding, r.rank, r.ops[k])) ops.push_back({ri, k});
    }
  }
  return ops;
}

std::optional<int64_t> FindingTime(const Timeline& timeline, const Finding& finding) {
  std::optional<int64_t> earliest_op;
  for (const OpRef& ref : FindingOps(timeline, finding)) {
    const int64_t t = timeline.ranks[ref.rank].ops[ref.op].start_ns;
    earliest_op = earliest_op ? std::min(*earliest_op, t) : t;
  }
  return FindingTime(timeline, finding, earliest_op);
}

std::optional<int64_t> FindingTime(const Timeline& timeline, const Finding& finding,
                                   std::optional<int64_t> earliest_op) {
  std::optional<int64_t> when = earliest_op;
  auto earliest = [&](int64_t t) { when = when ? std::min(*when, t) : t; };
  if (finding.kind == FindingKind::kError && !(finding.comm && finding.seq != 0)) {
    std::set<int32_t> ranks(finding.ranks.begin(), finding.ranks.end());
    for (const RankTimeline& r : timeline.ranks) {
      if (!ranks.empty() && ranks.count(r.rank) == 0) continue;
      for (const TimelineInstant& in : r.instants) {
        if (in.kind != TimelineInstant::Kind::kMark) earliest(in.time_ns);
      }
    }
  }
  return when;
}

}  // namespace replay::interop
