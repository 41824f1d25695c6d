// fingerprint_device.h: fingerprints computed by many GPU threads at once.
//
// A device buffer's fingerprint must be the one FingerprintBuffer computes for
// the same bytes on the host, to the bit: ranks compare what one sent with
// what another received, and a re-run compares with its recording, whichever
// side had the data in device memory. FingerprintBuffer hashes with XXH3-64.
// Over an input longer than 240 bytes XXH3 runs 8 accumulators ("lanes")
// through blocks of 1,024 bytes; within a block every lane only adds, so the
// blocks' sums can be computed in parallel, and what stays sequential is one
// cheap step per block and lane (add the block's sum, scramble). That is how
// the kernel (interpose/fingerprint_kernel.cu) is laid out: 256 threads sum 32
// blocks at a time, 8 of them chain the sums, the other thread blocks of the
// grid count NaN and Inf elements.
//
// This header holds, for host and device compilers alike: the pieces of XXH3
// (written after the xxHash specification, doc/xxhash_spec.md of the xxHash
// project, for a 192-byte secret), the job a kernel is given, and a host
// reference of the kernel's arithmetic, which the tests hold against XXH3
// itself and which the host stand-in of the CUDA driver runs for the kernel.
//
// Little-endian only, as every GPU and every host CUDA runs on.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define REPLAY_HD __host__ __device__ inline
#define REPLAY_NOINLINE __host__ __device__ __noinline__
#else
#include <cstring>
#define REPLAY_HD inline
#define REPLAY_NOINLINE inline
#endif

namespace replay::device_fingerprint {

// Grid limits: block 0 hashes, up to kMaxBlocks - 1 others count NaN/Inf.
constexpr uint32_t kThreads = 256;
constexpr uint32_t kMaxBlocks = 512;
constexpr uint32_t kMaxPieces = 16;
constexpr uint32_t kSecretSize = 192;

// Element formats whose NaN and Inf are counted.
enum Format : uint32_t { kNoFormat = 0, kF16 = 1, kBf16 = 2, kF32 = 3, kF64 = 4 };

// The kernel's one parameter, passed by value. Addresses are device
// addresses (for the host reference: host addresses).
struct Job {
  uint64_t data;                 // the buffer
  uint64_t result;               // the Result the kernel writes (page-locked host memory, mapped)
  uint64_t length;               // bytes hashed: pieces * chunk
  uint64_t chunk;                // bytes per piece
  uint64_t offsets[kMaxPieces];  // each piece's start in the buffer
  uint64_t seed;                 // XXH3 seed; `secret` is the secret derived from it
  uint64_t scan_bytes;           // NaN/Inf: bytes counted per range, a multiple of the element width
  uint32_t pieces;               // 1..kMaxPieces
  uint32_t scan_pieces;          // 0: one range at 0; 1: one range at each piece's start
  uint32_t format;               // Format; kNoFormat counts nothing
  uint32_t blocks;               // the grid's size, 1..kMaxBlocks
  uint8_t secret[kSecretSize];
};

// What the kernel writes: the hash, and each thread block's counts (summed by
// the reader over Job::blocks).
struct Result {
  uint64_t hash;
  uint32_t counts[2 * kMaxBlocks];  // block b: counts[2b] NaN, counts[2b + 1] Inf
};

// ---- XXH3-64 in pieces --------------------------------------------------

constexpr uint64_t kPrime32_1 = 0x9E3779B1u;
constexpr uint64_t kPrime32_2 = 0x85EBCA77u;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;
constexpr uint64_t kBlockBytes = 1024;   // 16 stripes of 64 bytes
constexpr uint32_t kStripesPerBlock = 16;
constexpr uint64_t kMidSizeMax = 240;

REPLAY_HD uint64_t InitialLane(uint32_t lane) {
  switch (lane) {
    case 0: return kPrime32_3;
    case 1: return kPrime64_1;
    case 2: return kPrime64_2;
    case 3: return kPrime64_3;
    case 4: return kPrime64_4;
    case 5: return kPrime32_2;
    case 6: return kPrime64_5;
    default: return kPrime32_1;
  }
}

REPLAY_HD uint64_t LoadLE64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}

REPLAY_HD uint32_t LoadLE32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

REPLAY_HD uint64_t Rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

REPLAY_HD uint32_t Swap32(uint32_t x) {
  return (x << 24) | ((x << 8) & 0x00ff0000u) | ((x >> 8) & 0x0000ff00u) | (x >> 24);
}

REPLAY_HD uint64_t Swap64(uint64_t x) {
  return (static_cast<uint64_t>(Swap32(static_cast<uint32_t>(x))) << 32) | Swap32(static_cast<uint32_t>(x >> 32));
}

// The 128-bit product of a and b, folded: low half XOR high half.
REPLAY_HD uint64_t MulFold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}

REPLAY_HD uint64_t Xxh64Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  h ^= h >> 32;
  return h;
}

REPLAY_HD uint64_t Avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  h ^= h >> 32;
  return h;
}

REPLAY_HD uint64_t Rrmxmx(uint64_t h, uint64_t len) {
  h ^= Rotl64(h, 49) ^ Rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}

// The input: pieces of `chunk` bytes at `offsets` from `base`, read as one.
// Pieces of a sample are at least 64 bytes long, so a read crosses at most one
// boundary; reads that do go byte by byte.
struct PieceReader {
  const uint8_t* base;
  uint64_t chunk;
  const uint64_t* offsets;

  REPLAY_HD uint8_t Byte(uint64_t at) const { return base[offsets[at / chunk] + at % chunk]; }
  // `n` bytes (at most 8) from `at`, as a little-endian number.
  REPLAY_NOINLINE uint64_t Read(uint64_t at, uint32_t n) const {
    const uint64_t piece = at / chunk;
    const uint64_t within = at % chunk;
    const uint8_t* p = base + offsets[piece] + within;
    if (within + n <= chunk) return n == 8 ? LoadLE64(p) : LoadLE32(p);
    uint64_t v = 0;
    for (uint32_t i = n; i-- > 0;) {
      v = (v << 8) | (within + i < chunk ? p[i] : base[offsets[piece + 1] + (within + i - chunk)]);
    }
    return v;
  }
  REPLAY_HD uint64_t Read64(uint64_t at) const { return Read(at, 8); }
  REPLAY_HD uint32_t Read32(uint64_t at) const { return static_cast<uint32_t>(Read(at, 4)); }
};

REPLAY_HD uint64_t Mix16(const PieceReader& in, uint64_t at, const uint8_t* secret, uint64_t seed) {
  return MulFold64(in.Read64(at) ^ (LoadLE64(secret) + seed), in.Read64(at + 8) ^ (LoadLE64(secret + 8) - seed));
}

// XXH3-64 of an input of at most 240 bytes.
REPLAY_NOINLINE uint64_t HashShort(const PieceReader& in, uint64_t len, const uint8_t* secret, uint64_t seed) {
  if (len == 0) return Xxh64Avalanche(seed ^ (LoadLE64(secret + 56) ^ LoadLE64(secret + 64)));
  if (len <= 3) {
    uint32_t combined = static_cast<uint32_t>(in.Byte(0)) << 16 | static_cast<uint32_t>(in.Byte(len >> 1)) << 24 |
                        static_cast<uint32_t>(in.Byte(len - 1)) | static_cast<uint32_t>(len) << 8;
    uint64_t bitflip = (LoadLE32(secret) ^ LoadLE32(secret + 4)) + seed;
    return Xxh64Avalanche(static_cast<uint64_t>(combined) ^ bitflip);
  }
  if (len <= 8) {
    uint64_t s = seed ^ (static_cast<uint64_t>(Swap32(static_cast<uint32_t>(seed))) << 32);
    uint64_t bitflip = (LoadLE64(secret + 8) ^ LoadLE64(secret + 16)) - s;
    uint64_t input = in.Read32(len - 4) + (static_cast<uint64_t>(in.Read32(0)) << 32);
    return Rrmxmx(input ^ bitflip, len);
  }
  if (len <= 16) {
    uint64_t bitflip1 = (LoadLE64(secret + 24) ^ LoadLE64(secret + 32)) + seed;
    uint64_t bitflip2 = (LoadLE64(secret + 40) ^ LoadLE64(secret + 48)) - seed;
    uint64_t lo = in.Read64(0) ^ bitflip1;
    uint64_t hi = in.Read64(len - 8) ^ bitflip2;
    return Avalanche(len + Swap64(lo) + hi + MulFold64(lo, hi));
  }
  uint64_t acc = len * kPrime64_1;
  if (len <= 128) {
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += Mix16(in, 48, secret + 96, seed);
          acc += Mix16(in, len - 64, secret + 112, seed);
        }
        acc += Mix16(in, 32, secret + 64, seed);
        acc += Mix16(in, len - 48, secret + 80, seed);
      }
      acc += Mix16(in, 16, secret + 32, seed);
      acc += Mix16(in, len - 32, secret + 48, seed);
    }
    acc += Mix16(in, 0, secret, seed);
    acc += Mix16(in, len - 16, secret + 16, seed);
    return Avalanche(acc);
  }
  for (uint64_t i = 0; i < 8; ++i) acc += Mix16(in, 16 * i, secret + 16 * i, seed);
  acc = Avalanche(acc);
  for (uint64_t i = 8; i < len / 16; ++i) acc += Mix16(in, 16 * i, secret + 16 * (i - 8) + 3, seed);
  acc += Mix16(in, len - 16, secret + 136 - 17, seed);
  return Avalanche(acc);
}

// What `stripes` stripes of 64 bytes from `at` add to lane `lane`, keyed from
// `keys` (8 bytes further per stripe): the lane's own word, keyed, multiplied
// half by half, plus its neighbour's word (lane ^ 1) as it is.
REPLAY_NOINLINE uint64_t StripeSum(const PieceReader& in, uint64_t at, uint32_t stripes, const uint8_t* keys, uint32_t lane) {
  uint64_t sum = 0;
  for (uint32_t s = 0; s < stripes; ++s) {
    uint64_t stripe = at + 64ull * s;
    uint64_t key = in.Read64(stripe + 8ull * lane) ^ LoadLE64(keys + 8 * s + 8 * lane);
    sum += in.Read64(stripe + 8ull * (lane ^ 1)) + (key & 0xFFFFFFFFull) * (key >> 32);
  }
  return sum;
}

// The step between blocks, per lane.
REPLAY_HD uint64_t Scramble(uint64_t acc, const uint8_t* secret, uint32_t lane) {
  acc ^= acc >> 47;
  acc ^= LoadLE64(secret + kSecretSize - 64 + 8 * lane);
  return acc * kPrime32_1;
}

// What a long input's last (partial) block and last stripe add to a lane.
REPLAY_HD uint64_t TailSum(const PieceReader& in, uint64_t len, const uint8_t* secret, uint32_t lane) {
  const uint64_t blocks = (len - 1) / kBlockBytes;
  const uint32_t stripes = static_cast<uint32_t>(((len - 1) - kBlockBytes * blocks) / 64);
  return StripeSum(in, blocks * kBlockBytes, stripes, secret, lane) +
         StripeSum(in, len - 64, 1, secret + kSecretSize - 64 - 7, lane);
}

REPLAY_HD uint64_t Merge(const uint64_t* acc, const uint8_t* secret, uint64_t len) {
  uint64_t result = len * kPrime64_1;
  for (int i = 0; i < 4; ++i) {
    result += MulFold64(acc[2 * i] ^ LoadLE64(secret + 11 + 16 * i), acc[2 * i + 1] ^ LoadLE64(secret + 11 + 16 * i + 8));
  }
  return Avalanche(result);
}

// ---- NaN and Inf ---------------------------------------------------------

REPLAY_HD constexpr uint32_t Width(uint32_t format) {
  switch (format) {
    case kF16:
    case kBf16: return 2;
    case kF32: return 4;
    case kF64: return 8;
    default: return 0;
  }
}

// Adds element `bits` (the low Width(format) bytes) to the counts.
REPLAY_HD void Classify(uint64_t bits, uint32_t format, uint32_t* nan, uint32_t* inf) {
  uint64_t exp = 0, man = 0;
  switch (format) {
    case kF16: exp = 0x7c00; man = 0x03ff; break;
    case kBf16: exp = 0x7f80; man = 0x007f; break;
    case kF32: exp = 0x7f800000u; man = 0x007fffffu; break;
    case kF64: exp = 0x7ff0000000000000ull; man = 0x000fffffffffffffull; break;
    default: return;
  }
  if ((bits & exp) == exp) {
    if ((bits & man) != 0) {
      ++*nan;
    } else {
      ++*inf;
    }
  }
}

// Element `i` of the range at `p`, of `width` bytes, whatever its alignment.
REPLAY_HD uint64_t Element(const uint8_t* p, uint64_t i, uint32_t width) {
  const uint8_t* e = p + i * width;
  uint64_t v = 0;
  for (int b = static_cast<int>(width) - 1; b >= 0; --b) v = (v << 8) | e[b];
  return v;
}

// ---- The host reference ----------------------------------------------------

// The kernel's result for `job`, computed on the host in the kernel's order
// (block sums, then the chain, then the tail), with `job.data` a host address.
// All counts land in block 0's.
inline void Reference(const Job& job, Result* result) {
  const PieceReader in{reinterpret_cast<const uint8_t*>(job.data), job.chunk, job.offsets};
  const uint64_t len = job.length;
  if (len <= kMidSizeMax) {
    result->hash = HashShort(in, len, job.secret, job.seed);
  } else {
    uint64_t acc[8];
    const uint64_t blocks = (len - 1) / kBlockBytes;
    for (uint32_t lane = 0; lane < 8; ++lane) {
      acc[lane] = InitialLane(lane);
      for (uint64_t b = 0; b < blocks; ++b) {
        acc[lane] = Scramble(acc[lane] + StripeSum(in, b * kBlockBytes, kStripesPerBlock, job.secret, lane), job.secret,
                             lane);
      }
      acc[lane] += TailSum(in, len, job.secret, lane);
    }
    result->hash = Merge(acc, job.secret, len);
  }
  for (uint32_t b = 0; b < 2 * kMaxBlocks; ++b) result->counts[b] = 0;
  const uint32_t width = Width(job.format);
  if (width == 0) return;
  const uint32_t ranges = job.scan_pieces != 0 ? job.pieces : 1;
  for (uint32_t r = 0; r < ranges; ++r) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(job.data) + (job.scan_pieces != 0 ? job.offsets[r] : 0);
    for (uint64_t i = 0; i < job.scan_bytes / width; ++i) {
      Classify(Element(p, i, width), job.format, &result->counts[0], &result->counts[1]);
    }
  }
}

}  // namespace replay::device_fingerprint

#if !defined(__CUDACC__)
#include "record/fingerprint.h"

namespace replay::device_fingerprint {

// The job that fingerprints `bytes` bytes at device address `data` as
// FingerprintBuffer(type, policy) would on the host, writing to `result`.
Job MakeJob(uint64_t data, size_t bytes, DataType type, const FingerprintPolicy& policy, uint64_t result);

// The fingerprint a kernel wrote for `job`.
Fingerprint Read(const Job& job, const Result& result);

}  // namespace replay::device_fingerprint
#endif
