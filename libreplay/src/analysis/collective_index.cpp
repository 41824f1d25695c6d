#include "analysis/collective_index.h"

#include <algorithm>

namespace replay::analysis {

bool OutputsMustAgree(OpKind kind) {
  // Reductions to all, broadcasts and gathers to all leave the same bytes on
  // every member. (Reduce-scatter and all-to-all leave each rank its own part.)
  return kind == OpKind::kAllreduce || kind == OpKind::kBcast || kind == OpKind::kAllgather ||
         kind == OpKind::kAllgatherv;
}

CollSummary& CollectiveIndex::At(uint64_t comm, uint64_t seq) {
  PerComm& c = comms_[comm];
  CollSummary* s = nullptr;
  if (seq >= 1 && seq <= c.by_seq.size()) {
    s = &c.by_seq[seq - 1];
  } else if (seq >= 1 && seq - c.by_seq.size() <= kMaxGap) {
    c.by_seq.resize(seq);
    s = &c.by_seq[seq - 1];
  } else {
    s = &c.far[seq];
  }
  if (s->entered == 0) ++count_;
  return *s;
}

void CollectiveIndex::Merge(RankDigest& d) {
  const int32_t r = d.rank;
  uint64_t last_comm = 0;
  PerComm* per = nullptr;
  for (const CollEntry& e : d.collectives) {
    // Most consecutive entries are on a communicator seen just before.
    if (per == nullptr || e.comm != last_comm) {
      per = &comms_[e.comm];
      last_comm = e.comm;
    }
    CollSummary* slot;
    if (e.seq >= 1 && e.seq <= per->by_seq.size()) {
      slot = &per->by_seq[e.seq - 1];
      if (slot->entered == 0) ++count_;
    } else {
      slot = &At(e.comm, e.seq);
    }
    CollSummary& s = *slot;
    ++s.entered;
    SigGroup* g = nullptr;
    if (s.sig.count == 0 || s.sig.hash == e.sig_hash) {
      g = &s.sig;
    } else {
      for (SigGroup& other : s.other_sigs) {
        if (other.hash == e.sig_hash) g = &other;
      }
      if (g == nullptr) g = &s.other_sigs.emplace_back();
      g->ranks.Add(r);
    }
    if (g->count++ == 0) {
      g->sig = e.sig;
      g->hash = e.sig_hash;
    }
    g->changed = g->changed || e.sig_changed;
    if (r < g->first_rank) {
      g->first_rank = r;
      g->api = e.api;
      g->call_site = e.call_site;
    }
    switch (e.state) {
      case CallState::kStuck: s.stuck.Add(r); break;
      case CallState::kInProgress: s.in_progress.Add(r); break;
      case CallState::kPending: s.pending.Add(r); break;
      case CallState::kDone: break;
    }
    s.blocking = s.blocking || e.blocking;
    if (e.has_out && e.state == CallState::kDone && OutputsMustAgree(e.sig.kind)) {
      if (s.out.count == 0 || s.out.hash == e.out_hash) {
        s.out.hash = e.out_hash;
        ++s.out.count;
      } else {
        auto it = std::find_if(s.other_outs.begin(), s.other_outs.end(),
                               [&](const OutGroup& o) { return o.hash == e.out_hash; });
        if (it == s.other_outs.end()) it = s.other_outs.insert(s.other_outs.end(), OutGroup{e.out_hash, 0, {}});
        ++it->count;
        it->ranks.Add(r);
      }
    }
    if (e.prev_comm != 0) {
      if (s.pred.count == 0 || (s.pred.comm == e.prev_comm && s.pred.seq == e.prev_seq)) {
        s.pred.comm = e.prev_comm;
        s.pred.seq = e.prev_seq;
        ++s.pred.count;
      } else {
        auto it = std::find_if(s.other_preds.begin(), s.other_preds.end(), [&](const PredClaim& p) {
          return p.comm == e.prev_comm && p.seq == e.prev_seq;
        });
        if (it == s.other_preds.end()) {
          it = s.other_preds.insert(s.other_preds.end(), PredClaim{e.prev_comm, e.prev_seq, 0, {}});
        }
        ++it->count;
        it->ranks.Add(r);
      }
    }
    int64_t enter = d.Abs(e.enter_ns);
    if (enter < s.first_enter_abs || (enter == s.first_enter_abs && r < s.first_rank)) {
      s.first_enter_abs = enter;
      s.first_rank = r;
    }
    s.last_enter_abs = std::max(s.last_enter_abs, enter);
    if (e.blocking && e.state == CallState::kDone && e.done_ns >= e.enter_ns) {
      int64_t dur = e.done_ns - e.enter_ns;
      if (dur < s.min1_ns || (dur == s.min1_ns && r < s.min1_rank)) {
        s.min2_ns = s.min1_ns;
        s.min1_ns = dur;
        s.min1_rank = r;
      } else if (dur < s.min2_ns) {
        s.min2_ns = dur;
      }
      ++s.timed;
    }
  }
  d.collectives.clear();
  d.collectives.shrink_to_fit();
}

const CollSummary* CollectiveIndex::Find(uint64_t comm, uint64_t seq) const {
  auto it = comms_.find(comm);
  if (it == comms_.end()) return nullptr;
  const PerComm& c = it->second;
  const CollSummary* s = nullptr;
  if (seq >= 1 && seq <= c.by_seq.size()) {
    s = &c.by_seq[seq - 1];
  } else if (auto f = c.far.find(seq); f != c.far.end()) {
    s = &f->second;
  }
  return s != nullptr && s->entered > 0 ? s : nullptr;
}

std::vector<CollKey> CollectiveIndex::SortedKeys() const {
  std::vector<CollKey> keys;
  keys.reserve(count_);
  for (const auto& [comm, c] : comms_) {
    for (size_t i = 0; i < c.by_seq.size(); ++i) {
      if (c.by_seq[i].entered > 0) keys.push_back(CollKey{comm, i + 1});
    }
    for (const auto& [seq, s] : c.far) {
      if (s.entered > 0) keys.push_back(CollKey{comm, seq});
    }
  }
  std::sort(keys.begin(), keys.end(), [](const CollKey& a, const CollKey& b) {
    return a.comm != b.comm ? a.comm < b.comm : a.seq < b.seq;
  });
  return keys;
}

}  // namespace replay::analysis
