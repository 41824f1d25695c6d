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

namespace {
const std::vector<SigGroup> kNoSigs;
const std::vector<OutGroup> kNoOuts;
const std::vector<PredClaim> kNoPreds;
const RankSet kNoRanks;
}  // namespace

const std::vector<SigGroup>& CollSummary::other_sigs() const { return anomalies ? anomalies->other_sigs : kNoSigs; }
const RankSet& CollSummary::stuck() const { return anomalies ? anomalies->stuck : kNoRanks; }
const RankSet& CollSummary::in_progress() const { return anomalies ? anomalies->in_progress : kNoRanks; }
const RankSet& CollSummary::pending() const { return anomalies ? anomalies->pending : kNoRanks; }
const std::vector<OutGroup>& CollSummary::other_outs() const { return anomalies ? anomalies->other_outs : kNoOuts; }
const std::vector<PredClaim>& CollSummary::other_preds() const {
  return anomalies ? anomalies->other_preds : kNoPreds;
}
CollAnomalies& CollSummary::Anomalies() {
  if (!anomalies) anomalies = std::make_unique<CollAnomalies>();
  return *anomalies;
}

const CollSignature& CollectiveIndex::Signature(uint64_t hash) const {
  static const CollSignature kUnknown;
  auto it = signatures_.find(hash);
  return it == signatures_.end() ? kUnknown : it->second;
}

void CollectiveIndex::Merge(RankDigest& d) {
  Merge(d.collectives, d.rank, d.header.start_realtime_ns);
  d.collectives.clear();
  d.collectives.shrink_to_fit();
}

void CollectiveIndex::Merge(const std::vector<CollEntry>& entries, int32_t r, int64_t start_realtime_ns) {
  uint64_t last_comm = 0;
  PerComm* per = nullptr;
  for (const CollEntry& e : entries) {
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
    if (s.sig.count == 0 || s.sig.hash == e.sig_hash) {
      SigCount& g = s.sig;
      if (g.count++ == 0) {
        g.hash = e.sig_hash;
        signatures_.try_emplace(e.sig_hash, e.sig);
      }
      g.changed = g.changed || e.sig_changed;
      if (r < g.first_rank) {
        g.first_rank = r;
        g.api = e.api;
        g.call_site = e.call_site;
      }
    } else {
      std::vector<SigGroup>& others = s.Anomalies().other_sigs;
      SigGroup* g = nullptr;
      for (SigGroup& other : others) {
        if (other.hash == e.sig_hash) g = &other;
      }
      if (g == nullptr) g = &others.emplace_back();
      g->ranks.Add(r);
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
    }
    switch (e.state) {
      case CallState::kStuck: s.Anomalies().stuck.Add(r); break;
      case CallState::kInProgress: s.Anomalies().in_progress.Add(r); break;
      case CallState::kPending: s.Anomalies().pending.Add(r); break;
      case CallState::kDone: break;
    }
    s.blocking = s.blocking || e.blocking;
    if (e.has_out && e.state == CallState::kDone && OutputsMustAgree(e.sig.kind)) {
      if (s.out.count == 0 || s.out.hash == e.out_hash) {
        s.out.hash = e.out_hash;
        ++s.out.count;
      } else {
        std::vector<OutGroup>& outs = s.Anomalies().other_outs;
        auto it = std::find_if(outs.begin(), outs.end(), [&](const OutGroup& o) { return o.hash == e.out_hash; });
        if (it == outs.end()) it = outs.insert(outs.end(), OutGroup{e.out_hash, 0, {}});
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
        std::vector<PredClaim>& preds = s.Anomalies().other_preds;
        auto it = std::find_if(preds.begin(), preds.end(), [&](const PredClaim& p) {
          return p.comm == e.prev_comm && p.seq == e.prev_seq;
        });
        if (it == preds.end()) it = preds.insert(preds.end(), PredClaim{e.prev_comm, e.prev_seq, 0, {}});
        ++it->count;
        it->ranks.Add(r);
      }
    }
    int64_t enter = start_realtime_ns + e.enter_ns;
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
