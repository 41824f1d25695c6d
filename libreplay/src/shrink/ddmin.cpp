#include "shrink/ddmin.h"

#include <algorithm>

namespace replay::shrink {

std::vector<size_t> Ddmin(std::vector<size_t> items, const TryCandidates& try_candidates,
                          const std::function<bool()>& stop) {
  size_t n = 2;
  while (items.size() >= 2 && !stop()) {
    n = std::min(n, items.size());
    // Chunk k is items [k * size / n, (k + 1) * size / n).
    std::vector<std::vector<size_t>> chunks(n), rests(n);
    for (size_t k = 0; k < n; ++k) {
      size_t from = k * items.size() / n, to = (k + 1) * items.size() / n;
      for (size_t i = 0; i < items.size(); ++i) (i >= from && i < to ? chunks[k] : rests[k]).push_back(items[i]);
    }
    // With two chunks, each chunk is the other's rest: offered once.
    std::vector<std::vector<size_t>> candidates = chunks;
    if (n > 2) candidates.insert(candidates.end(), rests.begin(), rests.end());
    int hit = try_candidates(candidates);
    if (hit >= 0 && static_cast<size_t>(hit) < n) {
      items = std::move(candidates[static_cast<size_t>(hit)]);
      n = 2;
    } else if (hit >= 0) {
      items = std::move(candidates[static_cast<size_t>(hit)]);
      n = std::max<size_t>(n - 1, 2);
    } else if (n < items.size()) {
      n = std::min(n * 2, items.size());
    } else {
      break;
    }
  }
  return items;
}

}  // namespace replay::shrink
