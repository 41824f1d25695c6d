// Fingerprints of buffers (record/fingerprint.h) and the device kernel's
// arithmetic (record/fingerprint_device.h), which must give the same result
// to the bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "record/fingerprint.h"
#include "record/fingerprint_device.h"

namespace replay {
namespace {

namespace dev = device_fingerprint;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(gen());
  return v;
}

// What the kernel would write for these bytes, computed by the host reference.
Fingerprint OnDevice(const void* data, size_t bytes, DataType type, const FingerprintPolicy& policy) {
  static dev::Result result;
  dev::Job job = dev::MakeJob(reinterpret_cast<uint64_t>(data), bytes, type, policy,
                              reinterpret_cast<uint64_t>(&result));
  dev::Reference(job, &result);
  return dev::Read(job, result);
}

void RequireSame(const void* data, size_t bytes, DataType type, const FingerprintPolicy& policy) {
  Fingerprint host = FingerprintBuffer(data, bytes, type, policy);
  Fingerprint device = OnDevice(data, bytes, type, policy);
  INFO("bytes " << bytes << " type " << DataTypeName(type) << " limit " << policy.hash_limit << " scan_all "
                << policy.scan_all);
  REQUIRE(device.hash == host.hash);
  REQUIRE(device.nan == host.nan);
  REQUIRE(device.inf == host.inf);
  REQUIRE(device.sampled == host.sampled);
}

TEST_CASE("fingerprints hash whole buffers with XXH3 and count NaN and Inf of floating types") {
  std::vector<float> v(1000, 1.0f);
  v[3] = std::numeric_limits<float>::quiet_NaN();
  v[500] = std::numeric_limits<float>::infinity();
  v[999] = -std::numeric_limits<float>::infinity();
  Fingerprint f = FingerprintBuffer(v.data(), v.size() * 4, DataType::kFloat32, FingerprintPolicy{});
  CHECK(f.hash == XXH3_64bits(v.data(), v.size() * 4));
  CHECK(f.nan == 1);
  CHECK(f.inf == 2);
  CHECK_FALSE(f.sampled);
  // The same bytes as integers: hashed alike, nothing counted.
  Fingerprint i = FingerprintBuffer(v.data(), v.size() * 4, DataType::kInt32, FingerprintPolicy{});
  CHECK(i.hash == f.hash);
  CHECK(i.nan == 0);
  CHECK(i.inf == 0);
}

TEST_CASE("fingerprints of large buffers hash a sample but count every NaN unless told not to") {
  std::vector<double> v(100000, 2.0);
  v[54321] = std::nan("");
  FingerprintPolicy policy;
  policy.hash_limit = 4096;
  Fingerprint all = FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy);
  CHECK(all.sampled);
  CHECK(all.nan == 1);
  policy.scan_all = false;
  Fingerprint hashed = FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy);
  CHECK(hashed.hash == all.hash);
  CHECK(hashed.nan == 0);
  // A change outside the sample is not seen by the hash; one in it is.
  v[54321] = 2.0;
  CHECK(FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy).hash == all.hash);
  v[0] = 3.0;
  CHECK(FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy).hash != all.hash);
  // Buffers that differ only in length differ.
  CHECK(FingerprintBuffer(v.data(), v.size() * 8 - 8, DataType::kFloat64, policy).hash != all.hash);
}

TEST_CASE("the device kernel's arithmetic is XXH3-64 at every short and long length") {
  const auto bytes = RandomBytes(5000, 7);
  for (size_t len = 0; len <= 2100; ++len) {
    const uint64_t offsets[dev::kMaxPieces] = {};
    dev::PieceReader in{bytes.data() + 1, len == 0 ? 1 : len, offsets};
    if (len <= dev::kMidSizeMax) {
      uint8_t secret[dev::kSecretSize];
      XXH3_generateSecret_fromSeed(secret, 0);
      INFO("length " << len);
      REQUIRE(dev::HashShort(in, len, secret, 0) == XXH3_64bits(bytes.data() + 1, len));
    }
  }
  // Whole buffers at every length up to a few blocks, from unaligned addresses.
  for (size_t len = 0; len <= 4200; len += (len < 1100 ? 1 : 61)) {
    RequireSame(bytes.data() + (len % 7), len, DataType::kUint8, FingerprintPolicy{});
  }
}

TEST_CASE("the device kernel's arithmetic matches seeded XXH3 over a long input") {
  const auto bytes = RandomBytes(70000, 11);
  for (uint64_t seed : {1ull, 0x123456789abcdefull, 65536ull}) {
    for (size_t len : {241ul, 1024ul, 1025ul, 4096ul + 63, 65536ul}) {
      dev::Job job{};
      job.data = reinterpret_cast<uint64_t>(bytes.data());
      job.length = job.chunk = len;
      job.pieces = 1;
      job.seed = seed;
      job.blocks = 1;
      XXH3_generateSecret_fromSeed(job.secret, seed);
      dev::Result result{};
      dev::Reference(job, &result);
      INFO("seed " << seed << " length " << len);
      REQUIRE(result.hash == XXH3_64bits_withSeed(bytes.data(), len, seed));
    }
  }
}

TEST_CASE("device and host fingerprints agree for every floating type, sample and scan") {
  auto bytes = RandomBytes(300000, 3);
  // Random bytes hold some NaN and Inf of every width already; add runs of each.
  const float nan32 = std::numeric_limits<float>::quiet_NaN();
  const double inf64 = std::numeric_limits<double>::infinity();
  std::memcpy(bytes.data() + 4000, &nan32, 4);
  std::memcpy(bytes.data() + 123456, &inf64, 8);
  bytes[200001] = 0x7f;
  bytes[200000] = 0x80;  // bfloat16 +Inf at an even offset
  for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBfloat16,
                        DataType::kComplex64, DataType::kComplex128, DataType::kInt64, DataType::kUint8}) {
    for (size_t limit : {size_t{64} << 10, size_t{4096}, size_t{1000}, size_t{0}}) {
      for (bool scan_all : {true, false}) {
        FingerprintPolicy policy;
        policy.hash_limit = limit;
        policy.scan_all = scan_all;
        for (size_t len : {size_t{0}, size_t{16}, size_t{240}, size_t{4096}, size_t{65536}, size_t{65540},
                           size_t{299999}}) {
          RequireSame(bytes.data(), len, type, policy);
          RequireSame(bytes.data() + 1, len, type, policy);
        }
      }
    }
  }
}

TEST_CASE("large floating buffers spread the count over many thread blocks") {
  FingerprintPolicy policy;
  dev::Job small = dev::MakeJob(0, 4096, DataType::kFloat32, policy, 0);
  CHECK(small.blocks == 1);
  dev::Job large = dev::MakeJob(0, size_t{1} << 30, DataType::kFloat32, policy, 0);
  CHECK(large.blocks == dev::kMaxBlocks);
  CHECK(large.pieces == dev::kMaxPieces);
  dev::Job ints = dev::MakeJob(0, size_t{1} << 30, DataType::kInt32, policy, 0);
  CHECK(ints.blocks == 1);
  CHECK(ints.format == dev::kNoFormat);
}

}  // namespace
}  // namespace replay
