// check_bench: how `replay check` scales with the size of a job: wall time and
// peak memory of CheckTrace over synthetic traces of R ranks x C collectives.
//
// Each synthetic rank runs a data-parallel loop over four communicators: WORLD,
// grad = dup(WORLD), node = split(WORLD, rank / 8) and cross = split(WORLD,
// rank % 8). Per step of five collectives: two gradient allreduces on grad, an
// iallreduce on node (completed by MPI_Wait), an allgather on cross and a loss
// allreduce on WORLD; every call carries call site, fingerprints and
// consistent results, so the check does all of its work and finds nothing.
// That is about 2.2 events per collective.
//
// Traces are generated once into --dir (default /tmp/replay-check-bench) and
// reused: generating 1,024 ranks takes minutes, checking them seconds. Each
// check runs in a child process (this binary with --check-only) so that its
// peak RSS (getrusage of the child) is the check's alone. Before it, another
// child only reads the ranks whole (RankReader, same threads): the decoded size
// of the events, which the check, reading ranks as streams, stays far below
// ("B/event": the check's peak RSS per event of the job), and a yardstick of
// time that does not depend on how busy the machine is.
//
// Usage: check_bench [--ranks=64,256,1024] [--collectives=10000] [--dir=PATH]
//            [--threads=N] [--regenerate] [--reps=1]
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench_support.h"
#include "record/comm_table.h"
#include "replay/check.h"
#include "replay/trace_writer.h"

namespace replay::bench {
namespace {

enum Api : uint16_t { kInit, kFinalize, kAllreduce, kIallreduce, kAllgather, kWait, kCommDup, kCommSplit };
std::vector<std::string> ApiNames() {
  return {"MPI_Init", "MPI_Finalize", "MPI_Allreduce", "MPI_Iallreduce", "MPI_Allgather", "MPI_Wait",
          "MPI_Comm_dup", "MPI_Comm_split"};
}
constexpr uint64_t kModuleBase = 0x555500000000;

Event Op(uint16_t api, OpKind kind, uint64_t comm, uint64_t seq, int64_t count, uint64_t site) {
  Event e = CallOp(api, kind, comm, seq);
  SetFloatCount(&e, count);
  e.op.redop = kind == OpKind::kAllreduce ? RedOp::kSum : RedOp::kNone;
  e.call_site = kModuleBase + site;
  return e;
}

Event Ret(uint16_t api, uint64_t comm, uint64_t seq, uint64_t site) {
  Event e = CallReturn(api, comm, seq);
  e.call_site = kModuleBase + site;
  return e;
}

// The result every member of (comm, seq) receives: equal across ranks.
uint64_t Result(uint64_t comm, uint64_t seq) { return comm * 0x9e3779b97f4a7c15ull + seq; }

class RankWriter {
 public:
  RankWriter(const std::string& dir, int rank, int ranks) : rank_(rank), ranks_(ranks) {
    WriterOptions o;
    o.dir = dir;
    o.header.rank = rank;
    o.header.world_size = ranks;
    o.header.host = "node" + std::to_string(rank / 8);
    o.header.trace_uuid = Uuid{0xc4, 0xec, 0xb0};  // one recording: every rank the same
    o.header.api_names = ApiNames();
    o.header.modules = {Module{"/opt/train/bin/train", kModuleBase, 1 << 24}};
    o.header.environment = {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)}, {"NCCL_ALGO", "ring"}};
    o.manifest.world_size = ranks;
    o.background_thread = false;
    o.block_events = 8192;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) {
      std::fprintf(stderr, "check_bench: %s\n", w.status().ToString().c_str());
      std::exit(1);
    }
    w_ = std::move(w).value();
  }

  void Append(const Event& e) {
    if (!w_->Append(e)) {
      std::fprintf(stderr, "check_bench: append failed on rank %d\n", rank_);
      std::exit(1);
    }
    // The ring is drained only on Flush here; keep it from filling.
    if (++pending_ >= 4096) {
      (void)w_->Flush();
      pending_ = 0;
    }
  }

  uint64_t Create(uint16_t api, uint64_t parent, uint64_t seq, std::vector<int32_t> members, int64_t color) {
    Append(Op(api, OpKind::kCommCreate, parent, seq, 0, 0x100 + api));
    Append(Ret(api, parent, seq, 0x100 + api));
    Event e = CommCreate(api, parent, seq, members, color, rank_);
    Append(e);
    return e.comm_create.comm;
  }

  void Collective(uint16_t api, OpKind kind, uint64_t comm, uint64_t* seq, int64_t count, uint64_t site) {
    ++*seq;
    Event op = Op(api, kind, comm, *seq, count, site);
    op.op.flags |= op_flags::kHasSendHash;
    op.op.send_hash = Result(comm, *seq) ^ static_cast<uint64_t>(rank_);
    Append(op);
    Event ret = Ret(api, comm, *seq, site);
    ret.ret.flags |= op_flags::kHasRecvHash;
    ret.ret.recv_hash = Result(comm, *seq);
    Append(ret);
  }

  void Run(int collectives) {
    uint64_t world = WorldCommId();
    Append(Op(kInit, OpKind::kInit, 0, 0, 0, 0x10));
    Append(Ret(kInit, 0, 0, 0x10));
    Append(WorldCreate(kInit, world, ranks_, rank_));
    std::vector<int32_t> all, node, cross;
    for (int i = 0; i < ranks_; ++i) {
      all.push_back(i);
      if (i / 8 == rank_ / 8) node.push_back(i);
      if (i % 8 == rank_ % 8) cross.push_back(i);
    }
    uint64_t world_seq = 0, grad_seq = 0, node_seq = 0, cross_seq = 0, request = 0;
    uint64_t grad = Create(kCommDup, world, ++world_seq, all, 0);
    uint64_t node_comm = Create(kCommSplit, world, ++world_seq, node, rank_ / 8);
    uint64_t cross_comm = Create(kCommSplit, world, ++world_seq, cross, rank_ % 8);
    for (int done = 0; done < collectives; done += 5) {
      Collective(kAllreduce, OpKind::kAllreduce, grad, &grad_seq, 1 << 20, 0x200);
      Collective(kAllreduce, OpKind::kAllreduce, grad, &grad_seq, 1 << 18, 0x210);
      // A metrics iallreduce, waited for later.
      ++node_seq;
      Event iop = Op(kIallreduce, OpKind::kAllreduce, node_comm, node_seq, 2, 0x300);
      iop.op.flags |= op_flags::kNonBlocking | op_flags::kHasSendHash;
      iop.op.request = ++request;
      iop.op.send_hash = static_cast<uint64_t>(rank_);
      Append(iop);
      Event iret = Ret(kIallreduce, node_comm, node_seq, 0x300);
      iret.ret.request = request;
      Append(iret);
      Collective(kAllgather, OpKind::kAllgather, cross_comm, &cross_seq, 16, 0x400);
      Event wait = Op(kWait, OpKind::kWait, 0, 0, 1, 0x500);
      wait.list = {static_cast<int64_t>(request)};
      Append(wait);
      Event completion = CallCompletion(kWait, node_comm, node_seq, request);
      completion.completion.flags = op_flags::kHasRecvHash;
      completion.completion.recv_hash = Result(node_comm, node_seq);
      Append(completion);
      Append(Ret(kWait, 0, 0, 0x500));
      Collective(kAllreduce, OpKind::kAllreduce, world, &world_seq, 1, 0x600);
    }
    Append(Op(kFinalize, OpKind::kFinalize, 0, 0, 0, 0x20));
    Append(Ret(kFinalize, 0, 0, 0x20));
    Status st = w_->Close(CloseReason::kFinalize);
    if (!st.ok()) {
      std::fprintf(stderr, "check_bench: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    events_ = w_->stats().events_written;
    stored_ = w_->stats().stored_bytes;
  }
  uint64_t events() const { return events_; }
  uint64_t stored() const { return stored_; }

 private:
  int rank_, ranks_;
  std::unique_ptr<TraceWriter> w_;
  int pending_ = 0;
  uint64_t events_ = 0, stored_ = 0;
};

struct TraceInfo {
  uint64_t events = 0;
  uint64_t stored = 0;
};

// Generates the trace once; later runs read the sizes from its stamp file.
TraceInfo Generate(const std::string& dir, int ranks, int collectives, bool regenerate) {
  std::string stamp = dir + "/.check_bench";
  TraceInfo info;
  if (!regenerate) {
    std::ifstream in(stamp);
    if (in >> info.events >> info.stored) return info;
  }
  std::filesystem::remove_all(dir);
  std::fprintf(stderr, "generating %d ranks x %d collectives in %s ...\n", ranks, collectives, dir.c_str());
  double start = NowSeconds();
  std::atomic<int> next{0};
  std::atomic<uint64_t> events{0}, stored{0};
  auto work = [&] {
    for (int r = next++; r < ranks; r = next++) {
      RankWriter w(dir, r, ranks);
      w.Run(collectives);
      events += w.events();
      stored += w.stored();
    }
  };
  std::vector<std::thread> pool;
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  info.events = events;
  info.stored = stored;
  std::ofstream(stamp) << info.events << " " << info.stored << "\n";
  std::fprintf(stderr, "  generated in %.1f s\n", NowSeconds() - start);
  return info;
}

// In the child: only read every rank of `dir` (as the check does, on as many
// threads), print "seconds 0": the floor the check stands on.
int ReadOnly(const std::string& dir, int threads) {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto trace = TraceReader::Open(dir);
  if (!trace.ok()) return 1;
  size_t n = (*trace)->ranks().size();
  if (threads <= 0) threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> events{0};
  double start = NowSeconds();
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      auto r = (*trace)->OpenRank(i);
      if (r.ok()) events += (*r)->events().size();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::printf("%.6f 0\n", NowSeconds() - start);
  return 0;
}

// In the child: check `dir`, print "seconds findings".
int CheckOnly(const std::string& dir, int threads) {
  // As `replay check` does (tools/cmd_check.cpp).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto trace = TraceReader::Open(dir);
  if (!trace.ok()) {
    std::fprintf(stderr, "check_bench: %s\n", trace.status().ToString().c_str());
    return 1;
  }
  CheckOptions options;
  options.threads = threads;
  double start = NowSeconds();
  auto report = CheckTrace(**trace, options);
  double seconds = NowSeconds() - start;
  if (!report.ok()) {
    std::fprintf(stderr, "check_bench: %s\n", report.status().ToString().c_str());
    return 1;
  }
  for (const Finding& f : report->findings) std::fprintf(stderr, "unexpected finding: %s\n", f.title.c_str());
  std::printf("%.6f %zu\n", seconds, report->findings.size());
  return 0;
}

struct Measured {
  double seconds = 0;
  double cpu = 0;
  double others = 0;  // CPUs other processes kept busy meanwhile
  long max_rss_kib = 0;
  size_t findings = 0;
};

Measured MeasureInChild(const char* self, const std::string& mode, const std::string& dir, int threads) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    std::string a1 = "--" + mode + "=" + dir, a2 = "--threads=" + std::to_string(threads);
    execl(self, self, a1.c_str(), a2.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  LoadProbe before = LoadProbe::Now();
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  Measured m;
  // The child's CPU time is not this process's: count it as the check's, not others'.
  LoadProbe after = LoadProbe::Now();
  std::istringstream in(out);
  in >> m.seconds >> m.findings;
  m.max_rss_kib = ru.ru_maxrss;
  m.cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  double wall = after.wall - before.wall;
  m.others = wall <= 0 ? 0 : std::max(0.0, (after.busy - before.busy) - m.cpu) / wall;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "check_bench: the check of %s failed\n", dir.c_str());
    std::exit(1);
  }
  return m;
}


int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  int threads = static_cast<int>(flags.Int("threads", 0));
  if (flags.Has("check-only")) return CheckOnly(flags.Str("check-only", ""), threads);
  if (flags.Has("read-only")) return ReadOnly(flags.Str("read-only", ""), threads);
  std::vector<int64_t> ranks = flags.IntList("ranks", "64,256,1024");
  int collectives = static_cast<int>(flags.Int("collectives", 10000));
  std::string base = flags.Str("dir", "/tmp/replay-check-bench");
  bool regenerate = flags.Has("regenerate");
  int reps = static_cast<int>(flags.Int("reps", 1));
  for (const std::string& u : flags.Unused()) {
    std::fprintf(stderr, "check_bench: unknown flag %s\n", u.c_str());
    return 2;
  }
  PrintEnvironment("check_bench");
  Table table({"ranks", "collectives/rank", "events", "on disk", "read s", "read RSS MiB", "check s", "cpu s",
               "Mevents/s", "peak RSS MiB", "B/event", "findings", "others"});
  for (int64_t ranks_n : ranks) {
    const int r = static_cast<int>(ranks_n);
    std::string dir = base + "/r" + std::to_string(r) + "-c" + std::to_string(collectives);
    TraceInfo info = Generate(dir, r, collectives, regenerate);
    for (int rep = 0; rep < reps; ++rep) {
      Measured read = MeasureInChild("/proc/self/exe", "read-only", dir, threads);
      Measured m = MeasureInChild("/proc/self/exe", "check-only", dir, threads);
      table.Add({std::to_string(r), std::to_string(collectives), std::to_string(info.events),
                 Fixed(static_cast<double>(info.stored) / (1 << 20), 1) + " MiB", Fixed(read.seconds, 2),
                 Fixed(static_cast<double>(read.max_rss_kib) / 1024, 0), Fixed(m.seconds, 2), Fixed(m.cpu, 2),
                 Fixed(static_cast<double>(info.events) / m.seconds / 1e6, 2),
                 Fixed(static_cast<double>(m.max_rss_kib) / 1024, 0),
                 Fixed(static_cast<double>(m.max_rss_kib) * 1024 / static_cast<double>(info.events), 0),
                 std::to_string(m.findings), Fixed(m.others, 2)});
    }
  }
  table.Print();
  return 0;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
