#include "record/fingerprint.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "record/fingerprint_impl.h"

namespace replay {
namespace {

struct Kernels {
  uint64_t (*hash)(const void*, size_t, uint64_t);
  void (*nonfinite32)(const void*, size_t, uint32_t*, uint32_t*);
  void (*nonfinite64)(const void*, size_t, uint32_t*, uint32_t*);
  void (*nonfinite16)(const void*, size_t, uint16_t, uint16_t, uint32_t*, uint32_t*);
};

const Kernels& Pick() {
  static const Kernels k = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
      return Kernels{internal::HashAvx2, internal::NonFinite32Avx2, internal::NonFinite64Avx2,
                     internal::NonFinite16Avx2};
    }
    return Kernels{internal::HashGeneric, internal::NonFinite32Generic, internal::NonFinite64Generic,
                   internal::NonFinite16Generic};
  }();
  return k;
}

// Element size for NaN counting; 0 when the type has no NaN.
size_t FloatWidth(DataType type) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kFloat32:
    case DataType::kComplex64: return 4;
    case DataType::kFloat64:
    case DataType::kComplex128: return 8;
    default: return 0;
  }
}

}  // namespace

bool IsFloating(DataType type) { return FloatWidth(type) != 0; }

void CountNonFinite(const void* data, size_t count, DataType type, uint32_t* nan, uint32_t* inf) {
  if (data == nullptr || count == 0) return;
  const Kernels& k = Pick();
  switch (type) {
    case DataType::kFloat32: k.nonfinite32(data, count, nan, inf); return;
    case DataType::kComplex64: k.nonfinite32(data, count * 2, nan, inf); return;
    case DataType::kFloat64: k.nonfinite64(data, count, nan, inf); return;
    case DataType::kComplex128: k.nonfinite64(data, count * 2, nan, inf); return;
    case DataType::kFloat16: k.nonfinite16(data, count, 0x7c00, 0x03ff, nan, inf); return;
    case DataType::kBfloat16: k.nonfinite16(data, count, 0x7f80, 0x007f, nan, inf); return;
    default: return;
  }
}

FingerprintPlan PlanFingerprint(size_t bytes, DataType type, const FingerprintPolicy& policy) {
  FingerprintPlan plan;
  const size_t width = FloatWidth(type);
  const size_t unit = type == DataType::kComplex64 || type == DataType::kComplex128 ? width * 2 : width;
  plan.width = width;
  if (bytes <= policy.hash_limit || policy.hash_limit == 0) {
    plan.chunk = bytes;
    if (unit != 0) plan.scan_bytes = bytes / unit * unit;
    return plan;
  }
  // A sample of kMaxPieces evenly spaced pieces, the first at 0 and the last
  // at the end, seeded with the total size so that buffers differing only in
  // length differ. Piece boundaries fall on whole elements.
  const size_t pieces = FingerprintPlan::kMaxPieces;
  size_t chunk = std::max<size_t>(policy.hash_limit / pieces, 64);
  if (unit != 0) chunk -= chunk % unit;
  plan.sampled = true;
  plan.pieces = pieces;
  plan.chunk = chunk;
  plan.seed = bytes;
  for (size_t i = 0; i < pieces; ++i) {
    size_t at = (bytes - chunk) * i / (pieces - 1);
    if (unit != 0) at -= at % unit;
    plan.offsets[i] = at;
  }
  if (unit != 0) {
    plan.scan_pieces = !policy.scan_all;
    plan.scan_bytes = policy.scan_all ? bytes / unit * unit : chunk;
  }
  return plan;
}

Fingerprint FingerprintBuffer(const void* data, size_t bytes, DataType type,
                              const FingerprintPolicy& policy) {
  Fingerprint f;
  if (data == nullptr || bytes == 0) {
    f.hash = XXH3_64bits(nullptr, 0);
    return f;
  }
  const Kernels& k = Pick();
  const auto* p = static_cast<const unsigned char*>(data);
  const FingerprintPlan plan = PlanFingerprint(bytes, type, policy);
  // Complex types count both parts, as elements of `width`.
  const DataType part = plan.width == 4 && type == DataType::kComplex64    ? DataType::kFloat32
                        : plan.width == 8 && type == DataType::kComplex128 ? DataType::kFloat64
                                                                           : type;
  auto count = [&](const unsigned char* at) {
    if (plan.width != 0) CountNonFinite(at, plan.scan_bytes / plan.width, part, &f.nan, &f.inf);
  };
  if (!plan.sampled) {
    f.hash = k.hash(p, bytes, 0);
    count(p);
    return f;
  }
  f.sampled = true;
  // A state on the stack must be initialised before a seeded reset: the
  // reset skips deriving the secret when the (garbage) seed field already
  // equals the seed, and would hash with whatever the stack held.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, plan.seed);
  for (size_t i = 0; i < plan.pieces; ++i) {
    XXH3_64bits_update(&state, p + plan.offsets[i], plan.chunk);
    if (plan.scan_pieces) count(p + plan.offsets[i]);
  }
  f.hash = XXH3_64bits_digest(&state);
  if (!plan.scan_pieces) count(p);
  f.counts_sampled = plan.scan_pieces;
  return f;
}

bool ApplyNanScan(std::string_view mode, FingerprintPolicy* policy) {
  if (mode != "all" && mode != "sent" && mode != "hashed") return false;
  policy->scan_all = mode != "hashed";
  policy->scan_received_all = mode == "all";
  return true;
}

}  // namespace replay
