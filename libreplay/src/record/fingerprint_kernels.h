// fingerprint_kernels.h: the loops behind fingerprint.cpp, compiled once per
// instruction set (generic and AVX2) in separate translation units. Include
// only from fingerprint_*.cpp. Everything here has internal linkage, so the two
// compilations never merge (which could run AVX2 code on a CPU without it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

inline uint64_t KernelHash(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

// IEEE binary formats described by their exponent mask and mantissa mask, on
// unsigned words of the type's width. NaN: exponent all ones, mantissa != 0;
// Inf: exponent all ones, mantissa == 0.
template <typename U>
inline void KernelNonFinite(const void* data, size_t count, U exp_mask, U man_mask,
                            uint32_t* nan, uint32_t* inf) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t n = 0, i = 0;
  for (size_t k = 0; k < count; ++k) {
    U v;
    std::memcpy(&v, p + k * sizeof(U), sizeof(U));
    bool all_ones = (v & exp_mask) == exp_mask;
    bool mantissa = (v & man_mask) != 0;
    n += all_ones & mantissa;
    i += all_ones & !mantissa;
  }
  *nan += n;
  *inf += i;
}

}  // namespace
