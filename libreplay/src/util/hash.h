// hash.h: the content hashes of the trace: XXH3-64 (fingerprints, payload keys,
// block checksums). Inlined so that hot paths pay no call.
#pragma once

#include <cstddef>
#include <cstdint>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace replay {

inline uint64_t Hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }
inline uint64_t Hash64(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

// Combines two hashes (order-sensitive); for identities derived from parts.
inline uint64_t HashCombine(uint64_t a, uint64_t b) {
  uint64_t parts[2] = {a, b};
  return XXH3_64bits(parts, sizeof(parts));
}

}  // namespace replay
