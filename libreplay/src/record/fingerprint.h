// fingerprint.h: content fingerprints of communication buffers.
//
// A fingerprint is a 64-bit XXH3 hash of a buffer's bytes plus, for floating
// types, how many elements are NaN and how many are infinite. Buffers up to
// `hash_limit` bytes are hashed whole; larger ones through an evenly spaced
// sample of `hash_limit` bytes (first and last bytes included), which bounds
// the cost on the calling thread. NaN/Inf counts cover the whole buffer when
// the policy scans all (so the first NaN is never missed), else the hashed
// bytes only. A call's received buffers may be counted on their sample while
// what it sends is counted whole: where a NaN enters a job is where it is first
// sent, and what a rank receives is what its peers sent.
//
// Stateless and thread-safe. Uses AVX2 where the CPU has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "replay/event.h"

namespace replay {

struct Fingerprint {
  uint64_t hash = 0;
  uint32_t nan = 0;
  uint32_t inf = 0;
  bool sampled = false;         // the hash covers a sample of the buffer
  bool counts_sampled = false;  // nan and inf count the sample only
};

struct FingerprintPolicy {
  size_t hash_limit = 64 << 10;
  // NaN/Inf counted in every element (true) or in the hashed sample only: of
  // the buffers this policy fingerprints, and of received ones (ForReceived).
  bool scan_all = true;
  bool scan_received_all = true;
  // Device buffers: fingerprinted by a kernel on the operation's stream (true)
  // or from page-locked copies hashed on the host (false). Same result.
  bool device_kernel = true;

  // The policy of a received buffer: the same but for its counting.
  FingerprintPolicy ForReceived() const {
    FingerprintPolicy p = *this;
    p.scan_all = scan_received_all;
    return p;
  }
};

// Sets the counting of `policy` from REPLAY_NAN_SCAN's value: all (every
// element), sent (every element sent, the sample of what is received) or
// hashed (the sample). False for any other value.
bool ApplyNanScan(std::string_view mode, FingerprintPolicy* policy);

// Which bytes a fingerprint of a `bytes`-byte buffer covers, for
// FingerprintBuffer and for the device kernel (fingerprint_device.h), which
// must agree to the bit: the hash is XXH3-64 with `seed` over `pieces` pieces
// of `chunk` bytes at `offsets`, taken as one input; NaN/Inf are counted over
// the first `scan_bytes` bytes of the whole buffer, or of each piece when
// `scan_pieces`, in elements of `width` bytes.
struct FingerprintPlan {
  static constexpr size_t kMaxPieces = 16;
  size_t pieces = 1;
  size_t chunk = 0;
  size_t offsets[kMaxPieces] = {};
  uint64_t seed = 0;
  bool sampled = false;
  size_t width = 0;       // bytes of a floating element (complex: of one part); 0: no counting
  size_t scan_bytes = 0;  // a multiple of `width`
  bool scan_pieces = false;
};

FingerprintPlan PlanFingerprint(size_t bytes, DataType type, const FingerprintPolicy& policy);

// Counts NaN and infinite elements of `type` in `count` elements at `data`;
// zero for non-floating types.
void CountNonFinite(const void* data, size_t count, DataType type, uint32_t* nan, uint32_t* inf);

Fingerprint FingerprintBuffer(const void* data, size_t bytes, DataType type,
                              const FingerprintPolicy& policy);

// Whether `type` is a floating type whose NaN/Inf can be counted.
bool IsFloating(DataType type);

}  // namespace replay
