// bench_support.h: what the trace benchmarks share: a cycle-accurate timer, order
// statistics, a scratch directory, a plain-text table, and the synthetic training
// stream that stands in for a recorded data-parallel job.
//
// Nothing here is thread-safe unless said so; each benchmark thread owns its own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replay/event.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace replay::bench {

// ---------------------------------------------------------------------------
// Timing

// A serialised TSC read for the start of a timed region: earlier instructions
// retire before it, later ones do not start before it.
inline uint64_t TscBegin() {
#if defined(__x86_64__)
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
#else
  return 0;
#endif
}

// A TSC read for the end of a timed region: waits for the region to retire.
inline uint64_t TscEnd() {
#if defined(__x86_64__)
  unsigned aux;
  uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
#else
  return 0;
#endif
}

// Nanoseconds per TSC tick, measured against CLOCK_MONOTONIC over ~200 ms
// (once per process; later calls return the same value).
double NsPerTick();

// Seconds on CLOCK_MONOTONIC, and CPU seconds of the calling thread / process.
double NowSeconds();
double ThreadCpuSeconds();
double ProcessCpuSeconds();

// CPU seconds every CPU of the machine has spent busy since boot (/proc/stat).
// Sampled around a run together with ProcessCpuSeconds, it tells how much of the
// machine other processes took meanwhile: on a 2-CPU machine a benchmark shares
// its cores with whatever else runs, and a number measured under load says so.
double MachineBusySeconds();

// Average number of CPUs other processes kept busy between two samples.
struct LoadProbe {
  double wall = 0, busy = 0, own = 0;
  static LoadProbe Now() { return {NowSeconds(), MachineBusySeconds(), ProcessCpuSeconds()}; }
  double OthersSince(const LoadProbe& start) const {
    double w = wall - start.wall;
    return w <= 0 ? 0 : std::max(0.0, (busy - start.busy) - (own - start.own)) / w;
  }
};

// Order statistics of a sample (the vector is sorted in place).
struct Summary {
  size_t n = 0;
  double min = 0, median = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};
Summary Summarize(std::vector<double>* values);
double Median(std::vector<double> values);

// ---------------------------------------------------------------------------
// Output

// A left-aligned text table, printed with a rule under the heading.
class Table {
 public:
  explicit Table(std::vector<std::string> heading) { rows_.push_back(std::move(heading)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Fixed(double v, int decimals);

// Command-line flags of the form --name=value (or --name for booleans).
class Flags {
 public:
  Flags(int argc, char** argv);
  bool Has(std::string_view name) const;
  int64_t Int(std::string_view name, int64_t fallback) const;
  // A comma-separated list of integers ("65536,1048576").
  std::vector<int64_t> IntList(std::string_view name, std::string_view fallback) const;
  std::string Str(std::string_view name, std::string fallback) const;
  // Flags that no accessor asked for; a benchmark rejects them after parsing.
  std::vector<std::string> Unused() const;
  // After the last accessor: whether a flag was given that none asked for; if
  // so, says "unknown flag --NAME" of the first on stderr.
  bool HasUnknown() const;

 private:
  std::vector<std::pair<std::string, std::string>> flags_;
  mutable std::vector<bool> used_;
};

// Prints the machine and build facts a result needs beside it.
void PrintEnvironment(std::string_view benchmark);

// A directory removed (recursively) when this goes out of scope. Created under
// `parent` (default: $TMPDIR or /tmp).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent = "");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// The synthetic training stream

// A data-parallel training loop as one rank of a recording sees it. Each step:
//   for each gradient bucket:
//     cuda eventRecord (compute stream), cuda streamWaitEvent (comm stream),
//     ncclAllReduce op + ret on the gradient communicator: seq advances by one,
//       the op carries a send fingerprint and the ret a receive fingerprint,
//       both random 64-bit values;
//   MPI_Bcast op + ret of a small control message on the world communicator
//     (this rank is not the root: the ret carries a receive fingerprint);
//   every `mark_every` steps, a mark "step" with the step number.
// Time advances between events by a per-position gap (µs for enqueue-only
// calls, ms for compute) plus uniform jitter of 1/`jitter_div` of the gap
// (at least `min_jitter_ns`), so the low bits of every delta are noise.
struct StreamOptions {
  int buckets = 4;
  int mark_every = 100;
  uint64_t seed = 1;
  int64_t jitter_div = 16;
  int64_t min_jitter_ns = 64;
};

class TrainingStream {
 public:
  explicit TrainingStream(const StreamOptions& options = {});

  // The next event, with index and time_ns set. Valid until the next call.
  const Event& Next();

  uint64_t events() const { return events_; }
  // Events so far that carry a fingerprint (send or receive hash).
  uint64_t fingerprints() const { return fingerprints_; }
  // Bits of timing noise drawn so far (log2 of each jitter range): a floor on
  // what any encoding must spend on timestamps.
  double jitter_bits() const { return jitter_bits_; }
  // Events per step, on average (marks are rare).
  double events_per_step() const;

 private:
  struct Slot {
    enum Update : uint8_t { kNone, kGradOp, kGradRet, kWorldOp, kWorldRet, kMark };
    Event event;
    int64_t gap_ns = 0;
    Update update = kNone;
    uint64_t jitter_range = 1;  // uniform jitter in [0, jitter_range) ns
    double jitter_bits = 0;     // log2(jitter_range)
  };
  uint64_t Random();
  uint64_t Fingerprint();  // a random one, counted
  StreamOptions options_;
  std::vector<Slot> slots_;
  Slot mark_;
  size_t pos_ = 0;
  uint64_t step_ = 0;
  uint64_t grad_seq_ = 0;
  uint64_t world_seq_ = 0;
  uint64_t events_ = 0;
  uint64_t fingerprints_ = 0;
  int64_t time_ns_ = 0;
  double jitter_bits_ = 0;
  uint64_t rng_;  // splitmix64 state
  const Event* current_ = nullptr;
};

// API ids the stream uses (RankHeader.apiNames order).
std::vector<std::string> StreamApiNames();

// A call's op and return events as the recorder writes them, for synthetic
// jobs: `api` on `comm` at collective sequence number `seq` (0 for a message),
// no peer, no root, no count; callers set what their call has.
Event CallOp(uint16_t api, OpKind kind, uint64_t comm, uint64_t seq);
Event CallReturn(uint16_t api, uint64_t comm, uint64_t seq);
// The completion of `request` by a wait call `api`, of a call on `comm` at
// sequence number `seq`: no source, no count.
Event CallCompletion(uint16_t api, uint64_t comm, uint64_t seq, uint64_t request);

// Makes a call's op event carry `count` float32 elements, and their bytes.
void SetFloatCount(Event* op, int64_t count);

// The creation of a communicator as world rank `rank` records it, no device:
// MPI_COMM_WORLD `comm` of `size` ranks, by `api`; or the communicator of
// `members` (world ranks, `rank` among them) that `api` derives from `parent`
// at its sequence number `parent_seq`, for `color`.
Event WorldCreate(uint16_t api, uint64_t comm, int32_t size, int32_t rank);
Event CommCreate(uint16_t api, uint64_t parent, uint64_t parent_seq, const std::vector<int32_t>& members,
                 int64_t color, int32_t rank);

}  // namespace replay::bench
