// Compiled with -mavx2: only called after a CPU check (fingerprint.cpp).
#include "record/fingerprint_impl.h"

#include "record/fingerprint_kernels.h"

namespace replay::internal {

uint64_t HashAvx2(const void* data, size_t size, uint64_t seed) {
  return KernelHash(data, size, seed);
}
void NonFinite32Avx2(const void* d, size_t n, uint32_t* nan, uint32_t* inf) {
  KernelNonFinite<uint32_t, true>(d, n, 0x7f800000u, 0x007fffffu, nan, inf);
}
void NonFinite64Avx2(const void* d, size_t n, uint32_t* nan, uint32_t* inf) {
  KernelNonFinite<uint64_t, false>(d, n, 0x7ff0000000000000ull, 0x000fffffffffffffull, nan, inf);
}
void NonFinite16Avx2(const void* d, size_t n, uint16_t exp, uint16_t man, uint32_t* nan, uint32_t* inf) {
  KernelNonFinite<uint16_t, true>(d, n, exp, man, nan, inf);
}

}  // namespace replay::internal
