// fingerprint_impl.h: the per-instruction-set entry points fingerprint.cpp
// chooses between at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace replay::internal {

uint64_t HashGeneric(const void* data, size_t size, uint64_t seed);
void NonFinite32Generic(const void* d, size_t n, uint32_t* nan, uint32_t* inf);
void NonFinite64Generic(const void* d, size_t n, uint32_t* nan, uint32_t* inf);
void NonFinite16Generic(const void* d, size_t n, uint16_t exp, uint16_t man, uint32_t* nan, uint32_t* inf);
uint64_t HashAvx2(const void* data, size_t size, uint64_t seed);
void NonFinite32Avx2(const void* d, size_t n, uint32_t* nan, uint32_t* inf);
void NonFinite64Avx2(const void* d, size_t n, uint32_t* nan, uint32_t* inf);
void NonFinite16Avx2(const void* d, size_t n, uint16_t exp, uint16_t man, uint32_t* nan, uint32_t* inf);

}  // namespace replay::internal
