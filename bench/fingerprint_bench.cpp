// fingerprint_bench: how fast the recorder fingerprints host buffers, as it
// does for every MPI send and receive at level hash: FingerprintBuffer with the
// default policy (XXH3 of the whole buffer up to REPLAY_HASH_LIMIT_KB, of a
// sample beyond, and a NaN/Inf count over every element of floating types),
// and the NaN/Inf count alone (CountNonFinite). Per type and size, the median
// over the repetitions of one call on a buffer of finite values, in GB/s of
// buffer.
//
// Buffers of a size that fits the caches are warm (the same buffer again);
// larger ones come from memory.
//
// Usage: fingerprint_bench [--sizes=65536,1048576,67108864] [--reps=N] [--quick]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_support.h"
#include "record/fingerprint.h"

namespace replay::bench {
namespace {


template <typename F>
double MedianSeconds(int reps, F&& f) {
  std::vector<double> t;
  t.reserve(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    double t0 = NowSeconds();
    f();
    t.push_back(NowSeconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A finite value of each format, repeated: what a healthy gradient holds.
void Fill(std::vector<unsigned char>* buf, DataType type) {
  auto fill = [&](const void* v, size_t width) {
    for (size_t at = 0; at + width <= buf->size(); at += width) std::memcpy(buf->data() + at, v, width);
  };
  const float f = 0.375f;
  const double d = -1.25;
  const uint16_t half = 0x3a00;      // 0.75
  const uint16_t bfloat = 0xbf40;    // -0.75
  switch (type) {
    case DataType::kFloat32: fill(&f, 4); break;
    case DataType::kFloat64: fill(&d, 8); break;
    case DataType::kFloat16: fill(&half, 2); break;
    case DataType::kBfloat16: fill(&bfloat, 2); break;
    default: std::fill(buf->begin(), buf->end(), static_cast<unsigned char>(0x5a)); break;
  }
}

size_t Width(DataType type) {
  switch (type) {
    case DataType::kFloat64: return 8;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt8: return 1;
    default: return 4;
  }
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  bool quick = flags.Has("quick");
  std::vector<int64_t> sizes = flags.IntList("sizes", quick ? "65536,1048576" : "65536,1048576,67108864");
  int reps_flag = static_cast<int>(flags.Int("reps", 0));
  if (flags.HasUnknown()) return 2;
  PrintEnvironment("fingerprint_bench");

  const DataType types[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                            DataType::kBfloat16, DataType::kInt8};
  Table table({"type", "bytes", "fingerprint GB/s", "count GB/s", "fingerprint us", "others' CPUs"});
  FingerprintPolicy policy;
  for (int64_t size : sizes) {
    const size_t bytes = static_cast<size_t>(size);
    // About 8 GB of buffer per measurement (a few tenths of a second, so that
    // the load probe's 10 ms ticks do not dominate), at least 11 repetitions.
    int reps = reps_flag > 0 ? reps_flag : static_cast<int>(std::clamp<int64_t>((int64_t{8} << 30) / size, 11, 100001));
    if (quick) reps = std::min(reps, 101);
    std::vector<unsigned char> buf(bytes);
    for (DataType type : types) {
      Fill(&buf, type);
      LoadProbe probe = LoadProbe::Now();
      volatile uint64_t sink = 0;
      double fp = MedianSeconds(reps, [&] { sink = sink + FingerprintBuffer(buf.data(), bytes, type, policy).hash; });
      std::string count = "-";
      if (IsFloating(type)) {
        double c = MedianSeconds(reps, [&] {
          uint32_t nan = 0, inf = 0;
          CountNonFinite(buf.data(), bytes / Width(type), type, &nan, &inf);
          sink = sink + nan + inf;
        });
        count = Fixed(static_cast<double>(bytes) / c / 1e9, 1);
      }
      table.Add({std::string(DataTypeName(type)), std::to_string(bytes),
                 Fixed(static_cast<double>(bytes) / fp / 1e9, 1), count, Fixed(fp * 1e6, 2),
                 Fixed(LoadProbe::Now().OthersSince(probe), 2)});
    }
  }
  table.Print();
  std::printf("\nDefault policy: hash limit %zu KiB; \"others' CPUs\": what other processes kept busy\n"
              "during the row.\n", policy.hash_limit >> 10);
  return 0;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
