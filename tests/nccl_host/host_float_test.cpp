// The narrow float formats the host NCCL stand-in reduces, checked against values
// fixed by IEEE 754 and the OCP float8 specification.
#include "host_float.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nccl_host {
namespace {

template <typename F, typename Bits>
void ExpectEveryEncodingRoundTrips(unsigned count) {
  for (unsigned b = 0; b < count; ++b) {
    const auto bits = static_cast<Bits>(b);
    const float value = F::Decode(bits);
    if (std::isnan(value)) continue;
    INFO("bits 0x" << std::hex << b);
    REQUIRE(F::Encode(value) == bits);
  }
}

TEST_CASE("every non-NaN float16, bfloat16 and float8 encoding survives a round trip through float", "[nccl_host]") {
  ExpectEveryEncodingRoundTrips<Half, uint16_t>(1u << 16);
  ExpectEveryEncodingRoundTrips<Bf16, uint16_t>(1u << 16);
  ExpectEveryEncodingRoundTrips<Fp8E4M3, uint8_t>(1u << 8);
  ExpectEveryEncodingRoundTrips<Fp8E5M2, uint8_t>(1u << 8);
}

TEST_CASE("float16 encodes the IEEE binary16 values", "[nccl_host]") {
  CHECK(Half::Encode(1.0f) == 0x3c00);
  CHECK(Half::Encode(-2.0f) == 0xc000);
  CHECK(Half::Encode(65504.0f) == 0x7bff);                    // largest finite
  CHECK(Half::Encode(65520.0f) == 0x7c00);                    // rounds up to infinity
  CHECK(Half::Encode(0.1f) == 0x2e66);
  CHECK(Half::Encode(std::ldexp(1.0f, -24)) == 0x0001);       // smallest subnormal
  CHECK(Half::Encode(std::ldexp(1.0f, -26)) == 0x0000);       // a quarter of it: rounds to 0
  CHECK(Half::Encode(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // a tie: to even
  CHECK(Half::Encode(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(Half::Decode(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(Half::Decode(Half::Encode(std::nanf("")))));
}

TEST_CASE("bfloat16 is a float's top half, rounded to nearest-even", "[nccl_host]") {
  CHECK(Bf16::Encode(1.0f) == 0x3f80);
  CHECK(Bf16::Encode(-3.0f) == 0xc040);
  CHECK(Bf16::Encode(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // a tie: to even
  CHECK(Bf16::Encode(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(Bf16::Decode(0x4049) == 3.140625f);
  CHECK(std::isnan(Bf16::Decode(Bf16::Encode(std::nanf("")))));
}

TEST_CASE("float8 e4m3 saturates at 448 and has no infinity, where e5m2 overflows to infinity", "[nccl_host]") {
  CHECK(Fp8E4M3::Encode(1.0f) == 0x38);
  CHECK(Fp8E4M3::Decode(0x7e) == 448.0f);
  CHECK(Fp8E4M3::Encode(1000.0f) == 0x7e);
  CHECK(Fp8E4M3::Encode(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(std::isnan(Fp8E4M3::Decode(0x7f)));
  CHECK(Fp8E4M3::Decode(0x01) == std::ldexp(1.0f, -9));
  CHECK(Fp8E5M2::Encode(1.0f) == 0x3c);
  CHECK(Fp8E5M2::Decode(0x7b) == 57344.0f);
  CHECK(Fp8E5M2::Encode(1.0e6f) == 0x7c);
  CHECK(Fp8E5M2::Decode(0x7c) == std::numeric_limits<float>::infinity());
  CHECK(Fp8E5M2::Decode(0x01) == std::ldexp(1.0f, -16));
}

}  // namespace
}  // namespace nccl_host
