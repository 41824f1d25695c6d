// fingerprint_kernel.cu: the kernel that fingerprints a device buffer on the
// operation's stream, as FingerprintBuffer would on the host
// (libreplay/src/record/fingerprint_device.h says how, and holds the
// arithmetic). Built into a fat binary embedded in the preload, loaded with
// the driver API into each context that needs it; no CUDA runtime.
//
// Block 0 hashes: its 256 threads sum 32 XXH3 blocks at a time, one thread per
// (block, lane), and 8 threads chain the sums. The other thread blocks (block
// 0 too when the grid has one block) count NaN and Inf elements with 16-byte
// loads, and each block writes its counts to its own slot of the result.
#include "record/fingerprint_device.h"

namespace dev = replay::device_fingerprint;

namespace {

constexpr uint32_t kBatch = dev::kThreads / 8;  // XXH3 blocks summed at once

__device__ void Hash(const dev::Job& job, const uint8_t* secret, const uint64_t* offsets, dev::Result* result) {
  __shared__ uint64_t sums[kBatch][8];
  __shared__ uint64_t acc[8];
  const dev::PieceReader in{reinterpret_cast<const uint8_t*>(job.data), job.chunk, offsets};
  const uint64_t len = job.length;
  const uint32_t t = threadIdx.x;
  if (len <= dev::kMidSizeMax) {
    if (t == 0) result->hash = dev::HashShort(in, len, secret, job.seed);
    return;
  }
  const uint32_t lane = t & 7;
  const uint32_t slot = t >> 3;
  if (t < 8) acc[t] = dev::InitialLane(t);
  const uint64_t blocks = (len - 1) / dev::kBlockBytes;
  for (uint64_t first = 0; first < blocks; first += kBatch) {
    const uint64_t b = first + slot;
    if (b < blocks) sums[slot][lane] = dev::StripeSum(in, b * dev::kBlockBytes, dev::kStripesPerBlock, secret, lane);
    __syncthreads();
    if (t < 8) {
      const uint64_t n = blocks - first < kBatch ? blocks - first : kBatch;
      uint64_t a = acc[t];
      for (uint64_t i = 0; i < n; ++i) a = dev::Scramble(a + sums[i][t], secret, t);
      acc[t] = a;
    }
    __syncthreads();
  }
  if (t < 8) acc[t] += dev::TailSum(in, len, secret, t);
  __syncthreads();
  if (t == 0) result->hash = dev::Merge(acc, secret, len);
}

// Counts the NaN and Inf elements of `format` (of Width(format) bytes) in
// what `job` scans, as part `part` of `parts` of the grid.
template <uint32_t format>
__device__ void Count(const dev::Job& job, uint32_t part, uint32_t parts, uint32_t* nan, uint32_t* inf) {
  constexpr uint32_t width = dev::Width(format);
  const uint64_t stride = static_cast<uint64_t>(parts) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(part) * blockDim.x + threadIdx.x;
  const uint32_t ranges = job.scan_pieces != 0 ? job.pieces : 1;
  // The elements of 16 bytes.
  auto classify16 = [&](const uint4 w) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    if constexpr (width == 8) {
      dev::Classify(words[0] | static_cast<uint64_t>(words[1]) << 32, format, nan, inf);
      dev::Classify(words[2] | static_cast<uint64_t>(words[3]) << 32, format, nan, inf);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (width == 4) {
          dev::Classify(words[j], format, nan, inf);
        } else {
          dev::Classify(words[j] & 0xffffu, format, nan, inf);
          dev::Classify(words[j] >> 16, format, nan, inf);
        }
      }
    }
  };
  for (uint32_t r = 0; r < ranges; ++r) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(job.data) + (job.scan_pieces != 0 ? job.offsets[r] : 0);
    const uint64_t elements = job.scan_bytes / width;
    // Elements before the first 16-byte boundary and after the last one go
    // one by one; those between, 16 bytes per load.
    const uintptr_t misalign = reinterpret_cast<uintptr_t>(p) & 15;
    const uint64_t head = (16 - misalign) % 16 / width;
    if (reinterpret_cast<uintptr_t>(p) % width != 0 || elements <= head) {
      for (uint64_t i = first; i < elements; i += stride) dev::Classify(dev::Element(p, i, width), format, nan, inf);
      continue;
    }
    const uint64_t vectors = (elements - head) * width / 16;
    const uint64_t tail = head + vectors * 16 / width;
    for (uint64_t i = first; i < head; i += stride) dev::Classify(dev::Element(p, i, width), format, nan, inf);
    const uint4* v = reinterpret_cast<const uint4*>(p + head * width);
    uint64_t i = first;
    for (; i + 3 * stride < vectors; i += 4 * stride) {
      uint4 w[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) w[k] = v[i + k * stride];
#pragma unroll
      for (int k = 0; k < 4; ++k) classify16(w[k]);
    }
    for (; i < vectors; i += stride) classify16(v[i]);
    for (uint64_t e = tail + first; e < elements; e += stride) dev::Classify(dev::Element(p, e, width), format, nan, inf);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(dev::kThreads) replay_fingerprint(dev::Job job) {
  __shared__ uint64_t secret_words[dev::kSecretSize / 8];
  __shared__ uint64_t offsets[dev::kMaxPieces];
  __shared__ uint32_t block_nan, block_inf;
  auto* result = reinterpret_cast<dev::Result*>(job.result);
  const uint8_t* secret = reinterpret_cast<const uint8_t*>(secret_words);
  if (threadIdx.x < dev::kSecretSize / 8) {
    secret_words[threadIdx.x] = dev::LoadLE64(job.secret + 8 * threadIdx.x);
  }
  if (threadIdx.x < dev::kMaxPieces) offsets[threadIdx.x] = job.offsets[threadIdx.x];
  if (threadIdx.x == 0) block_nan = block_inf = 0;
  __syncthreads();
  if (blockIdx.x == 0) Hash(job, secret, offsets, result);
  if (job.format != dev::kNoFormat && (blockIdx.x > 0 || gridDim.x == 1)) {
    uint32_t nan = 0, inf = 0;
    const uint32_t parts = gridDim.x == 1 ? 1 : gridDim.x - 1;
    const uint32_t part = gridDim.x == 1 ? 0 : blockIdx.x - 1;
    switch (job.format) {
      case dev::kF16: Count<dev::kF16>(job, part, parts, &nan, &inf); break;
      case dev::kBf16: Count<dev::kBf16>(job, part, parts, &nan, &inf); break;
      case dev::kF32: Count<dev::kF32>(job, part, parts, &nan, &inf); break;
      case dev::kF64: Count<dev::kF64>(job, part, parts, &nan, &inf); break;
      default: break;
    }
    if (nan != 0) atomicAdd(&block_nan, nan);
    if (inf != 0) atomicAdd(&block_inf, inf);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    result->counts[2 * blockIdx.x] = block_nan;
    result->counts[2 * blockIdx.x + 1] = block_inf;
  }
}
