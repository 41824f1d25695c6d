// trace_size_bench: bytes per event of the synthetic training stream
// (bench_support.h) as the writer stores it, beside the alternatives, on the same
// events: Cap'n Proto unpacked and packed without compression, zstd at several
// levels over the unpacked message (what the events stream holds), and zstd over
// the packed message. Blocks are cut at several sizes: the writer's blocks hold
// at most 8192 events (REPLAY_BLOCK_EVENTS) and are sealed when a ring slot is
// past half full, so with the default 1 MiB ring they hold ~3,800 events of this
// stream whatever its rate (a slow job's last block stays open across flushes).
//
// Every variant counts the 40-byte block header of format.h once per block.
// "excl. fp" subtracts 8 bytes for every fingerprint the stream carries, which is
// random by construction and cannot compress.
//
// A second table runs the writer itself (TraceWriter with its background thread,
// default options but a short flush interval) on the same events, appended in
// bursts of N with a pause of three flush intervals after each: a job that makes
// N calls per flush interval, in fast motion. It prints what the events stream
// holds per event and the blocks the writer cut. Times are the writer's own
// (appends happen in real time), so the timing noise is this machine's, not the
// stream's model.
//
// Usage: trace_size_bench [--events=N] [--blocks=8192,1024,256] [--levels=-5,1,3,9,19]
//                         [--reps=3] [--paced=256,1024 (0: none)] [--flush-ms=2] [--dir=PATH] [--quick]
#include <capnp/serialize-packed.h>
#include <capnp/serialize.h>
#include <kj/io.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "bench_support.h"
#include "replay/trace_writer.h"
#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"

namespace replay::bench {
namespace {


std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The writer's encoding of `events`, cut into blocks of `per_block`, and
// where each block's fingerprints start (EventBlockEncoder::random_from).
std::vector<std::string> EncodeBlocks(const std::vector<Event>& events, size_t per_block,
                                      std::vector<size_t>* random_from) {
  std::vector<std::string> blocks;
  random_from->clear();
  EventBlockEncoder encoder;
  for (size_t at = 0; at < events.size(); at += per_block) {
    size_t n = std::min(per_block, events.size() - at);
    std::span<const uint8_t> raw = encoder.Encode(std::span<const Event>(events).subspan(at, n));
    blocks.emplace_back(reinterpret_cast<const char*>(raw.data()), raw.size());
    random_from->push_back(encoder.random_from());
  }
  return blocks;
}

std::string Pack(const std::string& raw) {
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  std::vector<kj::ArrayPtr<const capnp::word>> segments;
  for (unsigned i = 0;; ++i) {
    auto seg = reader.getSegment(i);
    if (seg == nullptr) break;
    segments.push_back(seg);
  }
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, kj::arrayPtr(segments.data(), segments.size()));
  auto a = out.getArray();
  return std::string(reinterpret_cast<const char*>(a.begin()), a.size());
}

struct Variant {
  std::string name;
  // Stored bytes of one raw (unpacked) block, framing included; `packed` is the
  // same block packed, precomputed; `random_from` where its fingerprints start.
  std::function<size_t(const std::string& raw, const std::string& packed, size_t random_from)> size;
};

int Main(int argc, char** argv) {
  Flags flags(argc, argv);
  bool quick = flags.Has("quick");
  int64_t n_events = flags.Int("events", quick ? 8192 * 2 : 8192 * 24);
  std::vector<int64_t> block_sizes = flags.IntList("blocks", "8192,1024,256");
  std::vector<int64_t> levels = flags.IntList("levels", "-5,1,3,9,19");
  int reps = static_cast<int>(flags.Int("reps", quick ? 1 : 3));
  std::vector<int64_t> paced = flags.IntList("paced", "256,1024");
  int64_t flush_ms = flags.Int("flush-ms", 2);
  std::string scratch_parent = flags.Str("dir", "");
  if (flags.HasUnknown()) return 2;
  PrintEnvironment("trace_size_bench");

  TrainingStream stream;
  std::vector<Event> events;
  events.reserve(static_cast<size_t>(n_events));
  for (int64_t i = 0; i < n_events; ++i) events.push_back(stream.Next());
  double fp_per_event = static_cast<double>(stream.fingerprints()) / static_cast<double>(n_events);
  std::printf("# stream: %lld events, %.2f events/step, %.3f fingerprints/event, "
              "timing noise %.2f bits/event (%.2f B/event)\n\n",
              static_cast<long long>(n_events), stream.events_per_step(), fp_per_event,
              stream.jitter_bits() / static_cast<double>(n_events),
              stream.jitter_bits() / static_cast<double>(n_events) / 8);

  constexpr size_t kHeader = sizeof(format::BlockHeader);
  std::vector<Variant> variants;
  variants.push_back({"capnp unpacked, no compression",
                      [](const std::string& raw, const std::string&, size_t) { return raw.size() + kHeader; }});
  variants.push_back({"capnp packed, no compression",
                      [](const std::string&, const std::string& packed, size_t) { return packed.size() + kHeader; }});
  // As the writer compresses a block: the fingerprints, at its end, in zstd
  // blocks of their own; and, for the writer's level, the whole message as one.
  for (int64_t level : levels) {
    auto codec = std::make_shared<BlockCodec>(static_cast<int>(level));
    const bool writer = level == WriterOptions{}.zstd_level;
    variants.push_back({"zstd " + std::to_string(level) + " of unpacked" + (writer ? " (writer)" : ""),
                        [codec](const std::string& raw, const std::string&, size_t random_from) {
                          std::string out;
                          Status s = codec->Encode(format::BlockKind::kEvents, 0, 0, Bytes(raw), &out, 0, random_from);
                          if (!s.ok()) std::abort();
                          return out.size();
                        }});
    if (writer) {
      variants.push_back({"zstd " + std::to_string(level) + " of unpacked, one part",
                          [codec](const std::string& raw, const std::string&, size_t) {
                            std::string out;
                            Status s = codec->Encode(format::BlockKind::kEvents, 0, 0, Bytes(raw), &out);
                            if (!s.ok()) std::abort();
                            return out.size();
                          }});
    }
  }
  for (int64_t level : levels) {
    auto cctx = std::shared_ptr<ZSTD_CCtx>(ZSTD_createCCtx(), ZSTD_freeCCtx);
    auto buf = std::make_shared<std::string>();
    variants.push_back({"zstd " + std::to_string(level) + " of packed",
                        [cctx, buf, level](const std::string&, const std::string& packed, size_t) {
                          buf->resize(ZSTD_compressBound(packed.size()));
                          size_t n = ZSTD_compressCCtx(cctx.get(), buf->data(), buf->size(),
                                                       packed.data(), packed.size(),
                                                       static_cast<int>(level));
                          if (ZSTD_isError(n)) std::abort();
                          return std::min(n, packed.size()) + kHeader;
                        }});
  }

  // Sizes, and for the largest block size the time each variant takes.
  std::vector<std::string> heading = {"encoding"};
  for (int64_t b : block_sizes) {
    heading.push_back("B/ev @" + std::to_string(b));
    heading.push_back("excl.fp");
  }
  heading.push_back("ns/ev");
  heading.push_back("MB/s in");
  Table table(heading);
  std::vector<std::vector<std::string>> rows(variants.size());
  std::vector<std::vector<std::string>> timing(variants.size());
  for (size_t v = 0; v < variants.size(); ++v) rows[v].push_back(variants[v].name);

  double encode_ns = 0;
  LoadProbe probe = LoadProbe::Now();
  for (size_t bi = 0; bi < block_sizes.size(); ++bi) {
    size_t per_block = static_cast<size_t>(block_sizes[bi]);
    std::vector<double> enc_times;
    std::vector<std::string> raw;
    std::vector<size_t> random_from;
    for (int r = 0; r < reps; ++r) {
      double t0 = NowSeconds();
      raw = EncodeBlocks(events, per_block, &random_from);
      enc_times.push_back(NowSeconds() - t0);
    }
    if (bi == 0) encode_ns = *std::min_element(enc_times.begin(), enc_times.end()) * 1e9 / static_cast<double>(n_events);
    // The writer's blocks must read back as the events that went in.
    std::vector<Event> back;
    for (const std::string& b : raw) {
      if (!DecodeEventBlock(Bytes(b), &back).ok()) {
        std::fprintf(stderr, "block does not decode\n");
        return 1;
      }
    }
    if (back.size() != events.size() || !std::equal(back.begin(), back.end(), events.begin())) {
      std::fprintf(stderr, "decoded events differ from the input\n");
      return 1;
    }
    std::vector<std::string> packed;
    size_t raw_bytes = 0;
    for (const std::string& b : raw) {
      packed.push_back(Pack(b));
      raw_bytes += b.size();
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      size_t total = 0;
      std::vector<double> times;
      for (int r = 0; r < (bi == 0 ? reps : 1); ++r) {
        total = 0;
        double t0 = NowSeconds();
        for (size_t k = 0; k < raw.size(); ++k) total += variants[v].size(raw[k], packed[k], random_from[k]);
        times.push_back(NowSeconds() - t0);
      }
      double per_event = static_cast<double>(total) / static_cast<double>(n_events);
      rows[v].push_back(Fixed(per_event, 2));
      rows[v].push_back(Fixed(per_event - 8 * fp_per_event, 2));
      if (bi == 0) {
        double secs = *std::min_element(times.begin(), times.end());
        timing[v].push_back(Fixed(secs * 1e9 / static_cast<double>(n_events), 1));
        timing[v].push_back(Fixed(static_cast<double>(raw_bytes) / secs / 1e6, 0));
      }
    }
  }
  double others = LoadProbe::Now().OthersSince(probe);
  for (size_t v = 0; v < variants.size(); ++v) {
    rows[v].insert(rows[v].end(), timing[v].begin(), timing[v].end());
    table.Add(rows[v]);
  }
  table.Print();
  std::printf("\nOther processes kept %.2f CPUs busy during the timed part.\n", others);
  std::printf("\nEventBlockEncoder: %.1f ns/event at %lld events per block (best of %d).\n"
              "ns/ev and MB/s time the variant alone (best of the runs; packing excluded for the\n"
              "packed rows), at %lld events per block; MB/s counts unpacked input bytes.\n",
              encode_ns, static_cast<long long>(block_sizes[0]), reps,
              static_cast<long long>(block_sizes[0]));

  if (paced.empty() || paced[0] <= 0) return 0;  // --paced=0: the encoder table only
  std::printf("\n# the writer, %lld ms flush interval, events appended in bursts with a pause of\n"
              "# three intervals after each\n\n",
              static_cast<long long>(flush_ms));
  Table writer_table({"events per burst", "B/ev", "excl.fp", "blocks", "events/block", "dropped"});
  for (int64_t burst : paced) {
    ScratchDir dir(scratch_parent);
    WriterOptions o;
    o.dir = dir.path();
    o.header.rank = 0;
    o.header.world_size = 1;
    o.flush_interval_ns = flush_ms * 1'000'000;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) {
      std::fprintf(stderr, "cannot open a writer in %s: %s\n", dir.path().c_str(),
                   w.status().ToString().c_str());
      return 1;
    }
    for (size_t at = 0; at < events.size(); at += static_cast<size_t>(burst)) {
      size_t end = std::min(events.size(), at + static_cast<size_t>(burst));
      for (size_t i = at; i < end; ++i) (*w)->Append(events[i]);
      std::this_thread::sleep_for(std::chrono::milliseconds(3 * flush_ms));
    }
    Status closed = (*w)->Close(CloseReason::kExit);
    WriterStats st = (*w)->stats();
    if (!closed.ok() || st.events_written != events.size()) {
      std::fprintf(stderr, "the writer wrote %llu of %zu events: %s\n",
                   static_cast<unsigned long long>(st.events_written), events.size(),
                   closed.ToString().c_str());
      return 1;
    }
    double per_event = static_cast<double>(st.stored_bytes) / static_cast<double>(events.size());
    writer_table.Add({std::to_string(burst), Fixed(per_event, 2), Fixed(per_event - 8 * fp_per_event, 2),
                      std::to_string(st.blocks_written),
                      Fixed(static_cast<double>(events.size()) / static_cast<double>(st.blocks_written), 0),
                      std::to_string(st.dropped)});
  }
  writer_table.Print();
  return 0;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
