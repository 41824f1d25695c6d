#include "trace/ring.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "support/temp_dir.h"

namespace replay {
namespace {

const uint8_t kUuid[16] = {9};

struct Collected {
  std::vector<uint64_t> index;
  std::vector<std::string> text;
  std::vector<EventKind> kind;
};

uint64_t DrainAll(Ring& ring, SlotHeader* slot, Collected* c) {
  uint64_t end = ring.Drain(slot, SIZE_MAX, [&](const RingRecord& r) {
    c->index.push_back(r.header->index);
    c->text.emplace_back(r.text, r.header->text_size);
    c->kind.push_back(static_cast<EventKind>(r.header->kind));
  });
  Ring::Consume(slot, end);
  return end;
}

// A ring file in `dir` whose slots hold `capacity` data bytes.
std::unique_ptr<Ring> CreateRing(const testing::TempDir& dir, uint64_t capacity,
                                 int64_t full_wait_ns = RingOptions{}.full_wait_ns) {
  RingOptions opt;
  opt.capacity = capacity;
  opt.full_wait_ns = full_wait_ns;
  auto ring = Ring::Create(dir / "ring", opt, kUuid);
  REQUIRE(ring.ok());
  return std::move(ring).value();
}

TEST_CASE("a slot's records come back in order across many wraps", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, 4096);
  SlotHeader* slot = ring->Claim(0, 1);
  REQUIRE(slot != nullptr);
  Collected c;
  int appended = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 7; ++i, ++appended) {
      std::string text(static_cast<size_t>(appended % 97), static_cast<char>('a' + appended % 26));
      MarkEvent m{appended};
      REQUIRE(ring->AppendRecord(slot, EventKind::kMark, &m, sizeof(m), nullptr, 0, text.data(),
                                    static_cast<uint32_t>(text.size()), 0));
    }
    DrainAll(*ring, slot, &c);
  }
  REQUIRE(c.index.size() == static_cast<size_t>(appended));
  for (int i = 0; i < appended; ++i) {
    CHECK(c.index[i] == static_cast<uint64_t>(i));
    CHECK(c.text[i].size() == static_cast<size_t>(i % 97));
  }
  CHECK(slot->head.load() > 20 * 4096);  // it really wrapped, many times
}

// Bytes of disk the file takes (not its length, which covers every slot).
uint64_t DiskBytes(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST_CASE("a slot takes disk space as it fills, not all at once", "[trace]") {
  testing::TempDir dir;
  const uint64_t capacity = 1 << 20;
  auto ring = CreateRing(dir, capacity);
  SlotHeader* slot = ring->Claim(0, 1);
  REQUIRE(slot != nullptr);
  const uint64_t at_start = DiskBytes(dir / "ring");
  CHECK(at_start < 64 * 1024);
  // Records across every step of growth, then several times round the slot.
  Collected c;
  std::string text(200, 'x');
  uint64_t appended = 0;
  std::vector<uint64_t> usage;
  while (slot->head.load() < 5 * capacity) {
    MarkEvent m{static_cast<int64_t>(appended)};
    REQUIRE(ring->AppendRecord(slot, EventKind::kMark, &m, sizeof(m), nullptr, 0, text.data(),
                                  static_cast<uint32_t>(text.size()), 0));
    ++appended;
    if (appended % 1000 == 0) {
      DrainAll(*ring, slot, &c);
      usage.push_back(DiskBytes(dir / "ring"));
    }
  }
  DrainAll(*ring, slot, &c);
  REQUIRE(c.index.size() == appended);
  for (uint64_t i = 0; i < appended; ++i) REQUIRE(c.index[i] == i);
  CHECK(usage.front() < capacity / 2);  // grew with use
  CHECK(std::is_sorted(usage.begin(), usage.end()));
  CHECK(DiskBytes(dir / "ring") <= kRingHeaderBytes + kSlotHeaderBytes + capacity + 64 * 1024);
  CHECK(ring->grow_error() == 0);
}

TEST_CASE("a full slot drops and then reports the count, never silently", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, 4096, 1000000);  // 1 ms: nobody drains in this test
  SlotHeader* slot = ring->Claim(0, 1);
  int ok = 0, dropped = 0;
  for (int i = 0; i < 200; ++i) {
    SeedEvent s{SeedSource::kSrand, static_cast<uint64_t>(i), 0};
    if (ring->AppendRecord(slot, EventKind::kSeed, &s, sizeof(s), nullptr, 0, nullptr, 0, 0)) {
      ++ok;
    } else {
      ++dropped;
    }
  }
  CHECK(ok > 0);
  CHECK(dropped > 0);
  CHECK(slot->dropped.load() == static_cast<uint64_t>(dropped));
  Collected c;
  DrainAll(*ring, slot, &c);
  CHECK(c.index.size() == static_cast<size_t>(ok));
  // The next append first reports the loss.
  SeedEvent s{SeedSource::kSrand, 999, 0};
  REQUIRE(ring->AppendRecord(slot, EventKind::kSeed, &s, sizeof(s), nullptr, 0, nullptr, 0, 0));
  Collected after;
  ring->Drain(slot, SIZE_MAX, [&](const RingRecord& r) {
    after.kind.push_back(static_cast<EventKind>(r.header->kind));
    if (r.header->kind == static_cast<uint16_t>(EventKind::kDrop)) {
      CHECK(static_cast<const DropEvent*>(r.body)->count == static_cast<uint64_t>(dropped));
    }
  });
  CHECK(after.kind == std::vector<EventKind>{EventKind::kDrop, EventKind::kSeed});
}

TEST_CASE("salvage recovers every published record from the ring file", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, 1 << 16);
  SlotHeader* a = ring->Claim(0, 1);
  SlotHeader* b = ring->Claim(1, 2);
  REQUIRE(a != b);
  for (int i = 0; i < 100; ++i) {
    MarkEvent m{i};
    std::string name = "m" + std::to_string(i);
    REQUIRE(ring->AppendRecord(i % 2 ? a : b, EventKind::kMark, &m, sizeof(m), nullptr, 0,
                                  name.data(), static_cast<uint32_t>(name.size()), 0x10));
  }
  // The writer already consumed slot a's first 10 records.
  Collected first;
  uint64_t end = ring->Drain(a, 10, [&](const RingRecord& r) { first.index.push_back(r.header->index); });
  Ring::Consume(a, end);

  std::string bytes = testing::ReadFile(dir / "ring");
  auto s = SalvageRing({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  REQUIRE(s.ok());
  CHECK(s->events.size() == 90);
  CHECK(s->problems.empty());
  for (const Event& e : s->events) {
    CHECK(e.kind == EventKind::kMark);
    CHECK(e.text == "m" + std::to_string(e.mark.value));
    CHECK(e.call_site == 0x10);
  }
}

TEST_CASE("salvage reports damage instead of crashing", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, RingOptions{}.capacity);
  SlotHeader* a = ring->Claim(0, 1);
  for (int i = 0; i < 10; ++i) {
    MarkEvent m{i};
    ring->AppendRecord(a, EventKind::kMark, &m, sizeof(m), nullptr, 0, "x", 1, 0);
  }
  std::string bytes = testing::ReadFile(dir / "ring");
  std::string damaged = bytes;
  damaged[kRingHeaderBytes + kSlotHeaderBytes + 3 * 64] ^= 0x7f;  // inside some record
  auto s = SalvageRing({reinterpret_cast<const uint8_t*>(damaged.data()), damaged.size()});
  REQUIRE(s.ok());
  CHECK(s->events.size() <= 10);

  auto short_file = SalvageRing({reinterpret_cast<const uint8_t*>(bytes.data()), 100});
  CHECK(short_file.status().code() == Status::Code::kCorruption);
  std::string foreign(8192, 'z');
  CHECK(SalvageRing({reinterpret_cast<const uint8_t*>(foreign.data()), foreign.size()}).status().code() ==
        Status::Code::kNotATrace);
}

TEST_CASE("a damaged ring header cannot make salvage run away or misbehave", "[trace]") {
  // Found by the decoder fuzz target.
  testing::TempDir dir;
  auto ring = CreateRing(dir, 4096);
  SlotHeader* a = ring->Claim(0, 1);
  for (int i = 0; i < 10; ++i) {
    MarkEvent m{i};
    REQUIRE(ring->AppendRecord(a, EventKind::kMark, &m, sizeof(m), nullptr, 0, "x", 1, 0));
  }
  const std::string bytes = testing::ReadFile(dir / "ring");
  auto span = [](const std::string& b) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };

  // A capacity that makes the slot size wrap to nothing, and ~4 billion slots:
  // reading the tails used to walk (and allocate for) every one of them.
  std::string wrapped = bytes;
  uint64_t capacity = ~uint64_t{0} - kSlotHeaderBytes + 1;
  uint32_t slots = UINT32_MAX;
  std::memcpy(&wrapped[offsetof(RingHeader, capacity)], &capacity, sizeof(capacity));
  std::memcpy(&wrapped[offsetof(RingHeader, slots_used)], &slots, sizeof(slots));
  CHECK(RingTails(span(wrapped)).empty());
  CHECK(SalvageRing(span(wrapped)).status().code() == Status::Code::kCorruption);

  // A calibration that is not a number: the events still come back, the times
  // are flagged as meaningless (and converting them is not undefined).
  std::string nan = bytes;
  double not_a_number = std::nan("");
  std::memcpy(&nan[offsetof(RingHeader, ns_per_tick)], &not_a_number, sizeof(double));
  auto s = SalvageRing(span(nan));
  REQUIRE(s.ok());
  CHECK(s->events.size() == 10);
  REQUIRE(s->problems.size() == 1);
  CHECK(s->problems[0].find("calibration") != std::string::npos);
}

TEST_CASE("a call's record holds its op at once and its return once the call returns", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, 4096);
  SlotHeader* slot = ring->Claim(0, 1);
  auto salvage = [&] {
    std::string bytes = testing::ReadFile(dir / "ring");
    auto s = SalvageRing({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    REQUIRE(s.ok());
    CHECK(s->problems.empty());
    return std::move(s).value();
  };
  struct Seen {
    uint64_t op_index;
    bool open;
    bool returned;
    uint64_t ret_index = 0;
    int32_t rc = 0;
  };
  auto drain = [&](std::vector<Seen>* seen) {
    return ring->Drain(slot, SIZE_MAX, [&](const RingRecord& r) {
      Seen s{r.header->index, r.open, r.ret != nullptr};
      if (r.ret != nullptr) {
        s.ret_index = r.ret->index;
        s.rc = r.ret->ret.rc;
      }
      seen->push_back(s);
    });
  };

  // Many laps, so that calls' records also pad and go round the slot.
  uint64_t next = 0;
  for (int call = 0; call < 100; ++call) {
    OpEvent op{};
    op.seq = static_cast<uint64_t>(call) + 1;
    const int64_t counts[2] = {call, 7};
    RecordHeader* open = ring->AppendOpen(slot, op, counts, call % 3 == 0 ? 2 : 0, 0x40);
    REQUIRE(open != nullptr);

    // In flight: the op is there, its space is kept, and so is what comes after.
    std::vector<Seen> seen;
    uint64_t start = drain(&seen);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].open);
    CHECK_FALSE(seen[0].returned);
    CHECK(seen[0].op_index == next);
    SalvagedRing in_flight = salvage();
    REQUIRE(in_flight.events.size() == 1);
    CHECK(in_flight.events[0].kind == EventKind::kOp);
    CHECK(in_flight.events[0].op.seq == op.seq);
    CHECK(in_flight.events[0].list.size() == (call % 3 == 0 ? 2u : 0u));

    if (call % 10 == 9) {
      Ring::Abandon(open);  // ended without a return
      seen.clear();
      uint64_t end = drain(&seen);
      REQUIRE(seen.size() == 1);
      CHECK_FALSE(seen[0].open);
      CHECK_FALSE(seen[0].returned);
      CHECK(end > start);
      CHECK(salvage().events.size() == 1);
      Ring::Consume(slot, end);
      next += 1;
      continue;
    }
    ReturnEvent ret{};
    ret.rc = call;
    ret.seq = op.seq;
    ring->Complete(open, ret);
    seen.clear();
    uint64_t end = drain(&seen);
    REQUIRE(seen.size() == 1);
    CHECK_FALSE(seen[0].open);
    REQUIRE(seen[0].returned);
    CHECK(seen[0].ret_index == next + 1);  // taken when the call returned
    CHECK(seen[0].rc == call);
    SalvagedRing done = salvage();
    REQUIRE(done.events.size() == 2);
    CHECK(done.events[0].kind == EventKind::kOp);
    CHECK(done.events[1].kind == EventKind::kReturn);
    CHECK(done.events[1].index == next + 1);
    CHECK(done.events[1].ret.rc == call);
    CHECK(done.events[1].ret.seq == op.seq);
    CHECK(done.events[1].call_site == 0x40);
    Ring::Consume(slot, end);
    next += 2;
  }
}

TEST_CASE("salvage reads a version 1 ring, and refuses one newer than it reads", "[trace]") {
  testing::TempDir dir;
  auto ring = CreateRing(dir, 4096);
  SlotHeader* a = ring->Claim(0, 1);
  MarkEvent m{5};
  REQUIRE(ring->AppendRecord(a, EventKind::kMark, &m, sizeof(m), nullptr, 0, nullptr, 0, 0));
  std::string bytes = testing::ReadFile(dir / "ring");
  auto span = [](const std::string& b) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  uint32_t v1 = 1;
  std::memcpy(&bytes[offsetof(RingHeader, version)], &v1, sizeof(v1));
  auto s = SalvageRing(span(bytes));
  REQUIRE(s.ok());
  REQUIRE(s->events.size() == 1);
  CHECK(s->events[0].mark.value == 5);
  uint32_t newer = kRingVersion + 1;
  std::memcpy(&bytes[offsetof(RingHeader, version)], &newer, sizeof(newer));
  auto refused = SalvageRing(span(bytes));
  CHECK(refused.status().code() == Status::Code::kVersion);
  CHECK(refused.status().ToString().find("upgrade replay") != std::string::npos);
}

}  // namespace
}  // namespace replay
