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
inline void CountNonFiniteWords(const unsigned char* p, size_t count, U exp_mask, U man_mask,
                                uint32_t* nan, uint32_t* inf) {
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

// Whether any of `count` words has its exponent all ones. kByMax: as the
// largest magnitude (sign cleared), which is at least the exponent mask
// exactly when some exponent is all ones; one AND and one MAX per vector where
// the instruction set has an unsigned MAX of the width (AVX2: 16 and 32 bits).
// Otherwise an OR of the comparisons.
template <typename U, bool kByMax>
inline bool AnyNonFinite(const unsigned char* p, size_t count, U exp_mask) {
  if constexpr (kByMax) {
    const U magnitude = static_cast<U>(static_cast<U>(~U{0}) >> 1);
    U m = 0;
    for (size_t k = 0; k < count; ++k) {
      U v;
      std::memcpy(&v, p + k * sizeof(U), sizeof(U));
      U a = static_cast<U>(v & magnitude);
      m = a > m ? a : m;
    }
    return m >= exp_mask;
  } else {
    U any = 0;
    for (size_t k = 0; k < count; ++k) {
      U v;
      std::memcpy(&v, p + k * sizeof(U), sizeof(U));
      any |= static_cast<U>((v & exp_mask) == exp_mask);
    }
    return any != 0;
  }
}

// Counts NaN and Inf. Almost every buffer has none, so each 4 KiB stretch is
// screened first with the cheaper test and counted only when it holds one,
// while it is still in the L1 cache.
template <typename U, bool kByMax>
inline void KernelNonFinite(const void* data, size_t count, U exp_mask, U man_mask,
                            uint32_t* nan, uint32_t* inf) {
  constexpr size_t kStretch = 4096 / sizeof(U);
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at < count; at += kStretch) {
    const size_t n = count - at < kStretch ? count - at : kStretch;
    const unsigned char* s = p + at * sizeof(U);
    if (AnyNonFinite<U, kByMax>(s, n, exp_mask)) CountNonFiniteWords<U>(s, n, exp_mask, man_mask, nan, inf);
  }
}

}  // namespace
