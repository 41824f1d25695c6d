// live_writer.h: a rank that is still recording, for tests that read or pack
// its trace while its writer works.
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "replay/trace_reader.h"
#include "replay/trace_writer.h"
#include "support/sample_events.h"

namespace replay::testing {

// Rank 0 of a trace in `dir`, whose writer seals a block every 700 events or
// when its 64 KiB ring slot is half full, and rewrites its open block every
// 0.5 ms. One thread appends allreduce ops with seq 1, 2, 3, ..., pausing
// 0.5 ms after every 64 (~2 s to kMaxEvents), until it has appended
// kMaxEvents or Stop() is called; so the events published are always
// seq 1..appended(). The cap bounds what each read of the trace costs, which
// would otherwise grow with every read a slow (sanitised, loaded) machine
// makes, without end. Past it the thread stays, idle, until Stop().
class LiveWriter {
 public:
  static constexpr uint64_t kMaxEvents = 200'000;

  explicit LiveWriter(const std::string& dir) {
    WriterOptions o;
    o.dir = dir;
    o.header.rank = 0;
    o.header.world_size = 1;
    o.flush_interval_ns = 500'000;
    o.ring_slot_bytes = 64 << 10;
    o.block_events = 700;
    o.full_wait_ns = 10'000'000'000;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) return;
    writer_ = std::move(w).value();
    thread_ = std::thread([this] {
      for (uint64_t i = 0; !stop_.load() && i < kMaxEvents; ++i) {
        if (!writer_->Append(AllreduceOp(5, i + 1, 4, i))) break;
        appended_.store(i + 1);
        if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      while (!stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  ~LiveWriter() { Stop(); }
  LiveWriter(const LiveWriter&) = delete;
  LiveWriter& operator=(const LiveWriter&) = delete;

  bool ok() const { return writer_ != nullptr; }
  TraceWriter& writer() { return *writer_; }
  uint64_t appended() const { return appended_.load(); }
  // Stops appending; the writer stays open.
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::unique_ptr<TraceWriter> writer_;
  std::atomic<uint64_t> appended_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A read of the LiveWriter's rank, `r`, that began once `before` events were
// appended: it holds them all and what came after, seq 1, 2, 3, ... in order.
inline void RequireAllPublished(const RankReader& r, uint64_t before) {
  const std::vector<Event>& events = r.events();
  REQUIRE(events.size() >= before);
  REQUIRE(r.stats().missing == 0);
  size_t out_of_place = 0;
  for (size_t i = 0; i < events.size(); ++i) out_of_place += events[i].op.seq != i + 1;
  REQUIRE(out_of_place == 0);
}

}  // namespace replay::testing
