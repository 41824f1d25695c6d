// p2p_ledger.h: point-to-point traffic of a job, per channel (communicator,
// sender, receiver): how many messages the sender issued and how many the
// receiver matched, in all and per tag.
//
// Message numbering per (communicator, peer, direction) is deterministic on
// each side, so a channel is balanced exactly when both counts agree; a
// receive waiting for message k that its sender never issued is unmatched.
// Tags are counted separately because MPI matches on them, and counts per tag
// tell a receive waiting on the wrong tag apart from one whose message is late.
//
// Not synchronised: the caller serialises Merge; reads after the last Merge
// may come from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "analysis/rank_digest.h"

namespace replay::analysis {

struct ChannelKey {
  uint64_t comm = 0;
  int32_t from = -1;  // world ranks
  int32_t to = -1;
  auto operator<=>(const ChannelKey&) const = default;
};

struct ChannelSummary {
  uint64_t sent = 0;
  uint64_t received = 0;
  std::map<int32_t, uint64_t> sent_by_tag;
  std::map<int32_t, uint64_t> received_by_tag;
  // Messages with `tag` issued and not (yet) matched; kAnyTag: with any tag.
  int64_t Unreceived(int32_t tag) const;
};

class P2pLedger {
 public:
  void Merge(const RankDigest& d);
  const ChannelSummary* Find(uint64_t comm, int32_t from, int32_t to) const;
  const std::map<ChannelKey, ChannelSummary>& all() const { return channels_; }
  // Channels into `to` on `comm`.
  std::vector<std::pair<ChannelKey, const ChannelSummary*>> Into(uint64_t comm, int32_t to) const;

 private:
  std::map<ChannelKey, ChannelSummary> channels_;
};

}  // namespace replay::analysis
