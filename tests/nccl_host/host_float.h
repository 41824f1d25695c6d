// host_float.h: the narrow floating-point formats NCCL reduces (float16, bfloat16,
// float8 e4m3 and e5m2), converted to and from float on the host.
//
// The host NCCL stand-in reduces these types the way the GPU does: each step
// widens both operands to float, combines them, and rounds the result back to
// nearest-even. Conversions are exact in the widening direction. Pure functions;
// thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace nccl_host {

// A binary format of 1 sign, kExp exponent and kMan mantissa bits, IEEE-style:
// subnormals, and (when kHasInf) the top exponent for infinities and NaNs. Without
// kHasInf (e4m3 "fn") only all-ones is NaN and overflow saturates to the largest
// finite value, as CUDA's __NV_SATFINITE conversion does.
template <typename Bits, int kExp, int kMan, bool kHasInf>
struct MiniFloat {
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kExpMask = (1u << kExp) - 1;
  static constexpr uint32_t kManMask = (1u << kMan) - 1;
  static constexpr uint32_t kSign = 1u << (kExp + kMan);
  // Largest finite encoding (without the sign).
  static constexpr uint32_t kMaxFinite =
      kHasInf ? ((kExpMask - 1) << kMan) | kManMask : (kExpMask << kMan) | (kManMask - 1);
  static constexpr uint32_t kNan = kHasInf ? (kExpMask << kMan) | (1u << (kMan - 1))
                                           : (kExpMask << kMan) | kManMask;

  static float Decode(Bits bits) {
    const uint32_t b = bits;
    const float sign = (b & kSign) ? -1.0f : 1.0f;
    const uint32_t exp = (b >> kMan) & kExpMask;
    const uint32_t man = b & kManMask;
    if (kHasInf && exp == kExpMask) {
      return man == 0 ? sign * std::numeric_limits<float>::infinity()
                      : std::numeric_limits<float>::quiet_NaN();
    }
    if (!kHasInf && exp == kExpMask && man == kManMask) return std::numeric_limits<float>::quiet_NaN();
    if (exp == 0) return sign * std::ldexp(static_cast<float>(man), 1 - kBias - kMan);
    return sign * std::ldexp(static_cast<float>(man | (1u << kMan)), static_cast<int>(exp) - kBias - kMan);
  }

  static Bits Encode(float value) {
    if (std::isnan(value)) return static_cast<Bits>(kNan);
    const uint32_t sign = std::signbit(value) ? kSign : 0;
    const float a = std::fabs(value);
    if (a == 0.0f) return static_cast<Bits>(sign);
    if (std::isinf(a)) return static_cast<Bits>(sign | (kHasInf ? kExpMask << kMan : kMaxFinite));
    int k = 0;
    std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1)
    int exp = k - 1;    // unbiased exponent of a
    const bool subnormal = exp < 1 - kBias;
    if (subnormal) exp = 1 - kBias;
    // a in units of the last mantissa bit at this exponent; scaling by a power of
    // two is exact, and nearbyint rounds to nearest-even in the default mode.
    const float units = std::nearbyint(std::ldexp(a, kMan - exp));
    uint32_t q = static_cast<uint32_t>(units);
    uint32_t field = 0;  // biased exponent
    if (q >= (2u << kMan)) {  // rounding carried into the next binade
      q >>= 1;
      ++exp;
    }
    if (q < (1u << kMan)) {
      field = 0;  // still subnormal
    } else {
      field = static_cast<uint32_t>(exp + kBias);
      q -= 1u << kMan;
    }
    uint32_t magnitude = (field << kMan) | q;
    if (field >= kExpMask + (kHasInf ? 0u : 1u) || magnitude > kMaxFinite) {
      magnitude = kHasInf ? kExpMask << kMan : kMaxFinite;
    }
    return static_cast<Bits>(sign | magnitude);
  }
};

using Half = MiniFloat<uint16_t, 5, 10, true>;
using Fp8E5M2 = MiniFloat<uint8_t, 5, 2, true>;
using Fp8E4M3 = MiniFloat<uint8_t, 4, 3, false>;

// bfloat16 is the top half of a float.
struct Bf16 {
  static float Decode(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof(f));
    return f;
  }
  static uint16_t Encode(float value) {
    if (std::isnan(value)) return 0x7fc0;
    uint32_t wide;
    std::memcpy(&wide, &value, sizeof(wide));
    wide += 0x7fffu + ((wide >> 16) & 1u);  // round to nearest-even
    return static_cast<uint16_t>(wide >> 16);
  }
};

}  // namespace nccl_host
