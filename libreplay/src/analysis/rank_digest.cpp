#include "analysis/rank_digest.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "trace/format.h"
#include "util/hash.h"

namespace replay::analysis {
namespace {

uint64_t HashString(std::string_view s) { return Hash64(s.data(), s.size(), 0x5a17); }

uint64_t HashCounts(const std::vector<int64_t>& list) {
  return list.empty() ? 0 : Hash64(list.data(), list.size() * sizeof(int64_t));
}

// What must agree across ranks, per kind (see CollSignature). MPI matches
// collectives by type signature, so a count in a derived type is compared as
// bytes by the checker; both are kept here.
CollSignature Signature(const OpEvent& op, const std::vector<int64_t>& list, uint64_t api_hash) {
  CollSignature s;
  s.kind = op.kind;
  s.nonblocking = (op.flags & op_flags::kNonBlocking) != 0;
  auto with_type = [&] {
    s.dtype = op.dtype;
    s.count = op.count;
    s.bytes = op.bytes;
  };
  switch (op.kind) {
    case OpKind::kBarrier:
    case OpKind::kCommFree:
      break;
    case OpKind::kCommCreate:
      s.api = api_hash;
      break;
    case OpKind::kBcast:
      with_type();
      s.root = op.root;
      break;
    case OpKind::kReduce:
      with_type();
      s.redop = op.redop;
      s.root = op.root;
      break;
    case OpKind::kAllreduce:
    case OpKind::kScan:
    case OpKind::kExscan:
    case OpKind::kReduceScatterBlock:
      with_type();
      s.redop = op.redop;
      break;
    case OpKind::kReduceScatter:
      with_type();
      s.redop = op.redop;
      s.counts_hash = HashCounts(list);
      break;
    case OpKind::kGather:
      with_type();
      s.root = op.root;
      break;
    case OpKind::kGatherv:
      s.dtype = op.dtype;
      s.root = op.root;
      break;
    case OpKind::kAllgather:
    case OpKind::kAlltoall:
      with_type();
      s.recv_count = op.recv_count;
      break;
    case OpKind::kAllgatherv:
      s.dtype = op.dtype;
      s.counts_hash = HashCounts(list);
      break;
    case OpKind::kScatter:
      s.recv_count = op.recv_count;
      s.recv_dtype = op.recv_dtype;
      s.root = op.root;
      break;
    case OpKind::kScatterv:
      s.recv_dtype = op.recv_dtype;
      s.root = op.root;
      break;
    case OpKind::kAlltoallv:
      s.dtype = op.dtype;
      break;
    default:  // alltoallw, neighbourhood collectives: the kind alone
      break;
  }
  return s;
}

// A key for "the same call in the program" that survives address-space
// randomisation: the module-relative call site and the API.
class SiteKeys {
 public:
  explicit SiteKeys(const RankHeader& header) {
    for (const Module& m : header.modules) mods_.push_back({m.base, m.size, HashString(m.path)});
    std::sort(mods_.begin(), mods_.end(), [](const Mod& a, const Mod& b) { return a.base < b.base; });
    api_hash_.resize(header.api_names.size());
    for (size_t i = 0; i < header.api_names.size(); ++i) api_hash_[i] = HashString(header.api_names[i]);
  }
  uint64_t Api(uint16_t api) const { return api < api_hash_.size() ? api_hash_[api] : api; }
  uint64_t Key(const Event& e, OpKind kind, uint16_t api) const {
    uint64_t site = 0;
    if (e.call_site != 0) {
      auto it = std::upper_bound(mods_.begin(), mods_.end(), e.call_site,
                                 [](uint64_t a, const Mod& m) { return a < m.base; });
      if (it != mods_.begin() && e.call_site - (it - 1)->base < (it - 1)->size) {
        site = HashCombine((it - 1)->path_hash, e.call_site - (it - 1)->base);
      } else {
        site = e.call_site;
      }
    }
    return HashCombine(HashCombine(site, Api(api)), static_cast<uint64_t>(kind));
  }

 private:
  struct Mod {
    uint64_t base, size, path_hash;
  };
  std::vector<Mod> mods_;
  std::vector<uint64_t> api_hash_;
};

constexpr size_t kRecentTransitions = 8;

// What a pending request is.
struct Pending {
  int64_t coll = -1;  // index into collectives, or -1 for point-to-point
  OpenCall call;
  bool input_fingerprinted = false;  // the op event carried what it sent
  bool captured = false;             // into a CUDA graph: it completes at the graph's launches
};

class Scanner {
 public:
  Scanner(const RankReader& reader, const DigestOptions& options, RankDigest* d)
      : reader_(reader), options_(options), d_(*d), sites_(reader.header()) {}

  // Walks the rank's events (decoding them as it goes, for a reader opened
  // to stream) and returns what the walk saw.
  EventWalk Run() {
    std::function<bool(const Event&)> visit = [this](const Event& e) {
      Visit(e);
      return true;
    };
    if (options_.progress != nullptr) visit = options_.progress->Counting(std::move(visit));
    auto walk = reader_.ForEachEvent(visit);
    Finish();
    return walk.ok() ? *walk : EventWalk{};
  }

 private:
  struct CommInfo {
    int32_t size = 0;
    int32_t rank = -1;
    std::vector<int32_t> members;
  };
  struct Thread {
    std::optional<Event> open;    // an op awaiting its return (a copy: a walk passes events by)
    int64_t coll = -1;            // its collective entry, if it is a blocking one
    uint64_t last_comm = 0, last_seq = 0;    // its last blocking collective
    uint64_t other_comm = 0, other_seq = 0;  // the last one before on another communicator
    uint64_t prev_key = 0;                   // its previous call (SiteKeys::Key); 0 none
  };

  // Consecutive calls are mostly on one communicator: the last lookup is kept.
  const CommInfo* Comm(uint64_t id) const {
    if (id == cached_comm_id_ && cached_comm_ != nullptr) return cached_comm_;
    auto it = comms_.find(id);
    if (it == comms_.end()) return nullptr;
    cached_comm_id_ = id;
    cached_comm_ = &it->second;
    return cached_comm_;
  }
  Thread& ThreadOf(uint32_t thread) {
    if (cached_thread_ == nullptr || thread != cached_thread_id_) {
      cached_thread_id_ = thread;
      cached_thread_ = &threads_[thread];
    }
    return *cached_thread_;
  }
  // World rank of `peer` (a rank in `comm`); the comm rank itself when the
  // communicator's members are unknown.
  int32_t World(uint64_t comm, int32_t peer) const {
    if (peer < 0) return peer;
    const CommInfo* c = Comm(comm);
    if (c == nullptr || static_cast<size_t>(peer) >= c->members.size()) return peer;
    return c->members[static_cast<size_t>(peer)];
  }
  P2pChannel& Channel(uint64_t comm, int32_t peer, bool send) {
    uint64_t key = HashCombine(HashCombine(comm, static_cast<uint64_t>(static_cast<uint32_t>(peer))), send);
    auto [it, inserted] = channel_index_.emplace(key, d_.channels.size());
    if (inserted) {
      P2pChannel ch;
      ch.comm = comm;
      ch.peer = peer;
      ch.send = send;
      d_.channels.push_back(std::move(ch));
    }
    return d_.channels[it->second];
  }
  void CountMessage(uint64_t comm, int32_t world_peer, bool send, uint64_t peer_seq, int32_t tag) {
    if (world_peer < 0) return;
    P2pChannel& ch = Channel(comm, world_peer, send);
    ch.count = std::max(ch.count + (peer_seq == 0 ? 1 : 0), peer_seq);
    ++ch.by_tag[tag];
  }

  OpenCall CallOf(const Event& e) const {
    const OpEvent& op = e.op;
    OpenCall c;
    c.api = op.api;
    c.kind = op.kind;
    c.comm = op.comm;
    c.seq = op.seq;
    c.peer = op.peer == kAnySource ? kAnySource : World(op.comm, op.peer);
    c.tag = op.tag;
    c.peer_seq = op.peer_seq;
    c.nonblocking = (op.flags & op_flags::kNonBlocking) != 0;
    c.is_send = op.kind == OpKind::kSend || op.kind == OpKind::kSendrecv;
    c.enter_ns = e.time_ns;
    c.call_site = e.call_site;
    return c;
  }

  // Pairs of consecutive calls of one thread (threads interleave at random).
  void NoteTransition(const Event& e, Thread& t) {
    uint64_t key = sites_.Key(e, e.op.kind, e.op.api) | 1;  // never 0
    if (t.prev_key != 0) {
      uint64_t pair = HashCombine(t.prev_key, key);
      ++d_.transitions[pair];
      recent_[recent_count_++ % kRecentTransitions] = pair;
    }
    t.prev_key = key;
  }

  void Visit(const Event& e) {
    if (auto h = NamedPayload(e)) d_.payload_refs.push_back(*h);
    switch (e.kind) {
      case EventKind::kOp: OnOp(e); break;
      case EventKind::kReturn: OnReturn(e); break;
      case EventKind::kCompletion: OnCompletion(e); break;
      case EventKind::kCommCreate: OnCommCreate(e); break;
      case EventKind::kError: OnError(e); break;
      case EventKind::kCuda: OnCuda(e); break;
      case EventKind::kSignal:
        if (e.signal.fatal && d_.fatal_signal == 0) {
          d_.fatal_signal = e.signal.signo;
          d_.signal_address = e.signal.address;
          d_.signal_ns = e.time_ns;
        }
        break;
      case EventKind::kMark:
        d_.last_mark = e.text + "=" + std::to_string(e.mark.value);
        break;
      case EventKind::kInfo:
        if (e.info_key().substr(0, 4) == "mpi.") {
          d_.info.emplace_back(std::string(e.info_key()), std::string(e.info_value()));
        } else if (e.info_key() == kPythonSiteKey) {
          if (auto site = DecodePythonSite(e.info_value())) d_.python_sites[site->id] = std::move(*site);
        }
        break;
      default:
        break;
    }
  }

  // The first NaN/Inf this rank sent before it had received any: where it
  // entered the job, if this rank is where it did.
  void NoteSentNonFinite(const OpenCall& call, uint32_t nan, uint32_t inf) {
    if (nan == 0 && inf == 0) return;
    NanOrigin n = Origin(call, nan, inf);
    if (nan_sent_to_.insert(HashCombine(n.comm, static_cast<uint64_t>(static_cast<uint32_t>(n.peer)))).second) {
      d_.nan_sent.push_back(n);
    }
    if (received_nan_ || d_.nan_origin) return;
    d_.nan_origin = std::move(n);
  }

  // A received buffer's NaN/Inf counts: one seen, or counted on a sample.
  void NoteReceived(uint16_t flags, uint32_t nan, uint32_t inf) {
    if (nan != 0 || inf != 0) received_nan_ = true;
    if ((flags & op_flags::kRecvSampled) != 0) sampled_receive_ = true;
  }

  NanOrigin Origin(const OpenCall& call, uint32_t nan, uint32_t inf) const {
    NanOrigin n;
    n.comm = call.comm;
    n.seq = IsCollective(call.kind) ? call.seq : 0;
    n.peer = IsCollective(call.kind) ? kNoPeer : call.peer;
    n.api = call.api;
    n.nan = nan;
    n.inf = inf;
    n.time_ns = call.enter_ns;
    n.call_site = call.call_site;
    n.mark = d_.last_mark;
    n.after_sampled_receive = sampled_receive_;
    return n;
  }

  void OnOp(const Event& e) {
    const OpEvent& op = e.op;
    Thread& t = ThreadOf(e.thread);
    NoteTransition(e, t);
    t.open = e;
    t.coll = -1;
    d_.last_call = CallOf(e);
    d_.last_call_returned = false;
    if (op.kind == OpKind::kAbort) d_.aborted = true;
    if (op.kind == OpKind::kInit) d_.mpi_init = true;
    if (op.kind == OpKind::kFinalize) d_.mpi_finalize = true;
    const bool nonblocking = (op.flags & op_flags::kNonBlocking) != 0;

    if ((op.flags & op_flags::kHasSendHash) != 0 && (op.send_nan != 0 || op.send_inf != 0)) {
      NoteSentNonFinite(CallOf(e), op.send_nan, op.send_inf);
    }

    if (IsCollective(op.kind) && op.comm != 0 && op.seq != 0) {
      CollEntry c;
      c.comm = op.comm;
      c.seq = op.seq;
      c.sig = Signature(op, e.list, sites_.Api(op.api));
      c.sig_hash = HashSignature(c.sig);
      uint64_t site = e.call_site != 0 ? e.call_site : sites_.Api(op.api);
      auto [it, fresh] = last_sig_at_site_.try_emplace(HashCombine(site, op.comm), c.sig_hash);
      c.sig_changed = !fresh && it->second != c.sig_hash;
      it->second = c.sig_hash;
      c.blocking = !nonblocking;
      c.state = CallState::kPending;
      c.api = op.api;
      c.call_site = e.call_site;
      c.enter_ns = e.time_ns;
      if (op.kind == OpKind::kBcast && (op.flags & op_flags::kHasSendHash) != 0) {
        const CommInfo* ci = Comm(op.comm);
        if (ci != nullptr && ci->rank == op.root) {
          c.has_out = true;
          c.out_hash = op.send_hash;
        }
      }
      const CommInfo* ci = Comm(op.comm);
      const bool shared = ci == nullptr || ci->size != 1;
      if (!nonblocking && shared) {
        // The most recent blocking collective of this thread on another
        // communicator: what the order check compares across ranks.
        if (op.comm != t.last_comm) {
          c.prev_comm = t.last_comm;
          c.prev_seq = t.last_seq;
          t.other_comm = t.last_comm;
          t.other_seq = t.last_seq;
        } else {
          c.prev_comm = t.other_comm;
          c.prev_seq = t.other_seq;
        }
        t.last_comm = op.comm;
        t.last_seq = op.seq;
      }
      uint64_t& last = d_.last_seq[op.comm];
      last = std::max(last, op.seq);
      if (options_.flush && d_.collectives.size() >= kFlushCollectives) Flush();
      int64_t index = static_cast<int64_t>(d_.collectives.size());
      d_.collectives.push_back(c);
      if ((op.flags & op_flags::kGraphCaptured) != 0) {
        capturing_[op.stream].push_back(d_.captured.size());
        d_.captured.push_back(CapturedColl{op.comm, op.seq, op.api, e.call_site, e.time_ns, 0});
      }
      if (nonblocking && op.request != 0) {
        requests_[op.request] = Pending{index, CallOf(e), (op.flags & op_flags::kHasSendHash) != 0,
                                        (op.flags & op_flags::kGraphCaptured) != 0};
      } else {
        t.coll = index;
      }
      return;
    }

    switch (op.kind) {
      case OpKind::kSend:
      case OpKind::kSendrecv:
        if (op.peer >= 0) CountMessage(op.comm, World(op.comm, op.peer), true, op.peer_seq, op.tag);
        if (nonblocking && op.request != 0) {
          requests_[op.request] = Pending{-1, CallOf(e), (op.flags & op_flags::kHasSendHash) != 0};
        }
        break;
      case OpKind::kRecv:
      case OpKind::kMrecv:
        if (nonblocking && op.request != 0) requests_[op.request] = Pending{-1, CallOf(e), true};
        break;
      default:
        break;
    }
  }

  // A receive matched: count it on its channel.
  void Received(uint64_t comm, int32_t source, uint64_t peer_seq, int32_t tag) {
    if (source < 0) return;
    CountMessage(comm, World(comm, source), false, peer_seq, tag);
  }

  void OnReturn(const Event& e) {
    const ReturnEvent& r = e.ret;
    NoteReceived(r.flags, r.recv_nan, r.recv_inf);
    d_.last_call_returned = true;
    Thread& t = ThreadOf(e.thread);
    if (!t.open) return;
    const Event op_event = std::move(*t.open);
    const OpEvent& op = op_event.op;
    t.open.reset();
    if (t.coll >= 0) {
      CollEntry& c = d_.collectives[static_cast<size_t>(t.coll)];
      t.coll = -1;
      c.state = CallState::kDone;
      c.done_ns = e.time_ns;
      const CommInfo* ci = Comm(c.comm);
      if (ci == nullptr || ci->size != 1) ++d_.blocking_done;
      if ((r.flags & op_flags::kHasRecvHash) != 0) {
        c.has_out = true;
        c.out_hash = r.recv_hash;
      }
      return;
    }
    if (r.rc != 0) return;
    if ((op.flags & op_flags::kNonBlocking) != 0) return;
    if (op.kind == OpKind::kRecv || op.kind == OpKind::kMrecv) {
      Received(op.comm, r.source, r.peer_seq, r.tag);
    } else if (op.kind == OpKind::kSendrecv && op.recv_peer != kProcNull) {
      Received(op.comm, r.source, r.peer_seq, r.tag);
    }
  }

  void OnCompletion(const Event& e) {
    const CompletionEvent& c = e.completion;
    auto it = requests_.find(c.request);
    // Device operations carry the counts of what they sent in their completion
    // (the data is read on the GPU's stream, not at the call).
    if ((c.flags & op_flags::kHasSendHash) != 0 && it != requests_.end()) {
      NoteSentNonFinite(it->second.call, c.send_nan, c.send_inf);
    }
    if (c.recv_nan != 0 || c.recv_inf != 0) {
      if (it != requests_.end() && !it->second.input_fingerprinted && (c.flags & op_flags::kHasSendHash) == 0 &&
          !received_nan_ && !d_.nan_origin && !d_.nan_received) {
        NanOrigin n = Origin(it->second.call, c.recv_nan, c.recv_inf);
        d_.nan_received = n;
      }
    }
    NoteReceived(c.flags, c.recv_nan, c.recv_inf);
    if (it == requests_.end()) return;
    Pending p = it->second;
    requests_.erase(it);
    if (p.coll >= 0) {
      CollEntry& entry = d_.collectives[static_cast<size_t>(p.coll)];
      entry.state = CallState::kDone;
      entry.done_ns = e.time_ns;
      if ((c.flags & op_flags::kHasRecvHash) != 0) {
        entry.has_out = true;
        entry.out_hash = c.recv_hash;
      }
      return;
    }
    if (!p.call.is_send && !c.cancelled && c.rc == 0) Received(p.call.comm, c.source, c.peer_seq, c.tag);
  }

  void OnCommCreate(const Event& e) {
    bool damaged = false;
    CommRecord r = CommRecordOf(e, reader_.header(), &damaged);
    if (damaged) ++d_.damaged;
    comms_[r.id] = CommInfo{r.size, r.rank, r.members};
    cached_comm_ = nullptr;
    d_.comms.push_back(std::move(r));
  }

  void OnError(const Event& e) {
    ErrorRecord r;
    r.source = e.error.source;
    r.code = e.error.code;
    r.comm = e.error.comm;
    r.message = e.text;
    r.time_ns = e.time_ns;
    r.call_site = e.call_site;
    r.after = d_.last_call;
    d_.errors.push_back(std::move(r));
  }

  // Hands the collectives the rank is done with to options_.flush, keeping
  // those a thread is inside or a request stands for (they change yet), which
  // move to the front, their owners told where.
  void Flush() {
    std::vector<int64_t*> owners;
    for (auto& [id, t] : threads_) {
      if (t.coll >= 0) owners.push_back(&t.coll);
    }
    for (auto& [request, p] : requests_) {
      if (p.coll >= 0) owners.push_back(&p.coll);
    }
    std::vector<bool> open(d_.collectives.size(), false);
    for (const int64_t* o : owners) open[static_cast<size_t>(*o)] = true;
    std::vector<CollEntry> kept, done;
    kept.reserve(owners.size());
    done.reserve(d_.collectives.size() - owners.size());
    std::vector<int64_t> moved_to(d_.collectives.size(), -1);
    for (size_t i = 0; i < d_.collectives.size(); ++i) {
      if (open[i]) {
        moved_to[i] = static_cast<int64_t>(kept.size());
        kept.push_back(d_.collectives[i]);
      } else {
        done.push_back(d_.collectives[i]);
      }
    }
    for (int64_t* o : owners) *o = moved_to[static_cast<size_t>(*o)];
    options_.flush(done);
    d_.collectives = std::move(kept);
    d_.collectives.reserve(kFlushCollectives + d_.collectives.size());
  }

  // Whether a call entered at `enter_ns` and never left counts as stuck: it
  // stayed in progress for at least the minimum wait, until now (a running
  // rank), its death or its trace's close. A rank killed without a trace of
  // when (SIGKILL) was stuck for all we know.
  bool Stuck(int64_t enter_ns) const {
    int64_t until = -1;
    if (d_.status == RankStatus::kFailed) {
      return false;  // its recording stopped, not the call: it may have returned after
    } else if (d_.status == RankStatus::kRunning) {
      until = options_.now_realtime_ns;
    } else if (d_.fatal_signal != 0) {
      until = d_.Abs(d_.signal_ns);
    } else if (d_.header.close_realtime_ns > 0) {
      until = d_.header.close_realtime_ns;
    }
    return until < 0 || until - d_.Abs(enter_ns) >= options_.min_wait_ns;
  }

  // An executable graph: the captured collectives it runs, and its launches.
  struct ExecGraph {
    std::vector<size_t> collectives;  // d_.captured indices
    uint64_t launches = 0;            // not yet added to them
  };

  // CUDA graphs: which captured collectives each capture, graph and executable
  // graph holds, and each launch of an executable graph.
  void OnCuda(const Event& e) {
    const CudaEvent& c = e.cuda;
    if (c.rc != 0) return;
    switch (c.op) {
      case CudaOp::kCaptureBegin:
        capturing_[c.stream].clear();
        break;
      case CudaOp::kCaptureEnd: {
        auto it = capturing_.find(c.stream);
        if (it == capturing_.end()) break;
        graphs_[c.graph] = std::move(it->second);
        capturing_.erase(it);
        break;
      }
      case CudaOp::kGraphInstantiate: {
        auto it = graphs_.find(c.other);
        if (it == graphs_.end()) break;
        ExecGraph& x = execs_[c.graph];
        CountLaunches(&x);  // a handle used again: what it ran so far
        x.collectives = it->second;
        break;
      }
      case CudaOp::kGraphLaunch: {
        auto it = execs_.find(c.graph);
        if (it == execs_.end()) break;
        ++it->second.launches;
        break;
      }
      default:
        break;
    }
  }

  // Adds an executable graph's launches so far to the collectives it holds.
  void CountLaunches(ExecGraph* x) {
    if (x->launches == 0) return;
    for (size_t i : x->collectives) d_.captured[i].launches += x->launches;
    x->launches = 0;
  }

  void Finish() {
    for (auto& [exec, x] : execs_) CountLaunches(&x);
    for (size_t i = recent_count_ > kRecentTransitions ? recent_count_ - kRecentTransitions : 0; i < recent_count_; ++i) {
      d_.recent_transitions.push_back(recent_[i % kRecentTransitions]);
    }
    for (auto& [thread, t] : threads_) {
      if (!t.open) continue;
      const Event& e = *t.open;
      if (e.op.kind == OpKind::kAbort) continue;
      BlockedCall b;
      b.call = CallOf(e);
      b.stuck = Stuck(e.time_ns);
      CallState state = b.stuck ? CallState::kStuck : CallState::kInProgress;
      if (t.coll >= 0) d_.collectives[static_cast<size_t>(t.coll)].state = state;
      // A non-blocking collective that never returned from its call (an NCCL
      // operation stuck at enqueue): the rank is inside it.
      if ((e.op.flags & op_flags::kNonBlocking) != 0 && e.op.request != 0) {
        auto it = requests_.find(e.op.request);
        if (it != requests_.end() && it->second.coll >= 0) d_.collectives[static_cast<size_t>(it->second.coll)].state = state;
      }
      if (e.op.kind == OpKind::kWait) {
        for (int64_t id : e.list) {
          auto it = requests_.find(static_cast<uint64_t>(id));
          if (it == requests_.end()) continue;
          b.waits_for.push_back(it->second.call);
          if (it->second.coll >= 0) d_.collectives[static_cast<size_t>(it->second.coll)].state = state;
        }
      }
      d_.blocked.push_back(std::move(b));
    }
    StuckOnDevice();
    std::sort(d_.blocked.begin(), d_.blocked.end(),
              [](const BlockedCall& a, const BlockedCall& b) { return a.call.enter_ns < b.call.enter_ns; });
  }

  // An NCCL collective returns once enqueued; a hang leaves it never
  // completed while the rank's host thread may be anywhere (and the launcher
  // may end the rank in any way, exit included). The first NCCL collective
  // the rank never saw complete is where its work stopped: it is stuck there
  // (and inside it, when no call of the rank is seen blocked) once that has
  // lasted the minimum wait.
  void StuckOnDevice() {
    const Pending* first = nullptr;
    for (const auto& [request, p] : requests_) {
      if (p.coll < 0 || p.captured || d_.collectives[static_cast<size_t>(p.coll)].state != CallState::kPending) {
        continue;
      }
      if (d_.Api(p.call.api).rfind("nccl", 0) != 0) continue;
      if (first == nullptr || p.call.enter_ns < first->call.enter_ns) first = &p;
    }
    if (first == nullptr) return;
    CollEntry& c = d_.collectives[static_cast<size_t>(first->coll)];
    const bool stuck = Stuck(c.enter_ns);
    // A job that ended, or was stopped, soon after: nothing says it hung.
    if (!stuck && d_.status != RankStatus::kRunning) return;
    c.state = stuck ? CallState::kStuck : CallState::kInProgress;
    if (!d_.blocked.empty()) return;
    BlockedCall b;
    b.call = first->call;
    b.stuck = stuck;
    b.enqueued = true;
    d_.blocked.push_back(std::move(b));
  }

  const RankReader& reader_;
  const DigestOptions& options_;
  RankDigest& d_;
  SiteKeys sites_;
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint64_t, Pending> requests_;
  std::unordered_map<uint64_t, CommInfo> comms_;
  mutable uint64_t cached_comm_id_ = 0;
  mutable const CommInfo* cached_comm_ = nullptr;
  uint32_t cached_thread_id_ = 0;
  Thread* cached_thread_ = nullptr;
  std::unordered_map<uint64_t, size_t> channel_index_;
  std::unordered_map<uint64_t, uint64_t> last_sig_at_site_;
  std::unordered_map<uint64_t, std::vector<size_t>> capturing_;  // stream -> d_.captured indices
  std::unordered_map<uint64_t, std::vector<size_t>> graphs_;     // graph -> d_.captured indices
  std::unordered_map<uint64_t, ExecGraph> execs_;  // executable graph handle
  uint64_t recent_[kRecentTransitions] = {};
  size_t recent_count_ = 0;
  bool received_nan_ = false;
  bool sampled_receive_ = false;
  std::unordered_set<uint64_t> nan_sent_to_;  // (comm, peer) of d_.nan_sent
};

}  // namespace

uint64_t HashSignature(const CollSignature& s) {
  uint64_t parts[] = {static_cast<uint64_t>(s.kind) | static_cast<uint64_t>(s.nonblocking) << 16 |
                          static_cast<uint64_t>(s.dtype) << 24 | static_cast<uint64_t>(s.redop) << 32 |
                          static_cast<uint64_t>(s.recv_dtype) << 40,
                      static_cast<uint64_t>(static_cast<uint32_t>(s.root)),
                      static_cast<uint64_t>(s.count),
                      static_cast<uint64_t>(s.recv_count),
                      s.bytes,
                      s.counts_hash,
                      s.api};
  return Hash64(parts, sizeof(parts));
}

CommRecord CommRecordOf(const Event& e, const RankHeader& header, bool* damaged) {
  const CommCreateEvent& cc = e.comm_create;
  CommRecord r;
  r.id = cc.comm;
  r.parent = cc.parent;
  r.api = header.ApiName(cc.api);
  r.parent_seq = cc.parent_seq;
  r.color = cc.color;
  r.key = cc.key;
  r.size = cc.size;
  r.rank = cc.rank;
  r.flags = cc.flags;
  r.device = cc.device;
  bool members_ok = e.list.size() <= static_cast<size_t>(format::kMaxRanks) &&
                    std::all_of(e.list.begin(), e.list.end(),
                                [](int64_t m) { return m >= 0 && m < format::kMaxRanks; });
  if (members_ok) r.members.assign(e.list.begin(), e.list.end());
  bool size_ok = r.size >= -1 && r.size <= format::kMaxRanks;
  bool rank_ok = r.rank >= -1 && r.rank < format::kMaxRanks && (r.size <= 0 || r.rank < r.size);
  if (!size_ok) r.size = -1;
  if (!rank_ok) r.rank = -1;
  if (damaged != nullptr) *damaged = !size_ok || !rank_ok || !members_ok;
  return r;
}

RankDigest DigestRank(const RankReader& reader, const DigestOptions& options) {
  RankDigest d;
  d.rank = reader.rank();
  d.dir = reader.dir();
  d.status = reader.status();
  d.header = reader.header();
  if (!reader.header_ok()) {
    d.header_problem = "it could not be read";
    for (const TraceProblem& p : reader.problems()) {
      if (p.file == reader.dir() + "/" + format::kHeaderFile) d.header_problem = p.message;
    }
  }
  // Room for the collectives, from the events the rank wrote (read whole:
  // that it holds); room never filled is address space, not memory.
  uint64_t events = reader.streaming() ? reader.header().event_count : reader.events().size();
  uint64_t room = options.flush ? kFlushCollectives : std::min<uint64_t>(events / 2, uint64_t{1} << 26);
  d.collectives.reserve(static_cast<size_t>(room));
  Scanner scanner(reader, options, &d);
  EventWalk walk = scanner.Run();
  d.events = walk.events;
  d.dropped = walk.stats.dropped;
  d.unrecorded = walk.stats.unrecorded;
  d.missing = walk.stats.missing;
  d.first_ns = walk.first_ns;
  d.last_ns = walk.last_ns;
  return d;
}

}  // namespace replay::analysis
