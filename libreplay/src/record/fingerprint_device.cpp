#include "record/fingerprint_device.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace replay::device_fingerprint {
namespace {

Format FormatOf(DataType type) {
  switch (type) {
    case DataType::kFloat16: return kF16;
    case DataType::kBfloat16: return kBf16;
    case DataType::kFloat32:
    case DataType::kComplex64: return kF32;
    case DataType::kFloat64:
    case DataType::kComplex128: return kF64;
    default: return kNoFormat;
  }
}

// Bytes a counting thread block is given at least, so that small buffers take
// one block and large ones spread over the grid.
constexpr uint64_t kScanBytesPerBlock = 128 << 10;

}  // namespace

Job MakeJob(uint64_t data, size_t bytes, DataType type, const FingerprintPolicy& policy, uint64_t result) {
  static_assert(FingerprintPlan::kMaxPieces == kMaxPieces, "the kernel reads every piece of a plan");
  static_assert(XXH3_SECRET_DEFAULT_SIZE == kSecretSize, "the kernel's secret is XXH3's default size");
  const FingerprintPlan plan = PlanFingerprint(bytes, type, policy);
  Job job{};
  job.data = data;
  job.result = result;
  job.pieces = static_cast<uint32_t>(plan.pieces);
  job.chunk = plan.chunk;
  job.length = plan.chunk * plan.pieces;
  for (size_t i = 0; i < plan.pieces; ++i) job.offsets[i] = plan.offsets[i];
  job.seed = plan.seed;
  XXH3_generateSecret_fromSeed(job.secret, plan.seed);
  job.format = plan.width != 0 && bytes > 0 ? FormatOf(type) : kNoFormat;
  job.scan_bytes = plan.scan_bytes;
  job.scan_pieces = plan.scan_pieces ? 1 : 0;
  job.blocks = 1;
  if (job.format != kNoFormat) {
    const uint64_t scanned = plan.scan_bytes * (plan.scan_pieces ? plan.pieces : 1);
    const uint64_t scanners = (scanned + kScanBytesPerBlock - 1) / kScanBytesPerBlock;
    if (scanners > 1) job.blocks = static_cast<uint32_t>(1 + std::min<uint64_t>(scanners, kMaxBlocks - 1));
  }
  return job;
}

Fingerprint Read(const Job& job, const Result& result) {
  Fingerprint f;
  f.hash = result.hash;
  f.sampled = job.pieces > 1;
  f.counts_sampled = job.scan_pieces != 0;
  for (uint32_t b = 0; b < job.blocks && b < kMaxBlocks; ++b) {
    f.nan += result.counts[2 * b];
    f.inf += result.counts[2 * b + 1];
  }
  return f;
}

}  // namespace replay::device_fingerprint
