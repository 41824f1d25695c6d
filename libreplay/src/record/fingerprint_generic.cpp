#include "record/fingerprint_impl.h"

#include "record/fingerprint_kernels.h"

namespace replay::internal {

uint64_t HashGeneric(const void* data, size_t size, uint64_t seed) {
  return KernelHash(data, size, seed);
}
void NonFinite32Generic(const void* d, size_t n, uint32_t* nan, uint32_t* inf) {
  KernelNonFinite<uint32_t>(d, n, 0x7f800000u, 0x007fffffu, nan, inf);
}
void NonFinite64Generic(const void* d, size_t n, uint32_t* nan, uint32_t* inf) {
  KernelNonFinite<uint64_t>(d, n, 0x7ff0000000000000ull, 0x000fffffffffffffull, nan, inf);
}

}  // namespace replay::internal
