#include "shrink/program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>

#include "interop/trace_builder.h"
#include "replay/op_shape.h"
#include "util/hash.h"

namespace replay::shrink {
namespace {

// FindIterations' bounds: the units a period is judged on, and the longest
// iteration it looks for.
constexpr size_t kIterationWindow = 65536;
constexpr size_t kMaxIterationLength = 4096;

bool IsMessage(OpKind k) {
  return k == OpKind::kSend || k == OpKind::kRecv || k == OpKind::kSendrecv || k == OpKind::kMrecv;
}

bool IsRecvSide(OpKind k) { return k == OpKind::kRecv || k == OpKind::kMrecv || k == OpKind::kSendrecv; }

bool IsRooted(OpKind k) { return ShapeOf(k).rooted; }

// Whether the op's count is the per-rank count times the communicator size,
// as MPI's alltoall, root's scatter and reduce_scatter_block are recorded
// (op_shape.h: what they send is a block per peer). Neighbourhood collectives
// count their neighbours, not the communicator.
bool CountTimesSize(const OpEvent& op, bool nccl) {
  if (nccl) return false;  // NCCL's counts are per rank
  const OpShape& s = ShapeOf(op.kind);
  return !s.neighbors && !s.count_is_call && s.send.blocks == Blocks::kPerPeer;
}

// How many per-member count lists an op's `list` holds (two halves of it for
// alltoallv and alltoallw), in the order op_shape.h keeps them.
int CountLists(OpKind k) {
  const OpShape& s = ShapeOf(k);
  if (s.neighbors) return 0;
  auto listed = [](Blocks b) { return b == Blocks::kListed || b == Blocks::kListedOwn ? 1 : 0; };
  return listed(s.send.blocks) + listed(s.recv.blocks);
}

// Whether an op's count is the sum of its first list: what it sends is
// listed per peer.
bool CountIsListSum(OpKind k) {
  const OpShape& s = ShapeOf(k);
  return !s.neighbors && (s.send.blocks == Blocks::kListed || s.send.blocks == Blocks::kListedTotal);
}

// Union-find over the calls of all ranks, numbered one after the other.
struct Sets {
  std::vector<size_t> parent;
  size_t Find(size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void Join(size_t a, size_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

bool IsNcclApi(const std::string& api) { return api.rfind("nccl", 0) == 0; }

Result<Program> Program::Load(const TraceReader& trace) {
  Program p;
  if (trace.manifest()) p.manifest_ = *trace.manifest();
  for (size_t i = 0; i < trace.ranks().size(); ++i) {
    auto r = trace.OpenRank(i);
    if (!r.ok()) return r.status();
    RankEvents re{(*r)->header(), (*r)->events()};
    re.header.rank = (*r)->rank();
    if (re.header.rank < 0) {
      return Status::InvalidArgument("rank directory " + trace.ranks()[i].name + " does not say which rank it is");
    }
    p.ranks_.push_back(std::move(re));
  }
  if (p.ranks_.empty()) return Status::InvalidArgument("the trace has no ranks");
  std::sort(p.ranks_.begin(), p.ranks_.end(),
            [](const RankEvents& a, const RankEvents& b) { return a.header.rank < b.header.rank; });
  for (size_t i = 0; i < p.ranks_.size(); ++i) {
    if (p.ranks_[i].header.rank != static_cast<int32_t>(i)) {
      return Status::InvalidArgument("the trace has no readable trace of rank " + std::to_string(i) +
                                     "; a job is reduced from the traces of all its ranks");
    }
  }
  p.Index();
  p.BuildUnits();
  return p;
}

void Program::Index() {
  calls_.resize(ranks_.size());
  for (size_t ri = 0; ri < ranks_.size(); ++ri) {
    const RankEvents& r = ranks_[ri];
    RankCalls& rc = calls_[ri];
    std::map<uint32_t, size_t> current;                   // thread -> its latest call
    std::map<uint32_t, std::vector<size_t>> open_groups;  // thread -> group starts
    std::map<uint64_t, size_t> by_request;                // request id -> call
    auto attach = [&](const Event& e, size_t i) {
      auto it = current.find(e.thread);
      if (it != current.end()) rc.calls[it->second].events.push_back(i);
    };
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      switch (e.kind) {
        case EventKind::kOp: {
          Call c;
          c.op = i;
          if (e.op.kind == OpKind::kInit || e.op.kind == OpKind::kFinalize) c.role = Call::kFixed;
          if (e.op.kind == OpKind::kWait) {
            for (int64_t id : e.list) {
              auto it = by_request.find(static_cast<uint64_t>(id));
              if (it != by_request.end()) c.waits_for.push_back(it->second);
            }
            if (!c.waits_for.empty()) c.role = Call::kWait;
          }
          if (IsNcclApi(r.header.ApiName(e.op.api))) nccl_ = true;
          if (e.op.request != 0 && e.op.kind != OpKind::kWait) by_request[e.op.request] = rc.calls.size();
          current[e.thread] = rc.calls.size();
          rc.calls.push_back(std::move(c));
          break;
        }
        case EventKind::kGroup: {
          Call c;
          c.op = i;
          c.role = e.group.is_end ? Call::kGroupEnd : Call::kGroupStart;
          const size_t idx = rc.calls.size();
          c.partner = idx;  // until its other end is seen
          std::vector<size_t>& open = open_groups[e.thread];
          if (!e.group.is_end) {
            open.push_back(idx);
          } else if (!open.empty()) {
            c.partner = open.back();
            rc.calls[open.back()].partner = idx;
            open.pop_back();
          }
          current[e.thread] = idx;
          rc.calls.push_back(std::move(c));
          break;
        }
        case EventKind::kCompletion: {
          auto it = by_request.find(e.completion.request);
          if (it != by_request.end()) {
            rc.calls[it->second].events.push_back(i);
          } else {
            attach(e, i);
          }
          break;
        }
        case EventKind::kReturn:
        case EventKind::kCommFree:
        case EventKind::kError:
          attach(e, i);
          break;
        case EventKind::kCommCreate: {
          if (current.count(e.thread) != 0) {
            attach(e, i);
          } else {
            rc.loose.push_back(i);
          }
          Comm& c = comms_[e.comm_create.comm];
          c.world = c.world || (e.comm_create.flags & comm_flags::kWorld) != 0;
          c.self = c.self || (e.comm_create.flags & comm_flags::kSelf) != 0;
          if (!e.list.empty()) {
            c.members.assign(e.list.begin(), e.list.end());
          } else if (e.comm_create.size > 0 && e.comm_create.rank >= 0 && e.comm_create.rank < e.comm_create.size) {
            // NCCL communicators: each member says where it is.
            if (c.members.empty()) c.members.assign(static_cast<size_t>(e.comm_create.size), -1);
            if (static_cast<size_t>(e.comm_create.rank) < c.members.size()) {
              c.members[static_cast<size_t>(e.comm_create.rank)] = r.header.rank;
            }
          }
          break;
        }
        case EventKind::kInfo:
        case EventKind::kSignal:
          rc.loose.push_back(i);
          break;
        default:
          break;  // tests, randomness, CUDA ordering, marks, drops: not part of a reduced job
      }
    }
  }
  for (auto& [id, c] : comms_) {
    if (std::find(c.members.begin(), c.members.end(), -1) != c.members.end()) c.members.clear();
  }
}

int32_t Program::WorldOf(uint64_t comm, int32_t r) const {
  auto it = comms_.find(comm);
  if (it == comms_.end() || r < 0 || static_cast<size_t>(r) >= it->second.members.size()) return -1;
  return it->second.members[static_cast<size_t>(r)];
}

int Program::Size(uint64_t comm) const {
  auto it = comms_.find(comm);
  return it == comms_.end() ? 0 : static_cast<int>(it->second.members.size());
}

void Program::Counts(const Unit& u, std::set<int64_t>* out) const {
  auto take = [&](int64_t v) {
    if (v > 0) out->insert(v);
  };
  for (auto [ri, ci] : u.calls) {
    const Call& c = calls_[ri].calls[ci];
    const RankEvents& r = ranks_[ri];
    const Event& e = r.events[c.op];
    const OpEvent& op = e.op;
    if (op.kind == OpKind::kCommCreate || op.kind == OpKind::kCommFree || op.kind == OpKind::kOther ||
        op.kind == OpKind::kWait) {
      continue;
    }
    const int n = Size(op.comm);
    if (CountTimesSize(op, IsNcclApi(r.header.ApiName(op.api)))) {
      if (n > 0 && op.count % n == 0) take(op.count / n);
    } else {
      take(op.count);
    }
    take(op.recv_count);
    for (int64_t v : e.list) take(v);
    for (size_t j : c.events) {
      const Event& f = r.events[j];
      if (f.kind == EventKind::kReturn) take(f.ret.recv_count);
      if (f.kind == EventKind::kCompletion) take(f.completion.recv_count);
    }
  }
}

void Program::BuildUnits() {
  // Number every call; join those that must go together.
  std::vector<size_t> base(ranks_.size() + 1, 0);
  for (size_t ri = 0; ri < ranks_.size(); ++ri) base[ri + 1] = base[ri] + calls_[ri].calls.size();
  Sets sets;
  sets.parent.resize(base.back());
  std::iota(sets.parent.begin(), sets.parent.end(), 0);
  using Key = std::tuple<char, uint64_t, int64_t, int64_t, uint64_t>;
  std::map<Key, size_t> first;  // key -> first call with it
  auto key = [&](const Key& k, size_t flat) {
    auto [it, inserted] = first.emplace(k, flat);
    if (!inserted) sets.Join(it->second, flat);
  };
  for (size_t ri = 0; ri < ranks_.size(); ++ri) {
    const RankEvents& r = ranks_[ri];
    std::map<uint64_t, int32_t> my_rank;  // comm -> this rank's rank in it
    for (const Event& e : r.events) {
      if (e.kind == EventKind::kCommCreate) my_rank[e.comm_create.comm] = e.comm_create.rank;
    }
    for (size_t ci = 0; ci < calls_[ri].calls.size(); ++ci) {
      const Call& c = calls_[ri].calls[ci];
      if (c.role != Call::kUnit) continue;
      const size_t flat = base[ri] + ci;
      const OpEvent& op = r.events[c.op].op;
      uint64_t created = 0;
      for (size_t j : c.events) {
        const Event& f = r.events[j];
        if (f.kind == EventKind::kCommCreate && created == 0) created = f.comm_create.comm;
      }
      if (IsMessage(op.kind)) {
        auto mine = my_rank.find(op.comm);
        const int64_t me = mine != my_rank.end() ? mine->second : -1;
        if (op.kind == OpKind::kSend || op.kind == OpKind::kSendrecv) {
          if (op.peer >= 0 && op.peer_seq > 0) key({'m', op.comm, me, op.peer, op.peer_seq}, flat);
        }
        if (IsRecvSide(op.kind)) {
          // The sender and number of the message it received: as posted, or as matched.
          int64_t source = op.kind == OpKind::kSendrecv ? op.recv_peer : op.peer;
          uint64_t seq = op.kind == OpKind::kSendrecv ? 0 : op.peer_seq;
          for (size_t j : c.events) {
            const Event& f = r.events[j];
            if (f.kind != EventKind::kReturn && f.kind != EventKind::kCompletion) continue;
            const int32_t s = f.kind == EventKind::kReturn ? f.ret.source : f.completion.source;
            const uint64_t ps = f.kind == EventKind::kReturn ? f.ret.peer_seq : f.completion.peer_seq;
            if (s >= 0) source = s;
            if (seq == 0 && ps > 0 && s >= 0) seq = ps;
          }
          if (source >= 0 && seq > 0) key({'m', op.comm, source, me, seq}, flat);
        }
      } else if (op.seq > 0 && op.comm != 0 && IsCollective(op.kind)) {
        key({'c', op.comm, 0, 0, op.seq}, flat);
      } else if (op.kind == OpKind::kCommCreate && created != 0) {
        key({'n', created, 0, 0, 0}, flat);
      }
    }
  }
  // One unit per set, in job order.
  struct Draft {
    Unit unit;
    size_t first_flat;
  };
  std::vector<Draft> drafts;
  std::map<size_t, size_t> draft_of_root;
  for (size_t ri = 0; ri < ranks_.size(); ++ri) {
    for (size_t ci = 0; ci < calls_[ri].calls.size(); ++ci) {
      if (calls_[ri].calls[ci].role != Call::kUnit) continue;
      const size_t root = sets.Find(base[ri] + ci);
      auto [it, inserted] = draft_of_root.emplace(root, drafts.size());
      if (inserted) drafts.push_back({Unit{}, root});
      drafts[it->second].unit.calls.emplace_back(ri, ci);
    }
  }
  for (Draft& d : drafts) {
    Unit& u = d.unit;
    u.position = UINT64_MAX;
    std::set<uint64_t> creates;
    for (auto [ri, ci] : u.calls) {
      const Call& c = calls_[ri].calls[ci];
      const RankEvents& r = ranks_[ri];
      const OpEvent& op = r.events[c.op].op;
      u.position = std::min<uint64_t>(u.position, ci);
      if (u.shape.empty()) {
        u.comm = op.comm;
        u.shape = r.header.ApiName(op.api) + " " + Hex(op.comm);
        if (IsMessage(op.kind)) {
          u.shape += " " + std::to_string(r.header.rank) + ">" + std::to_string(WorldOf(op.comm, op.peer));
        }
      }
      for (size_t j : c.events) {
        const Event& f = r.events[j];
        if (f.kind == EventKind::kCommCreate) creates.insert(f.comm_create.comm);
      }
    }
    u.creates.assign(creates.begin(), creates.end());
    std::set<int64_t> counts;
    Counts(u, &counts);
    u.scalable = !counts.empty() && *counts.rbegin() > 1;
  }
  std::stable_sort(drafts.begin(), drafts.end(), [](const Draft& a, const Draft& b) {
    return std::tie(a.unit.position, a.first_flat) < std::tie(b.unit.position, b.first_flat);
  });
  for (size_t u = 0; u < drafts.size(); ++u) {
    for (auto [ri, ci] : drafts[u].unit.calls) calls_[ri].calls[ci].unit = u;
    units_.push_back(std::move(drafts[u].unit));
  }
}

Selection Program::All() const {
  Selection s;
  s.ranks.assign(ranks_.size(), true);
  s.units.assign(units_.size(), true);
  s.scaled.assign(units_.size(), false);
  return s;
}

Candidate Program::Materialize(const Selection& sel) const {
  Candidate out;
  // New world ranks.
  std::vector<int32_t> new_world(ranks_.size(), -1);
  for (size_t ri = 0; ri < ranks_.size(); ++ri) {
    if (sel.ranks[ri]) {
      new_world[ri] = static_cast<int32_t>(out.origin.size());
      out.origin.push_back(ranks_[ri].header.rank);
    }
  }
  const int32_t world = static_cast<int32_t>(out.origin.size());
  const bool all_ranks = static_cast<size_t>(world) == ranks_.size();
  auto kept_world = [&](int32_t w) { return w >= 0 && static_cast<size_t>(w) < ranks_.size() && sel.ranks[w]; };
  // Communicators over the ranks that remain, in new world ranks.
  std::map<uint64_t, std::vector<int32_t>> members;
  for (const auto& [id, c] : comms_) {
    std::vector<int32_t>& m = members[id];
    for (int32_t w : c.members) {
      if (kept_world(w)) m.push_back(new_world[static_cast<size_t>(w)]);
    }
  }
  auto known = [&](uint64_t comm) { return Size(comm) > 0; };
  // Communicator rank `r` of `comm` now, or -1 when that rank is gone. A
  // rank the communicator never had (a call that named a wrong peer or root)
  // stays as it was: no smaller communicator has it either.
  auto remap = [&](uint64_t comm, int32_t r) -> int32_t {
    if (r < 0 || all_ranks || (Size(comm) > 0 && r >= Size(comm))) return r;
    const int32_t w = WorldOf(comm, r);
    if (!kept_world(w)) return -1;
    const std::vector<int32_t>& m = members[comm];
    auto it = std::find(m.begin(), m.end(), new_world[static_cast<size_t>(w)]);
    return it == m.end() ? -1 : static_cast<int32_t>(it - m.begin());
  };

  // Units that can stay: selected, with a call on a rank that remains, not
  // naming a rank that is gone, on a communicator that is still created.
  std::vector<bool> possible(units_.size(), false);
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!sel.units[u]) continue;
    bool on_kept = false, broken = false;
    for (auto [ri, ci] : units_[u].calls) {
      const OpEvent& op = ranks_[ri].events[calls_[ri].calls[ci].op].op;
      if (!sel.ranks[ri]) {
        broken = broken || IsMessage(op.kind);  // a message loses an end
        continue;
      }
      on_kept = true;
      if (all_ranks) continue;
      const bool needs_members = IsMessage(op.kind) || IsRooted(op.kind) || CountLists(op.kind) > 0 ||
                                 CountTimesSize(op, IsNcclApi(ranks_[ri].header.ApiName(op.api)));
      if (needs_members && op.comm != 0 && !known(op.comm)) broken = true;
      if (IsMessage(op.kind)) {
        if (op.peer >= 0 && remap(op.comm, op.peer) < 0) broken = true;
        if (op.kind == OpKind::kSendrecv && op.recv_peer >= 0 && remap(op.comm, op.recv_peer) < 0) broken = true;
        for (size_t j : calls_[ri].calls[ci].events) {
          const Event& f = ranks_[ri].events[j];
          const int32_t s = !IsRecvSide(op.kind)                ? -1
                            : f.kind == EventKind::kReturn       ? f.ret.source
                            : f.kind == EventKind::kCompletion ? f.completion.source
                                                               : -1;
          if (s >= 0 && remap(op.comm, s) < 0) broken = true;
        }
      } else if (IsRooted(op.kind) && op.root >= 0 && remap(op.comm, op.root) < 0) {
        broken = true;
      }
    }
    possible[u] = on_kept && !broken;
  }
  // Communicators are there from the start unless a unit creates them: the
  // world, self, and any the trace does not show created.
  std::vector<bool> live(units_.size(), false);
  std::set<uint64_t> made_here;
  for (const Unit& u : units_) made_here.insert(u.creates.begin(), u.creates.end());
  std::set<uint64_t> available = {0};
  for (const Unit& u : units_) {
    if (made_here.count(u.comm) == 0) available.insert(u.comm);
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t u = 0; u < units_.size(); ++u) {
      if (live[u] || !possible[u] || available.count(units_[u].comm) == 0) continue;
      live[u] = true;
      grew = true;
      for (uint64_t c : units_[u].creates) available.insert(c);
    }
  }

  out.live = live;
  // Smaller counts: a count of a scaled unit becomes its place among the
  // counts of the job, so that it stays equal to or larger than any other.
  std::map<int64_t, int64_t> compact;
  {
    std::set<int64_t> counts;
    for (size_t u = 0; u < units_.size(); ++u) {
      if (live[u]) Counts(units_[u], &counts);
    }
    int64_t place = 0;
    for (int64_t v : counts) compact[v] = ++place;
  }
  std::set<uint64_t> created;
  for (size_t ri = 0; ri < ranks_.size(); ++ri) {
    if (!sel.ranks[ri]) continue;
    const RankEvents& r = ranks_[ri];
    const std::vector<Call>& calls = calls_[ri].calls;
    // The calls kept: a wait when something it waits for is, a group when a call in it is.
    std::vector<bool> keep(calls.size(), false);
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      if (calls[ci].role == Call::kFixed) keep[ci] = true;
      if (calls[ci].role == Call::kUnit) keep[ci] = live[calls[ci].unit];
    }
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      if (calls[ci].role != Call::kWait) continue;
      for (size_t w : calls[ci].waits_for) keep[ci] = keep[ci] || keep[w];
    }
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      const Call& c = calls[ci];
      if (c.role != Call::kGroupStart) continue;
      const uint32_t thread = r.events[c.op].thread;
      const size_t end = c.partner > ci ? c.partner : calls.size();
      for (size_t k = ci + 1; k < end && !keep[ci]; ++k) {
        const bool is_call = calls[k].role == Call::kUnit || calls[k].role == Call::kWait;
        keep[ci] = is_call && keep[k] && r.events[calls[k].op].thread == thread;
      }
      if (keep[ci] && c.partner > ci) keep[c.partner] = true;
    }

    // The events kept, and the sequence numbers they keep, for renumbering.
    std::vector<size_t> events = calls_[ri].loose;
    std::map<size_t, size_t> owner;  // event -> its call
    std::set<uint64_t> kept_requests;
    std::map<uint64_t, std::vector<uint64_t>> coll_seqs;                            // comm -> seqs
    std::map<std::tuple<uint64_t, int32_t, bool>, std::vector<uint64_t>> msg_seqs;  // (comm, peer, is send) -> seqs
    size_t ops_here = 0;
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      if (!keep[ci]) continue;
      const Call& c = calls[ci];
      events.push_back(c.op);
      events.insert(events.end(), c.events.begin(), c.events.end());
      owner[c.op] = ci;
      for (size_t j : c.events) owner[j] = ci;
      if (c.role == Call::kGroupStart || c.role == Call::kGroupEnd) continue;
      const OpEvent& op = r.events[c.op].op;
      if (c.role != Call::kFixed) ++ops_here;
      out.nccl = out.nccl || IsNcclApi(r.header.ApiName(op.api));
      if (op.request != 0) kept_requests.insert(op.request);
      if (op.seq > 0 && op.comm != 0 && IsCollective(op.kind)) coll_seqs[op.comm].push_back(op.seq);
      if ((op.kind == OpKind::kSend || op.kind == OpKind::kSendrecv) && op.peer_seq > 0) {
        msg_seqs[{op.comm, op.peer, true}].push_back(op.peer_seq);
      }
      if ((op.kind == OpKind::kRecv || op.kind == OpKind::kMrecv) && op.peer >= 0 && op.peer_seq > 0) {
        msg_seqs[{op.comm, op.peer, false}].push_back(op.peer_seq);
      }
      if (!IsRecvSide(op.kind)) continue;
      for (size_t j : c.events) {
        const Event& f = r.events[j];
        if (f.kind == EventKind::kReturn && f.ret.source >= 0 && f.ret.peer_seq > 0) {
          msg_seqs[{op.comm, f.ret.source, false}].push_back(f.ret.peer_seq);
        }
        if (f.kind == EventKind::kCompletion && f.completion.source >= 0 && f.completion.peer_seq > 0) {
          msg_seqs[{op.comm, f.completion.source, false}].push_back(f.completion.peer_seq);
        }
      }
    }
    std::sort(events.begin(), events.end());
    out.operations += ops_here;
    out.max_rank_operations = std::max(out.max_rank_operations, ops_here);
    // A kept number's place among those kept: 1, 2, 3, ... (looked up in
    // sorted vectors: a long job keeps hundreds of thousands of numbers).
    auto sort_unique = [](auto& lists) {
      for (auto& entry : lists) {
        std::vector<uint64_t>& v = entry.second;
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
      }
    };
    sort_unique(coll_seqs);
    sort_unique(msg_seqs);
    auto renumber = [](const std::vector<uint64_t>* kept, uint64_t seq) -> uint64_t {
      if (seq == 0 || kept == nullptr) return seq;
      auto it = std::lower_bound(kept->begin(), kept->end(), seq);
      return it == kept->end() || *it != seq ? seq : static_cast<uint64_t>(it - kept->begin()) + 1;
    };
    auto coll_seq = [&](uint64_t comm, uint64_t seq) {
      auto it = coll_seqs.find(comm);
      return renumber(it == coll_seqs.end() ? nullptr : &it->second, seq);
    };
    auto msg_seq = [&](uint64_t comm, int32_t peer, bool send, uint64_t seq) {
      auto it = msg_seqs.find({comm, peer, send});
      return renumber(it == msg_seqs.end() ? nullptr : &it->second, seq);
    };

    RankEvents nr;
    nr.header = r.header;
    nr.header.rank = new_world[ri];
    nr.header.world_size = world;
    nr.header.level = Level::kMeta;
    nr.header.dropped_events = 0;
    const int32_t me = new_world[ri];
    auto my_rank_in = [&](uint64_t comm) -> int32_t {
      const std::vector<int32_t>& m = members[comm];
      auto it = std::find(m.begin(), m.end(), me);
      return it == m.end() ? -1 : static_cast<int32_t>(it - m.begin());
    };
    for (size_t i : events) {
      Event e = r.events[i];
      auto own = owner.find(i);
      const Call* call = own != owner.end() ? &calls[own->second] : nullptr;
      const OpEvent* op =
          call != nullptr && r.events[call->op].kind == EventKind::kOp ? &r.events[call->op].op : nullptr;
      const bool nccl = op != nullptr && IsNcclApi(r.header.ApiName(op->api));
      const bool scaled = call != nullptr && call->role == Call::kUnit && sel.scaled[call->unit];
      auto scale = [&](int64_t v) -> int64_t {
        auto it = compact.find(v);
        return scaled && v > 0 && it != compact.end() ? it->second : v;
      };
      // A return or completion: its numbers renumbered, its values dropped.
      auto renumbered = [&](auto& t) {
        t.seq = coll_seq(t.comm, t.seq);
        if (op != nullptr && IsRecvSide(op->kind) && t.source >= 0) {
          t.peer_seq = msg_seq(t.comm, t.source, false, t.peer_seq);
          t.source = remap(t.comm, t.source);
        } else if (op != nullptr && IsMessage(op->kind)) {
          t.peer_seq = msg_seq(t.comm, op->peer, true, t.peer_seq);
        }
        t.recv_count = scale(t.recv_count);
        t.recv_hash = 0;
        t.recv_nan = t.recv_inf = 0;
        t.payload_hash = t.payload_size = 0;
        t.flags &= static_cast<uint16_t>(~(op_flags::kHasSendHash | op_flags::kHasRecvHash));
      };
      switch (e.kind) {
        case EventKind::kOp: {
          OpEvent& o = e.op;
          const int old_n = Size(o.comm);
          const int new_n = static_cast<int>(members[o.comm].size());
          if (o.kind == OpKind::kWait) {
            std::vector<int64_t> ids;
            for (int64_t id : e.list) {
              if (kept_requests.count(static_cast<uint64_t>(id)) != 0) ids.push_back(id);
            }
            e.list = std::move(ids);
            o.count = static_cast<int64_t>(e.list.size());
            break;
          }
          o.seq = coll_seq(o.comm, o.seq);
          if (o.kind == OpKind::kCommCreate || o.kind == OpKind::kInit || o.kind == OpKind::kFinalize ||
              o.kind == OpKind::kCommFree || o.kind == OpKind::kOther) {
            // NCCL's init from a unique id records the rank and size it was called with.
            if (o.kind == OpKind::kCommCreate && o.comm == 0 && nccl && call != nullptr) {
              for (size_t j : call->events) {
                const Event& f = r.events[j];
                if (f.kind != EventKind::kCommCreate || !known(f.comm_create.comm)) continue;
                o.root = my_rank_in(f.comm_create.comm);
                o.count = static_cast<int64_t>(members[f.comm_create.comm].size());
              }
            }
            break;
          }
          // Per-rank count lists over the members that remain.
          const int lists = CountLists(o.kind);
          if (lists > 0 && !all_ranks && old_n > 0) {
            std::vector<int64_t> kept;
            for (int h = 0; h < lists; ++h) {
              for (int k = 0; k < old_n; ++k) {
                const size_t at = static_cast<size_t>(h * old_n + k);
                if (at < e.list.size() && remap(o.comm, k) >= 0) kept.push_back(e.list[at]);
              }
            }
            e.list = std::move(kept);
          }
          for (int64_t& v : e.list) v = scale(v);
          if (CountIsListSum(o.kind) && !e.list.empty() && o.count > 0) {
            // What a rank sends: the sum of its (first) list.
            const size_t n = lists == 2 ? e.list.size() / 2 : e.list.size();
            o.count = std::accumulate(e.list.begin(), e.list.begin() + static_cast<ptrdiff_t>(n), int64_t{0});
          } else if (CountTimesSize(o, nccl) && old_n > 0 && o.count % old_n == 0) {
            o.count = scale(o.count / old_n) * std::max(new_n, 1);
          } else {
            o.count = scale(o.count);
          }
          o.recv_count = scale(o.recv_count);
          if (o.bytes != 0) o.bytes = static_cast<uint64_t>(std::max<int64_t>(o.count, 0)) * o.dtype_size;
          if (IsRooted(o.kind) && o.root >= 0) o.root = remap(o.comm, o.root);
          if (IsMessage(o.kind)) {
            const bool send = o.kind == OpKind::kSend || o.kind == OpKind::kSendrecv;
            o.peer_seq = msg_seq(o.comm, o.peer, send, o.peer_seq);
            if (o.peer >= 0) o.peer = remap(o.comm, o.peer);
            if (o.recv_peer >= 0) o.recv_peer = remap(o.comm, o.recv_peer);
          }
          o.send_hash = 0;
          o.send_nan = o.send_inf = 0;
          o.flags &= static_cast<uint16_t>(~(op_flags::kHasSendHash | op_flags::kHasRecvHash));
          break;
        }
        case EventKind::kReturn:
          renumbered(e.ret);
          break;
        case EventKind::kCompletion:
          renumbered(e.completion);
          e.completion.send_hash = 0;
          e.completion.send_nan = e.completion.send_inf = 0;
          break;
        case EventKind::kCommCreate: {
          CommCreateEvent& c = e.comm_create;
          c.parent_seq = coll_seq(c.parent, c.parent_seq);
          if (known(c.comm)) {
            c.size = static_cast<int32_t>(members[c.comm].size());
            c.rank = my_rank_in(c.comm);
            if (!e.list.empty()) e.list.assign(members[c.comm].begin(), members[c.comm].end());
          }
          if ((c.flags & (comm_flags::kWorld | comm_flags::kSelf)) == 0) created.insert(c.comm);
          break;
        }
        case EventKind::kInfo: {
          const std::string key(e.info_key());
          if (key == "mpi.world_rank" || key == "mpi.world_size") {
            Event fixed = Event::MakeInfo(key, std::to_string(key == "mpi.world_rank" ? me : world));
            fixed.index = e.index;
            fixed.time_ns = e.time_ns;
            fixed.thread = e.thread;
            fixed.call_site = e.call_site;
            e = std::move(fixed);
          }
          break;
        }
        default:
          break;
      }
      nr.events.push_back(std::move(e));
    }
    out.ranks.push_back(std::move(nr));
  }
  out.communicators = created.size();
  return out;
}

std::vector<std::pair<size_t, size_t>> FindIterations(const std::vector<std::string>& shape_names) {
  const size_t n = shape_names.size();
  // Shapes as numbers, so that comparing two is one instruction.
  std::vector<uint32_t> shapes(n);
  {
    std::unordered_map<std::string_view, uint32_t> ids;
    for (size_t i = 0; i < n; ++i) {
      shapes[i] = ids.emplace(shape_names[i], static_cast<uint32_t>(ids.size())).first->second;
    }
  }
  // The period under which most units repeat the shape of the unit one
  // period before; the smallest among equals. A long job is judged on its
  // last kIterationWindow units and periods up to kMaxIterationLength, so
  // that this stays linear in the job's length.
  const size_t window_begin = n > kIterationWindow ? n - kIterationWindow : 0;
  size_t best_p = 0, best_matches = 0;
  for (size_t p = 1; p <= (n - window_begin) / 2 && p <= kMaxIterationLength; ++p) {
    size_t matches = 0;
    for (size_t i = window_begin; i + p < n; ++i) matches += shapes[i] == shapes[i + p] ? 1 : 0;
    if (matches > best_matches) {
      best_matches = matches;
      best_p = p;
    }
  }
  if (best_p == 0 || best_matches < best_p) return {};
  // The longest stretch in which every unit repeats the one a period before.
  size_t run_begin = 0, run_len = 0;
  for (size_t i = 0; i + best_p < n;) {
    if (shapes[i] != shapes[i + best_p]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + best_p < n && shapes[j] == shapes[j + best_p]) ++j;
    if (j - i > run_len) {
      run_len = j - i;
      run_begin = i;
    }
    i = j;
  }
  // [run_begin, run_begin + run_len + best_p) is periodic.
  const size_t end = run_begin + run_len + best_p;
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t b = run_begin; b + best_p <= end; b += best_p) out.emplace_back(b, b + best_p);
  if (out.size() < 2) return {};
  return out;
}

Status WriteCandidate(const Candidate& candidate, const JobManifest& recorded, const std::string& dir) {
  // An identity of its own, derived from the recording's, so that the same
  // reduction always writes the same bytes.
  Uuid uuid = recorded.trace_uuid;
  const uint64_t h[2] = {Hash64(uuid.data(), uuid.size(), 0x5348524e4b31ULL),
                         Hash64(uuid.data(), uuid.size(), static_cast<uint64_t>(candidate.ranks.size()))};
  std::memcpy(uuid.data(), h, uuid.size());
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);
  JobManifest m = recorded;
  m.trace_uuid = uuid;
  m.world_size = static_cast<int32_t>(candidate.ranks.size());
  m.level = Level::kMeta;
  REPLAY_RETURN_IF_ERROR(interop::WriteTraceManifest(dir, m));
  for (const RankEvents& r : candidate.ranks) {
    RankHeader header = r.header;
    header.trace_uuid = uuid;
    interop::RankTraceBuilder b(header);
    for (const Event& e : r.events) b.Add(e, header.start_realtime_ns + e.time_ns);
    // A rank that died without closing its trace stays one.
    REPLAY_RETURN_IF_ERROR(b.Write(dir, r.header.close_reason, r.header.close_realtime_ns, r.header.complete));
  }
  return Status::Ok();
}

}  // namespace replay::shrink
