#include "trace/event_codec.h"

#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "support/sample_events.h"
#include "trace/trace.capnp.h"

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

Event Ret(uint64_t comm, uint64_t seq, uint64_t recv_hash) {
  ReturnEvent r{};
  r.api = 1;
  r.comm = comm;
  r.seq = seq;
  r.source = kNoPeer;
  r.recv_count = -1;
  r.recv_hash = recv_hash;
  return Event::Make(r);
}

Event Completion(uint64_t comm, uint64_t seq, uint64_t request) {
  CompletionEvent c{};
  c.request = request;
  c.api = 1;
  c.comm = comm;
  c.seq = seq;
  c.source = kNoPeer;
  c.recv_count = -1;
  return Event::Make(c);
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

TEST_CASE("every CUDA op round-trips with its handles, a signed count and an unknown device", "[trace]") {
  std::vector<Event> in;
  for (int op = 0; op < kCudaOpCount; ++op) {
    CudaEvent c{};
    c.op = static_cast<CudaOp>(op);
    c.rc = op == static_cast<int>(CudaOp::kEventQuery) ? 600 : 0;
    c.device = op % 2 == 0 ? -1 : op;
    c.stream = op % 3 == 0 ? kCudaPerThreadStream : 0x7f0000001000ull + static_cast<uint64_t>(op);
    c.event = 0x7f0000002000ull + static_cast<uint64_t>(op);
    c.graph = 0x7f0000003000ull + static_cast<uint64_t>(op);
    c.other = static_cast<uint64_t>(op);
    c.count = static_cast<uint64_t>(int64_t{-1} - op);  // a stream priority
    Event e = Event::Make(c);
    e.index = static_cast<uint64_t>(op);
    e.time_ns = 100 * op;
    e.thread = static_cast<uint32_t>(op % 3);
    e.call_site = 0x400000u + static_cast<uint64_t>(op);
    in.push_back(e);
  }
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("op " << CudaOpName(in[i].cuda.op));
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

TEST_CASE("sequence numbers round-trip on many interleaved communicators", "[trace]") {
  // More communicators than the encoder's table has slots, so that slots are
  // shared; point-to-point calls (seq 0) among collectives; completions out of
  // order; numbers at the ends of the range.
  std::vector<Event> in;
  std::vector<uint64_t> seq(200, 0);
  uint64_t index = 0;
  for (int round = 0; round < 5; ++round) {
    for (uint64_t c = 0; c < seq.size(); c += 1 + static_cast<uint64_t>(round)) {
      Event op = testing::AllreduceOp(0x1000 + c * 0x9E37, ++seq[c], 8, c);
      op.index = index++;
      in.push_back(op);
      Event ret = Ret(op.op.comm, c % 3 == 0 ? 0 : seq[c], 0x77);
      ret.index = index++;
      in.push_back(ret);
      if (c % 5 == 0 && seq[c] > 2) {
        Event done = Completion(op.op.comm, seq[c] - 2, c);
        done.index = index++;
        in.push_back(done);
      }
      Event p2p = testing::AllreduceOp(op.op.comm, 0, 8, c);
      p2p.index = index++;
      in.push_back(p2p);
    }
  }
  for (uint64_t big : {UINT64_MAX, uint64_t{1} << 63, (uint64_t{1} << 63) - 1, uint64_t{0}, uint64_t{1}}) {
    Event op = testing::AllreduceOp(42, big, 8, 1);
    op.index = index++;
    in.push_back(op);
  }
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("event " << i);
    CHECK(out[i] == in[i]);
  }
}

TEST_CASE("an epoch 1 block (times and sequence numbers in each event) still decodes", "[trace]") {
  capnp::MallocMessageBuilder message;
  auto block = message.initRoot<schema::EventBlock>();
  block.setFirstIndex(5);
  block.setBaseTimeNs(1000);
  auto events = block.initEvents(3);
  const int64_t deltas[] = {0, 250, -50};
  const uint64_t seqs[] = {7, 8, 8};
  for (unsigned i = 0; i < 3; ++i) {
    events[i].setTimeDeltaNs(deltas[i]);
    auto op = events[i].initOp();
    op.setComm(0xabc);
    op.setSeq(seqs[i]);
    op.setRoot(-1);
  }
  auto flat = capnp::messageToFlatArray(message);
  std::vector<Event> out;
  REQUIRE(DecodeEventBlock({reinterpret_cast<const uint8_t*>(flat.begin()), flat.size() * sizeof(capnp::word)}, &out)
              .ok());
  REQUIRE(out.size() == 3);
  CHECK(out[0].index == 5);
  CHECK(out[0].time_ns == 1000);
  CHECK(out[1].time_ns == 1250);
  CHECK(out[2].time_ns == 1200);
  CHECK(out[0].op.seq == 7);
  CHECK(out[1].op.seq == 8);
  CHECK(out[2].op.seq == 8);
}

TEST_CASE("a time column that does not match the events is a corruption", "[trace]") {
  capnp::MallocMessageBuilder message;
  auto block = message.initRoot<schema::EventBlock>();
  block.initEvents(3);
  block.initTimeDeltas(2);
  auto flat = capnp::messageToFlatArray(message);
  std::vector<Event> out;
  Status st =
      DecodeEventBlock({reinterpret_cast<const uint8_t*>(flat.begin()), flat.size() * sizeof(capnp::word)}, &out);
  CHECK(st.code() == Status::Code::kCorruption);
}

}  // namespace
}  // namespace replay
