// rng.h: a small deterministic random number generator (SplitMix64).
//
// The standard distributions (std::uniform_real_distribution and friends) produce
// different numbers on different standard libraries; this generator is defined here
// bit for bit, so a seed means the same run everywhere. Its whole state is one
// integer, which a checkpoint saves. Not thread-safe; each user owns its own.
#pragma once

#include <cstdint>

namespace mpi_train {

class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1): the top 24 bits fill a float mantissa exactly.
  float Uniform() { return static_cast<float>(Next() >> 40) * 0x1p-24f; }

  // Uniform in [-1, 1).
  float Symmetric() { return 2.0f * Uniform() - 1.0f; }

  // Uniform in [0, n), by multiply-and-shift rather than modulo.
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(((Next() >> 32) * n) >> 32); }

  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Derives the seed of an independent stream (teacher, shard of a rank, ...) from a
// run's seed, so that changing one stream's use never shifts another's numbers.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  Rng rng(seed ^ (stream * 0xd1342543de82ef95ULL));
  return rng.Next();
}

}  // namespace mpi_train
