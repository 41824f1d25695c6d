// ddmin.h: delta debugging over a set of items (Zeller and Hildebrandt's
// ddmin), deterministic, with each round's candidates handed over together so
// that the caller may try several at once.
//
// Ddmin starts from items whose whole set reproduces a failure and returns a
// subset that still does and from which no single chunk at the finest
// granularity reached can be removed (1-minimal when it runs to the end). A
// round splits the current set into n chunks and offers, in this order, each
// chunk alone and then the set without each chunk; the first candidate that
// reproduces becomes the current set. So the answer depends only on which
// candidates reproduce, never on how long each took: the same outcomes give
// the same result, whatever the parallelism.
//
// Not thread-safe; the callbacks are called from the calling thread.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace replay::shrink {

// Tries `candidates` (each a subset of the items, in the items' order) as if
// one by one in order, and returns the index of the first that reproduces the
// failure, or -1 when none does (or when it stopped early, see `stop`).
using TryCandidates = std::function<int(const std::vector<std::vector<size_t>>& candidates)>;

// Reduces `items` (whose whole set is taken to reproduce). `stop` is asked
// before each round; when it says so, the current set is returned as it is.
std::vector<size_t> Ddmin(std::vector<size_t> items, const TryCandidates& try_candidates,
                          const std::function<bool()>& stop);

}  // namespace replay::shrink
