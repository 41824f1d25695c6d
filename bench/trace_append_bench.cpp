// trace_append_bench: latency of TraceWriter::AppendBody(kOp, OpEvent) on the
// calling thread, with the background writer running and draining.
//
// Two measurements, because each distorts in its own way:
//  - per call: every append bracketed by serialising TSC reads; the median cost
//    of an empty bracket (measured the same way) is subtracted. Gives the
//    distribution (median, p99, ...) but the fences disturb the pipelining a
//    real caller would enjoy.
//  - batched: one bracket around `batch` back-to-back appends, divided by the
//    batch size (empty bracket subtracted). Closer to the cost inside a loop of
//    calls, but a mean: a slow append hides in its batch.
// Both run at a paced rate (the caller "works" between appends by spinning until
// the next deadline), so the writer keeps up as it would in a real job, and
// back-to-back (no pacing: the writer falls behind and full-ring waits show up in
// the tail).
//
// Usage: trace_append_bench [--samples=N] [--rates=1000000,4000000] [--batch=64]
//                           [--ring-kib=1024] [--flush-ms=1000]
//                           [--dir=PATH] [--max-others-pct=25] [--quick]
// --ring-kib and --flush-ms set the writer's ring slot size and flush interval
// (REPLAY_RING_KB and REPLAY_FLUSH_MS of a recorded job).
#include <cstdio>

#include "bench_support.h"
#include "replay/trace_writer.h"

namespace replay::bench {
namespace {

OpEvent AllreduceBody() {
  TrainingStream stream;
  for (;;) {
    const Event& e = stream.Next();
    if (e.kind == EventKind::kOp) return e.op;
  }
}

struct Pacer {
  uint64_t gap_ticks;  // 0: no pacing
  uint64_t next = 0;
  void Wait() {
    if (gap_ticks == 0) return;
    uint64_t now = TscBegin();
    if (next == 0 || now > next + 1000 * gap_ticks) next = now;  // don't build up a debt
    while (TscBegin() < next) _mm_pause();
    next += gap_ticks;
  }
};

double EmptyBracketTicks(size_t samples) {
  std::vector<double> t(samples);
  for (size_t i = 0; i < samples; ++i) {
    uint64_t a = TscBegin();
    uint64_t b = TscEnd();
    t[i] = static_cast<double>(b - a);
  }
  return Median(std::move(t));
}

struct Latency {
  Summary per_call;   // ns, bracket cost subtracted
  Summary batched;    // ns per append, bracket cost subtracted
  double others = 0;  // CPUs other processes kept busy meanwhile
};

Latency Measure(TraceWriter& w, OpEvent& op, size_t samples, uint64_t gap_ticks, size_t batch,
               double bracket_ticks) {
  const double ns = NsPerTick();
  Latency r;
  LoadProbe probe = LoadProbe::Now();
  std::vector<double> per_call(samples);
  Pacer pacer{gap_ticks};
  for (size_t i = 0; i < samples; ++i) {
    pacer.Wait();
    op.seq++;
    op.send_hash = op.send_hash * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t a = TscBegin();
    bool ok = w.AppendBody(EventKind::kOp, op, 0x7f3a1c2d4e10);
    uint64_t b = TscEnd();
    per_call[i] = (static_cast<double>(b - a) - bracket_ticks) * ns;
    if (!ok) std::abort();
  }
  r.per_call = Summarize(&per_call);

  size_t batches = std::max<size_t>(1, samples / batch);
  std::vector<double> per_batch(batches);
  Pacer batch_pacer{gap_ticks * batch};
  for (size_t k = 0; k < batches; ++k) {
    batch_pacer.Wait();
    uint64_t a = TscBegin();
    for (size_t i = 0; i < batch; ++i) {
      op.seq++;
      w.AppendBody(EventKind::kOp, op, 0x7f3a1c2d4e10);
    }
    uint64_t b = TscEnd();
    per_batch[k] = (static_cast<double>(b - a) - bracket_ticks) * ns / static_cast<double>(batch);
  }
  r.batched = Summarize(&per_batch);
  r.others = LoadProbe::Now().OthersSince(probe);
  return r;
}

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  bool quick = flags.Has("quick");
  size_t samples = static_cast<size_t>(flags.Int("samples", quick ? 200'000 : 2'000'000));
  std::vector<int64_t> rates = flags.IntList("rates", "1000000,4000000");
  size_t batch = static_cast<size_t>(flags.Int("batch", 64));
  std::string parent = flags.Str("dir", "");
  int64_t ring_kib = flags.Int("ring-kib", 1024);
  int64_t flush_ms = flags.Int("flush-ms", 1000);
  double max_others = static_cast<double>(flags.Int("max-others-pct", 25)) / 100;
  if (flags.HasUnknown()) return 2;
  PrintEnvironment("trace_append_bench");

  ScratchDir dir(parent);
  WriterOptions o;
  o.dir = dir.path() + "/trace";
  o.header.rank = 0;
  o.header.world_size = 1;
  o.header.api_names = StreamApiNames();
  o.ring_slot_bytes = static_cast<uint64_t>(ring_kib) << 10;
  o.flush_interval_ns = flush_ms * 1'000'000;
  auto opened = TraceWriter::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "cannot open the writer: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  TraceWriter& w = **opened;
  OpEvent op = AllreduceBody();

  // Warm up: claim the thread's slot and fault in every page of it (several laps).
  Measure(w, op, 4 * o.ring_slot_bytes / 128, NsPerTick() > 0 ? static_cast<uint64_t>(1000 / NsPerTick()) : 0,
          batch, 0);
  double bracket = EmptyBracketTicks(samples);
  std::printf("# %zu samples per row, batches of %zu; empty bracket %.1f ns (subtracted)\n\n",
              samples, batch, bracket * NsPerTick());

  Table table({"mode", "per-call median", "p90", "p99", "p99.9", "max", "batched median",
               "batched p99", "others' CPUs"});
  auto row = [&](const std::string& name, const Latency& r) {
    table.Add({name, Fixed(r.per_call.median, 1), Fixed(r.per_call.p90, 1), Fixed(r.per_call.p99, 1),
               Fixed(r.per_call.p999, 1), Fixed(r.per_call.max, 0), Fixed(r.batched.median, 1),
               Fixed(r.batched.p99, 1), Fixed(r.others, 2)});
  };
  // A row measured while other processes kept the machine busy is shown, and
  // measured again (a few times at most).
  auto measure = [&](const std::string& name, uint64_t gap) {
    for (int attempt = 0;; ++attempt) {
      Latency r = Measure(w, op, samples, gap, batch, bracket);
      if (r.others <= max_others || attempt == 4) {
        row(name, r);
        return;
      }
      row("(load) " + name, r);
    }
  };
  for (int64_t rate : rates) {
    uint64_t gap = static_cast<uint64_t>(1e9 / static_cast<double>(rate) / NsPerTick());
    measure("paced " + Fixed(static_cast<double>(rate) / 1e6, 1) + " M/s", gap);
  }
  measure("back-to-back", 0);

  Status closed = w.Close(CloseReason::kExit);
  WriterStats stats = w.stats();
  table.Print();
  std::printf("\nns per append. %llu events written, %llu dropped; close: %s\n",
              static_cast<unsigned long long>(stats.events_written),
              static_cast<unsigned long long>(stats.dropped), closed.ToString().c_str());
  return closed.ok() && stats.dropped == 0 ? 0 : 1;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
