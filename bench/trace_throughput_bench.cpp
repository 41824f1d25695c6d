// trace_throughput_bench: sustained events per second of one rank: one
// application thread appends the synthetic training stream (bench_support.h) as
// fast as it can while the writer thread drains, encodes, compresses and writes
// it. The clock runs from the first append until Close() returns, so everything
// appended is in the events stream (and synced) when it stops. A run counts only
// if nothing was dropped and every event was written.
//
// Also reported: the producer's own rate (until its last append returned), the
// CPU time each side spent per event, and the stored bytes per event.
//
// Usage: trace_throughput_bench [--events=N] [--reps=5] [--dir=PATH]
//            [--zstd-level=L] [--ring-bytes=B] [--block-events=N]
//            [--max-others-pct=25] [--quick]
// --dir chooses where the trace goes (default $TMPDIR or /tmp); compare a disk
// with /dev/shm to see what the file system costs.
#include <cstdio>

#include "bench_support.h"
#include "replay/trace_writer.h"

namespace replay::bench {
namespace {

struct Run {
  double seconds = 0;           // first append to Close() returning
  double producer_seconds = 0;  // first append to last append returning
  double producer_cpu = 0;
  double writer_cpu = 0;        // process CPU minus the producer's
  double others = 0;             // CPUs other processes kept busy meanwhile
  WriterStats stats;
};

// Appends one stream event through the typed hot path.
bool AppendEvent(TraceWriter& w, const Event& e) {
  switch (e.kind) {
    case EventKind::kOp: return w.AppendBody(EventKind::kOp, e.op, e.call_site, e.list);
    case EventKind::kReturn: return w.AppendBody(EventKind::kReturn, e.ret, e.call_site);
    case EventKind::kCuda: return w.AppendBody(EventKind::kCuda, e.cuda, e.call_site);
    case EventKind::kMark: return w.AppendBody(EventKind::kMark, e.mark, e.call_site, {}, e.text);
    default: return w.Append(e);
  }
}

WriterOptions Options(const std::string& dir, const Flags& flags) {
  WriterOptions o;
  o.dir = dir;
  o.header.rank = 0;
  o.header.world_size = 1;
  o.header.host = "bench";
  o.header.api_names = StreamApiNames();
  o.zstd_level = static_cast<int>(flags.Int("zstd-level", o.zstd_level));
  o.ring_slot_bytes = static_cast<uint64_t>(flags.Int("ring-bytes", static_cast<int64_t>(o.ring_slot_bytes)));
  o.block_events = static_cast<uint32_t>(flags.Int("block-events", o.block_events));
  o.on_failure = [](const Status& s) { std::fprintf(stderr, "writer failed: %s\n", s.ToString().c_str()); };
  return o;
}

Run RunOnce(const std::string& parent, const Flags& flags, uint64_t n) {
  ScratchDir dir(parent);
  auto opened = TraceWriter::Open(Options(dir.path() + "/trace", flags));
  if (!opened.ok()) {
    std::fprintf(stderr, "cannot open the writer: %s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  TraceWriter& w = **opened;
  TrainingStream stream;
  Run run;
  LoadProbe probe = LoadProbe::Now();
  double cpu0 = ProcessCpuSeconds();
  double tcpu0 = ThreadCpuSeconds();
  double t0 = NowSeconds();
  uint64_t failed = 0;
  for (uint64_t i = 0; i < n; ++i) failed += !AppendEvent(w, stream.Next());
  run.producer_seconds = NowSeconds() - t0;
  run.producer_cpu = ThreadCpuSeconds() - tcpu0;
  Status closed = w.Close(CloseReason::kExit);
  run.seconds = NowSeconds() - t0;
  run.writer_cpu = ProcessCpuSeconds() - cpu0 - run.producer_cpu;
  run.others = LoadProbe::Now().OthersSince(probe);
  run.stats = w.stats();
  if (!closed.ok() || failed != 0 || run.stats.dropped != 0 || run.stats.events_written != n) {
    std::fprintf(stderr, "run invalid: close %s, %llu appends refused, %llu dropped, %llu of %llu written\n",
                 closed.ToString().c_str(), static_cast<unsigned long long>(failed),
                 static_cast<unsigned long long>(run.stats.dropped),
                 static_cast<unsigned long long>(run.stats.events_written),
                 static_cast<unsigned long long>(n));
    std::exit(1);
  }
  return run;
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  bool quick = flags.Has("quick");
  uint64_t n = static_cast<uint64_t>(flags.Int("events", quick ? 1'000'000 : 20'000'000));
  int reps = static_cast<int>(flags.Int("reps", quick ? 1 : 5));
  std::string parent = flags.Str("dir", "");
  double max_others = static_cast<double>(flags.Int("max-others-pct", 25)) / 100;
  Options("", flags);  // marks the writer flags as known
  if (flags.HasUnknown()) return 2;
  PrintEnvironment("trace_throughput_bench");
  replay::WriterOptions defaults = Options("", flags);
  std::printf("# %llu events per run, %d runs; zstd level %d, ring %llu bytes per thread, "
              "at most %u events per block; trace under %s\n\n",
              static_cast<unsigned long long>(n), reps, defaults.zstd_level,
              static_cast<unsigned long long>(defaults.ring_slot_bytes), defaults.block_events,
              parent.empty() ? "$TMPDIR or /tmp" : parent.c_str());

  // The generator alone, so its share of the producer's time is known.
  {
    TrainingStream stream;
    uint64_t sink = 0;
    double t0 = NowSeconds();
    for (uint64_t i = 0; i < n; ++i) sink += stream.Next().index;
    double secs = NowSeconds() - t0;
    std::printf("# stream generator alone: %.1f ns/event (checksum %llu)\n\n",
                secs * 1e9 / static_cast<double>(n), static_cast<unsigned long long>(sink & 1));
  }

  Table table({"run", "M events/s (end to end)", "producer M/s", "producer CPU ns/ev",
               "writer CPU ns/ev", "stored B/ev", "blocks", "dropped", "others' CPUs"});
  std::vector<double> rate, prate, pcpu, wcpu, bytes, others;
  int discarded = 0;
  for (int r = 0; r < reps;) {
    Run run = RunOnce(parent, flags, n);
    double dn = static_cast<double>(n);
    if (run.others > max_others && discarded < 4 * reps) {
      ++discarded;
      table.Add({"(load)", Fixed(dn / run.seconds / 1e6, 2), "-", "-", "-", "-", "-", "-", Fixed(run.others, 2)});
      continue;
    }
    ++r;
    rate.push_back(dn / run.seconds / 1e6);
    prate.push_back(dn / run.producer_seconds / 1e6);
    pcpu.push_back(run.producer_cpu * 1e9 / dn);
    wcpu.push_back(run.writer_cpu * 1e9 / dn);
    bytes.push_back(static_cast<double>(run.stats.stored_bytes) / dn);
    others.push_back(run.others);
    table.Add({std::to_string(r), Fixed(rate.back(), 2), Fixed(prate.back(), 2),
               Fixed(pcpu.back(), 1), Fixed(wcpu.back(), 1), Fixed(bytes.back(), 2),
               std::to_string(run.stats.blocks_written), std::to_string(run.stats.dropped),
               Fixed(run.others, 2)});
  }
  table.Add({"median", Fixed(Median(rate), 2), Fixed(Median(prate), 2), Fixed(Median(pcpu), 1),
             Fixed(Median(wcpu), 1), Fixed(Median(bytes), 2), "-", "-", Fixed(Median(others), 2)});
  table.Print();
  std::printf("\nA run during which other processes kept more than %.2f CPUs busy on average is\n"
              "shown as (load), left out of the median and repeated (at most %d times).\n",
              max_others, 4 * reps);
  return 0;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
