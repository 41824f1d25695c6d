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
  CHECK(hashed.counts_sampled);
  CHECK_FALSE(all.counts_sampled);
  // A change outside the sample is not seen by the hash; one in it is.
  v[54321] = 2.0;
  CHECK(FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy).hash == all.hash);
  v[0] = 3.0;
  CHECK(FingerprintBuffer(v.data(), v.size() * 8, DataType::kFloat64, policy).hash != all.hash);
  // Buffers that differ only in length differ.
  CHECK(FingerprintBuffer(v.data(), v.size() * 8 - 8, DataType::kFloat64, policy).hash != all.hash);
}

TEST_CASE("REPLAY_NAN_SCAN=sent counts every element sent and the sample of what is received") {
  std::vector<float> v(100000, 1.0f);
  v[77777] = std::numeric_limits<float>::quiet_NaN();
  FingerprintPolicy policy;
  policy.hash_limit = 4096;
  REQUIRE(ApplyNanScan("sent", &policy));
  const size_t bytes = v.size() * 4;
  Fingerprint sent = FingerprintBuffer(v.data(), bytes, DataType::kFloat32, policy);
  CHECK(sent.nan == 1);
  CHECK_FALSE(sent.counts_sampled);
  Fingerprint received = FingerprintBuffer(v.data(), bytes, DataType::kFloat32, policy.ForReceived());
  CHECK(received.hash == sent.hash);
  CHECK(received.nan == 0);
  CHECK(received.counts_sampled);
  // A buffer within the limit is counted whole either way.
  Fingerprint small = FingerprintBuffer(v.data() + 77000, 4096, DataType::kFloat32, policy.ForReceived());
  CHECK(small.nan == 1);
  CHECK_FALSE(small.counts_sampled);
  // The device kernel counts as the host does.
  Fingerprint device = OnDevice(v.data(), bytes, DataType::kFloat32, policy.ForReceived());
  CHECK(device.nan == 0);
  CHECK(device.counts_sampled);

  REQUIRE(ApplyNanScan("all", &policy));
  CHECK(FingerprintBuffer(v.data(), bytes, DataType::kFloat32, policy.ForReceived()).nan == 1);
  REQUIRE(ApplyNanScan("hashed", &policy));
  CHECK(FingerprintBuffer(v.data(), bytes, DataType::kFloat32, policy).nan == 0);
  CHECK_FALSE(ApplyNanScan("some", &policy));
}

// NaN and Inf of a format on words of type U, counted one word at a time.
template <typename U>
void NaiveCount(const std::vector<U>& words, U exp_mask, U man_mask, uint32_t* nan, uint32_t* inf) {
  for (U v : words) {
    if ((v & exp_mask) != exp_mask) continue;
    ((v & man_mask) != 0 ? *nan : *inf) += 1;
  }
}

template <typename U>
void RequireCountsLikeNaive(DataType type, U exp_mask, U man_mask, uint32_t seed) {
  std::mt19937_64 gen(seed);
  const U sign = static_cast<U>(U{1} << (sizeof(U) * 8 - 1));
  const U largest_finite = static_cast<U>(exp_mask - 1);  // exponent one below all ones, mantissa all ones
  // Lengths around the 4 KiB stretches the counter screens, positions at their
  // edges, in the middle and at random.
  const size_t stretch = 4096 / sizeof(U);
  for (size_t len : {size_t{1}, stretch - 1, stretch, stretch + 1, 3 * stretch + 7, 20 * stretch}) {
    std::vector<U> words(len);
    for (U& w : words) w = static_cast<U>(gen() & largest_finite);  // finite, any sign below
    for (size_t i = 0; i < len; i += 3) words[i] |= sign;
    words[0] = largest_finite;  // the largest finite magnitudes are not counted
    words[len - 1] = static_cast<U>(largest_finite | sign);
    std::vector<size_t> at = {0, len - 1, len / 2, stretch - 1, stretch, 2 * stretch + 1};
    for (int k = 0; k < 6; ++k) at.push_back(static_cast<size_t>(gen() % len));
    uint32_t placed = 0;
    for (size_t i : at) {
      if (i >= len) continue;
      switch (placed++ % 4) {
        case 0: words[i] = exp_mask; break;                                       // +Inf
        case 1: words[i] = static_cast<U>(exp_mask | sign); break;                // -Inf
        case 2: words[i] = static_cast<U>(exp_mask | 1); break;                   // NaN, smallest payload
        default: words[i] = static_cast<U>(exp_mask | man_mask | sign); break;    // -NaN, all payload bits
      }
    }
    for (size_t shift : {size_t{0}, size_t{1}}) {  // also from an unaligned start
      std::vector<U> part(words.begin() + static_cast<std::ptrdiff_t>(shift), words.end());
      uint32_t want_nan = 0, want_inf = 0, nan = 0, inf = 0;
      NaiveCount(part, exp_mask, man_mask, &want_nan, &want_inf);
      std::vector<uint8_t> bytes(part.size() * sizeof(U) + 1);
      if (!part.empty()) std::memcpy(bytes.data() + 1, part.data(), part.size() * sizeof(U));
      CountNonFinite(bytes.data() + 1, part.size(), type, &nan, &inf);
      INFO(DataTypeName(type) << " length " << part.size());
      REQUIRE(nan == want_nan);
      REQUIRE(inf == want_inf);
    }
    // Nothing to count: nothing counted.
    std::vector<U> finite(len, largest_finite);
    uint32_t nan = 0, inf = 0;
    CountNonFinite(finite.data(), finite.size(), type, &nan, &inf);
    REQUIRE(nan == 0);
    REQUIRE(inf == 0);
  }
}

TEST_CASE("NaN and Inf are counted exactly at every position, sign and payload, in every floating format") {
  RequireCountsLikeNaive<uint32_t>(DataType::kFloat32, 0x7f800000u, 0x007fffffu, 1);
  RequireCountsLikeNaive<uint64_t>(DataType::kFloat64, 0x7ff0000000000000ull, 0x000fffffffffffffull, 2);
  RequireCountsLikeNaive<uint16_t>(DataType::kFloat16, 0x7c00, 0x03ff, 3);
  RequireCountsLikeNaive<uint16_t>(DataType::kBfloat16, 0x7f80, 0x007f, 4);
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
