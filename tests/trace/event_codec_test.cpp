#include "trace/event_codec.h"

#include <catch2/catch.hpp>

#include "support/sample_events.h"

namespace replay {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<Event> RoundTrip(const std::vector<Event>& in) {
  EventBlockEncoder enc;
  enc.Begin(in.size(), in.front().index, in.front().time_ns);
  for (const Event& e : in) enc.Add(EventView::Of(e));
  std::string raw;
  enc.Finish(&raw);
  std::vector<Event> out;
  REQUIRE(DecodeEventBlock(Bytes(raw), &out).ok());
  return out;
}

TEST_CASE("every event kind round-trips through an event block", "[trace]") {
  std::vector<Event> in = testing::SampleEventsOfEveryKind();
  REQUIRE(in.size() == static_cast<size_t>(kEventKindCount));
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("kind " << EventKindName(in[i].kind));
    CHECK(out[i] == in[i]);
  }
}

TEST_CASE("indices with gaps and times going backwards round-trip", "[trace]") {
  std::vector<Event> in;
  uint64_t idx[] = {10, 11, 15, 14, 100};
  int64_t t[] = {500, 400, 900, 901, 10};
  for (int i = 0; i < 5; ++i) {
    Event e = testing::AllreduceOp(1, i + 1, 8, 0x1000 + i);
    e.index = idx[i];
    e.time_ns = t[i];
    in.push_back(e);
  }
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) CHECK(out[i] == in[i]);
}

TEST_CASE("successive blocks from one encoder are independent", "[trace]") {
  EventBlockEncoder enc;
  std::vector<std::string> blocks;
  for (int b = 0; b < 3; ++b) {
    enc.Begin(100, b * 100, 0);
    for (int i = 0; i < 100; ++i) {
      Event e = testing::AllreduceOp(7, b * 100 + i + 1, 4, b * 1000 + i);
      e.index = b * 100 + i;
      enc.Add(EventView::Of(e));
    }
    std::string raw;
    enc.Finish(&raw);
    blocks.push_back(raw);
  }
  for (int b = 2; b >= 0; --b) {
    std::vector<Event> out;
    REQUIRE(DecodeEventBlock(Bytes(blocks[b]), &out).ok());
    REQUIRE(out.size() == 100);
    CHECK(out[0].index == static_cast<uint64_t>(b * 100));
    CHECK(out[99].op.seq == static_cast<uint64_t>(b * 100 + 100));
    CHECK(out[99].op.send_hash == static_cast<uint64_t>(b * 1000 + 99));
  }
}

TEST_CASE("a foreign message is a corruption, not a crash", "[trace]") {
  std::string junk(256, '\xff');
  std::vector<Event> out;
  CHECK(DecodeEventBlock(Bytes(junk), &out).code() == Status::Code::kCorruption);
  std::string odd(13, 'a');
  CHECK(DecodeEventBlock(Bytes(odd), &out).code() == Status::Code::kCorruption);
}

TEST_CASE("times at the ends of the range round-trip", "[trace]") {
  // Found by the decoder fuzz target: deltas between such times overflowed.
  std::vector<Event> in;
  int64_t t[] = {INT64_MAX, INT64_MIN, 0, -1, INT64_MAX, INT64_MIN + 1};
  for (int i = 0; i < 6; ++i) {
    Event e = testing::AllreduceOp(1, i + 1, 8, 0x1000 + i);
    e.index = i;
    e.time_ns = t[i];
    in.push_back(e);
  }
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) CHECK(out[i].time_ns == in[i].time_ns);
}

TEST_CASE("an event block declaring more events than its bytes hold is refused", "[trace]") {
  // Found while hardening against the decoder fuzz target: elements of zero
  // bytes let a tiny (and highly compressible) message declare a huge number
  // of events, each of which the reader would build.
  std::vector<uint64_t> words(64, 0);
  auto* table = reinterpret_cast<uint32_t*>(words.data());
  table[0] = 0;                                 // one segment
  table[1] = 63;                                // of 63 words
  words[1] = (2ull << 32) | (1ull << 48);       // root: EventBlock, 2 data words, 1 pointer
  words[4] = 1 | (7ull << 32);                  // events: a list of structs of 0 words in all
  words[5] = 1000ull << 2;                      // tag: 1000 elements of 0 data and 0 pointers
  std::vector<Event> out;
  Status st = DecodeEventBlock(
      {reinterpret_cast<const uint8_t*>(words.data()), words.size() * sizeof(uint64_t)}, &out);
  CHECK(st.code() == Status::Code::kCorruption);
  CHECK(out.empty());
}

}  // namespace
}  // namespace replay
