#include "analysis/p2p_ledger.h"

namespace replay::analysis {

int64_t ChannelSummary::Unreceived(int32_t tag) const {
  if (tag == kAnyTag) return static_cast<int64_t>(sent) - static_cast<int64_t>(received);
  auto s = sent_by_tag.find(tag);
  auto r = received_by_tag.find(tag);
  int64_t sent_t = s == sent_by_tag.end() ? 0 : static_cast<int64_t>(s->second);
  int64_t received_t = r == received_by_tag.end() ? 0 : static_cast<int64_t>(r->second);
  return sent_t - received_t;
}

void P2pLedger::Merge(const RankDigest& d) {
  for (const P2pChannel& ch : d.channels) {
    ChannelKey key{ch.comm, ch.send ? d.rank : ch.peer, ch.send ? ch.peer : d.rank};
    ChannelSummary& s = channels_[key];
    (ch.send ? s.sent : s.received) += ch.count;
    auto& by_tag = ch.send ? s.sent_by_tag : s.received_by_tag;
    for (const auto& [tag, n] : ch.by_tag) by_tag[tag] += n;
  }
}

const ChannelSummary* P2pLedger::Find(uint64_t comm, int32_t from, int32_t to) const {
  auto it = channels_.find(ChannelKey{comm, from, to});
  return it == channels_.end() ? nullptr : &it->second;
}

std::vector<std::pair<ChannelKey, const ChannelSummary*>> P2pLedger::Into(uint64_t comm, int32_t to) const {
  std::vector<std::pair<ChannelKey, const ChannelSummary*>> out;
  for (auto it = channels_.lower_bound(ChannelKey{comm, INT32_MIN, INT32_MIN});
       it != channels_.end() && it->first.comm == comm; ++it) {
    if (it->first.to == to) out.emplace_back(it->first, &it->second);
  }
  return out;
}

}  // namespace replay::analysis
