// rank_set.h: a set of world ranks as a bitset, the unit the cross-rank checks
// count in. A job of 1,024 ranks costs 128 bytes per set, so one can be kept per
// collective of a long trace.
//
// A value type; not synchronised.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/format.h"

namespace replay::analysis {

class RankSet {
 public:
  RankSet() = default;

  // Ranks outside 0..format::kMaxRanks-1 (only a damaged trace holds them)
  // are not members of any set.
  void Add(int32_t rank) {
    if (rank < 0 || rank >= format::kMaxRanks) return;
    size_t w = static_cast<size_t>(rank) / 64;
    // Ranks mostly arrive in increasing order: grow geometrically, not by a word.
    if (w >= words_.size()) words_.resize(std::max(w + 1, words_.size() * 2), 0);
    words_[w] |= uint64_t{1} << (rank % 64);
  }
  bool Has(int32_t rank) const {
    if (rank < 0) return false;
    size_t w = static_cast<size_t>(rank) / 64;
    return w < words_.size() && (words_[w] >> (rank % 64) & 1) != 0;
  }
  void Merge(const RankSet& other) {
    if (other.words_.size() > words_.size()) words_.resize(other.words_.size(), 0);
    for (size_t i = 0; i < other.words_.size(); ++i) words_[i] |= other.words_[i];
  }
  size_t Count() const {
    size_t n = 0;
    for (uint64_t w : words_) n += static_cast<size_t>(std::popcount(w));
    return n;
  }
  bool Empty() const {
    for (uint64_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }
  int32_t First() const {
    for (size_t i = 0; i < words_.size(); ++i) {
      if (words_[i] != 0) return static_cast<int32_t>(i * 64 + std::countr_zero(words_[i]));
    }
    return -1;
  }
  std::vector<int32_t> ToVector() const {
    std::vector<int32_t> out;
    for (size_t i = 0; i < words_.size(); ++i) {
      for (uint64_t w = words_[i]; w != 0; w &= w - 1) {
        out.push_back(static_cast<int32_t>(i * 64 + std::countr_zero(w)));
      }
    }
    return out;
  }

 private:
  std::vector<uint64_t> words_;
};

// "3", "0-3", "0,2,5-7": ranks in order, runs folded.
std::string FormatRanks(const std::vector<int32_t>& sorted_ranks);

}  // namespace replay::analysis
