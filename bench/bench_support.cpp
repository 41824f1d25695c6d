#include "bench_support.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "record/comm_table.h"

namespace replay::bench {

namespace {

double TimespecSeconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace

double NowSeconds() { return TimespecSeconds(CLOCK_MONOTONIC); }
double ThreadCpuSeconds() { return TimespecSeconds(CLOCK_THREAD_CPUTIME_ID); }
double ProcessCpuSeconds() { return TimespecSeconds(CLOCK_PROCESS_CPUTIME_ID); }

double NsPerTick() {
  static const double value = [] {
    double t0 = NowSeconds();
    uint64_t c0 = TscBegin();
    while (NowSeconds() - t0 < 0.2) {
    }
    uint64_t c1 = TscEnd();
    double t1 = NowSeconds();
    return (t1 - t0) * 1e9 / static_cast<double>(c1 - c0);
  }();
  return value;
}

double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;  // the "cpu" line sums every CPU
  // user nice system idle iowait irq softirq steal ...
  double v[8] = {};
  for (double& x : v) in >> x;
  double busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

Summary Summarize(std::vector<double>* values) {
  Summary s;
  std::vector<double>& v = *values;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  };
  s.min = v.front();
  s.median = at(0.5);
  s.p90 = at(0.9);
  s.p99 = at(0.99);
  s.p999 = at(0.999);
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

double Median(std::vector<double> values) { return Summarize(&values).median; }

void Table::Print() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows_[r].size(); ++i) {
      std::string cell = rows_[r][i];
      if (i + 1 < rows_[r].size()) cell.resize(width[i] + 2, ' ');
      line += cell;
    }
    std::printf("%s\n", line.c_str());
    if (r == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      std::printf("%s\n", std::string(total > 2 ? total - 2 : total, '-').c_str());
    }
  }
  std::fflush(stdout);
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

Flags::Flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      flags_.emplace_back(a, "");  // reported as unused
      continue;
    }
    size_t eq = a.find('=');
    if (eq == std::string::npos) {
      flags_.emplace_back(a.substr(2), "");
    } else {
      flags_.emplace_back(a.substr(2, eq - 2), a.substr(eq + 1));
    }
  }
  used_.assign(flags_.size(), false);
}

bool Flags::Has(std::string_view name) const {
  bool found = false;
  for (size_t i = 0; i < flags_.size(); ++i) {
    if (flags_[i].first == name) {
      used_[i] = true;
      found = true;
    }
  }
  return found;
}

int64_t Flags::Int(std::string_view name, int64_t fallback) const {
  std::string v = Str(name, "");
  if (v.empty()) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (end == v.c_str() || *end != '\0') {
    std::fprintf(stderr, "--%s wants an integer, got '%s'\n", std::string(name).c_str(), v.c_str());
    std::exit(2);
  }
  return x;
}

std::vector<int64_t> Flags::IntList(std::string_view name, std::string_view fallback) const {
  std::string v = Str(name, std::string(fallback));
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= v.size()) {
    size_t comma = v.find(',', at);
    if (comma == std::string::npos) comma = v.size();
    std::string item = v.substr(at, comma - at);
    char* end = nullptr;
    long long x = std::strtoll(item.c_str(), &end, 0);
    if (item.empty() || *end != '\0') {
      std::fprintf(stderr, "--%s wants integers separated by commas, got '%s'\n", std::string(name).c_str(),
                   v.c_str());
      std::exit(2);
    }
    out.push_back(x);
    at = comma + 1;
  }
  return out;
}

std::string Flags::Str(std::string_view name, std::string fallback) const {
  for (size_t i = flags_.size(); i-- > 0;) {
    if (flags_[i].first == name) {
      used_[i] = true;
      return flags_[i].second;
    }
  }
  return fallback;
}

std::vector<std::string> Flags::Unused() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < flags_.size(); ++i) {
    if (!used_[i]) out.push_back(flags_[i].first);
  }
  return out;
}

bool Flags::HasUnknown() const {
  std::vector<std::string> unused = Unused();
  if (!unused.empty()) std::fprintf(stderr, "unknown flag --%s\n", unused[0].c_str());
  return !unused.empty();
}

void PrintEnvironment(std::string_view benchmark) {
  utsname u{};
  uname(&u);
  char date[32];
  time_t now = time(nullptr);
  strftime(date, sizeof(date), "%Y-%m-%d %H:%M", localtime(&now));
  std::printf("# %.*s  %s\n", static_cast<int>(benchmark.size()), benchmark.data(), date);
  std::printf("# cpu: %s, %ld online CPUs, kernel %s\n", CpuModel().c_str(),
              sysconf(_SC_NPROCESSORS_ONLN), u.release);
#if defined(__clang__)
  std::printf("# compiler: clang %s", __clang_version__);
#elif defined(__GNUC__)
  std::printf("# compiler: gcc %s", __VERSION__);
#endif
#ifdef NDEBUG
  std::printf(", NDEBUG");
#endif
#ifdef __OPTIMIZE__
  std::printf(", optimised");
#endif
  std::printf("\n# TSC: %.4f ns/tick\n", NsPerTick());
}

ScratchDir::ScratchDir(const std::string& parent) {
  std::string base = parent;
  if (base.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string tmpl = base + "/replay-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + base);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

// ---------------------------------------------------------------------------

namespace {

constexpr uint16_t kApiAllReduce = 1;
constexpr uint16_t kApiBcast = 2;
constexpr uint16_t kApiEventRecord = 3;
constexpr uint16_t kApiStreamWaitEvent = 4;

constexpr uint64_t kGradComm = 0x6a09e667f3bcc908;
constexpr uint64_t kWorldComm = 0xbb67ae8584caa73b;
constexpr uint64_t kComputeStream = 0x55d0c0a1e000;
constexpr uint64_t kCommStream = 0x55d0c0a1f200;
constexpr uint64_t kCallSiteBase = 0x7f3a1c2d4e10;

}  // namespace

std::vector<std::string> StreamApiNames() {
  return {"MPI_Init", "ncclAllReduce", "MPI_Bcast", "cudaEventRecord", "cudaStreamWaitEvent"};
}

uint64_t TrainingStream::Random() {
  uint64_t z = (rng_ += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

TrainingStream::TrainingStream(const StreamOptions& options) : options_(options), rng_(options.seed) {
  auto slot = [&](Event e, int64_t gap_ns, Slot::Update update) {
    Slot s;
    s.event = std::move(e);
    s.gap_ns = gap_ns;
    s.update = update;
    s.jitter_range = static_cast<uint64_t>(
        std::max<int64_t>(options_.min_jitter_ns, gap_ns / std::max<int64_t>(1, options_.jitter_div)));
    s.jitter_bits = std::log2(static_cast<double>(s.jitter_range));
    return s;
  };
  auto add = [&](Event e, int64_t gap_ns, Slot::Update update) {
    e.call_site = kCallSiteBase + slots_.size() * 0x1c3;
    slots_.push_back(slot(std::move(e), gap_ns, update));
  };
  for (int b = 0; b < options_.buckets; ++b) {
    uint64_t cuda_event = 0x55d0c0b2f000 + static_cast<uint64_t>(b) * 0x40;
    add(Event::Make(CudaEvent{CudaOp::kEventRecord, 0, 0, kComputeStream, cuda_event, 0, 0, 0}),
        5'000'000, Slot::kNone);  // a slice of the backward pass
    add(Event::Make(CudaEvent{CudaOp::kStreamWaitEvent, 0, 0, kCommStream, cuda_event, 0,
                              kCommStream, 0}),
        1'500, Slot::kNone);
    int64_t count = 6'553'600 - b * 524'288;
    OpEvent o{};
    o.api = kApiAllReduce;
    o.kind = OpKind::kAllreduce;
    o.flags = op_flags::kHasSendHash | op_flags::kDevice | op_flags::kInPlace;
    o.comm = kGradComm;
    o.count = count;
    o.dtype = DataType::kFloat32;
    o.redop = RedOp::kSum;
    o.dtype_size = 4;
    o.root = -1;
    o.peer = kNoPeer;
    o.send_buf = 0x7f1200000000 + static_cast<uint64_t>(b) * 0x2000000;
    o.recv_buf = o.send_buf;
    o.stream = kCommStream;
    o.bytes = static_cast<uint64_t>(count) * 4;
    add(Event::Make(o), 2'000, Slot::kGradOp);
    ReturnEvent r{};
    r.api = kApiAllReduce;
    r.flags = op_flags::kHasRecvHash | op_flags::kDevice | op_flags::kInPlace;
    r.comm = kGradComm;
    r.source = kNoPeer;
    r.recv_count = -1;
    add(Event::Make(r), 12'000, Slot::kGradRet);
  }
  OpEvent o{};
  o.api = kApiBcast;
  o.kind = OpKind::kBcast;
  o.comm = kWorldComm;
  o.count = 4;
  o.dtype = DataType::kInt64;
  o.redop = RedOp::kNone;
  o.dtype_size = 8;
  o.root = 0;
  o.peer = kNoPeer;
  o.send_buf = 0x7ffd3c2a1b40;
  o.recv_buf = o.send_buf;
  add(Event::Make(o), 3'000'000, Slot::kWorldOp);  // optimizer step
  ReturnEvent r{};
  r.api = kApiBcast;
  r.flags = op_flags::kHasRecvHash;
  r.comm = kWorldComm;
  r.source = kNoPeer;
  r.recv_count = -1;
  add(Event::Make(r), 25'000, Slot::kWorldRet);
  mark_ = slot(Event::MakeMark("step", 0), 1'000, Slot::kMark);
  mark_.event.call_site = kCallSiteBase - 0x100;
}

uint64_t TrainingStream::Fingerprint() {
  ++fingerprints_;
  return Random();
}

double TrainingStream::events_per_step() const {
  return static_cast<double>(slots_.size()) +
         (options_.mark_every > 0 ? 1.0 / options_.mark_every : 0.0);
}

const Event& TrainingStream::Next() {
  Slot* slot;
  if (pos_ == 0 && options_.mark_every > 0 && step_ % options_.mark_every == 0 &&
      (current_ == nullptr || current_ != &mark_.event)) {
    slot = &mark_;
  } else {
    slot = &slots_[pos_];
    if (++pos_ == slots_.size()) {
      pos_ = 0;
      ++step_;
    }
  }
  Event& e = slot->event;
  switch (slot->update) {
    case Slot::kNone:
      break;
    case Slot::kGradOp:
      e.op.seq = ++grad_seq_;
      e.op.send_hash = Fingerprint();
      break;
    case Slot::kWorldOp:
      e.op.seq = ++world_seq_;
      break;
    case Slot::kGradRet:
    case Slot::kWorldRet:
      e.ret.seq = slot->update == Slot::kGradRet ? grad_seq_ : world_seq_;
      e.ret.recv_hash = Fingerprint();
      break;
    case Slot::kMark:
      e.mark.value = static_cast<int64_t>(step_);
      break;
  }
  time_ns_ += slot->gap_ns + static_cast<int64_t>(Random() % slot->jitter_range);
  jitter_bits_ += slot->jitter_bits;
  e.index = events_++;
  e.time_ns = time_ns_;
  current_ = &e;
  return e;
}

Event CallOp(uint16_t api, OpKind kind, uint64_t comm, uint64_t seq) {
  OpEvent o{};
  o.api = api;
  o.kind = kind;
  o.comm = comm;
  o.seq = seq;
  o.root = -1;
  o.peer = kNoPeer;
  o.recv_peer = kNoPeer;
  return Event::Make(o);
}

void SetFloatCount(Event* op, int64_t count) {
  op->op.count = count;
  op->op.dtype = DataType::kFloat32;
  op->op.dtype_size = 4;
  op->op.bytes = static_cast<uint64_t>(count) * 4;
}

namespace {

// What a call's return and a request's completion both start from: no source,
// nothing received.
template <typename Result>
Result CallResult(uint16_t api, uint64_t comm, uint64_t seq) {
  Result r{};
  r.api = api;
  r.comm = comm;
  r.seq = seq;
  r.source = kNoPeer;
  r.recv_count = -1;
  return r;
}

}  // namespace

Event CallReturn(uint16_t api, uint64_t comm, uint64_t seq) {
  return Event::Make(CallResult<ReturnEvent>(api, comm, seq));
}

Event CallCompletion(uint16_t api, uint64_t comm, uint64_t seq, uint64_t request) {
  CompletionEvent c = CallResult<CompletionEvent>(api, comm, seq);
  c.request = request;
  return Event::Make(c);
}

Event WorldCreate(uint16_t api, uint64_t comm, int32_t size, int32_t rank) {
  std::vector<int32_t> all(static_cast<size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  Event e = CommCreate(api, 0, 0, all, 0, rank);
  e.comm_create.comm = comm;
  e.comm_create.flags = comm_flags::kWorld;
  return e;
}

Event CommCreate(uint16_t api, uint64_t parent, uint64_t parent_seq, const std::vector<int32_t>& members,
                 int64_t color, int32_t rank) {
  CommCreateEvent c{};
  c.comm = DerivedCommId(parent, parent_seq, members.front());
  c.parent = parent;
  c.api = api;
  c.parent_seq = parent_seq;
  c.color = color;
  c.size = static_cast<int32_t>(members.size());
  c.rank = static_cast<int32_t>(std::find(members.begin(), members.end(), rank) - members.begin());
  c.device = -1;
  Event e = Event::Make(c);
  e.list.assign(members.begin(), members.end());
  return e;
}

}  // namespace replay::bench
