#include "trace/event_codec.h"

#include <catch2/catch.hpp>

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>
#include <functional>
#include <random>

#include "support/sample_events.h"
#include "support/temp_dir.h"
#include "trace/format.h"
#include "trace/packed_records.h"
#include "trace/trace.capnp.h"

namespace replay {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Flat(capnp::MessageBuilder& message) {
  auto flat = capnp::messageToFlatArray(message);
  return std::string(reinterpret_cast<const char*>(flat.begin()), flat.size() * sizeof(capnp::word));
}

std::string Encode(const std::vector<Event>& in) {
  EventBlockEncoder enc;
  std::span<const uint8_t> raw = enc.Encode(in);
  return std::string(reinterpret_cast<const char*>(raw.data()), raw.size());
}

std::vector<Event> RoundTrip(const std::vector<Event>& in) {
  std::string raw = Encode(in);
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
    EventKindCounts kinds;
    for (int i = 0; i < 100; ++i) kinds.Add(EventKind::kOp);
    enc.Begin(kinds, b * 100, 0);
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

TEST_CASE("event blocks written by the epoch 2 and epoch 3 encoders still decode", "[trace]") {
  for (const char* name : {"epoch2-event-block", "epoch3-event-block"}) {
    INFO(name);
    std::string raw = testing::ReadFile(std::string(REPLAY_SOURCE_DIR) + "/tests/trace/testdata/" + name);
    REQUIRE(!raw.empty());
    std::vector<Event> out;
    REQUIRE(DecodeEventBlock(Bytes(raw), &out).ok());
    std::vector<Event> want = testing::Epoch2FixtureEvents();
    REQUIRE(out.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("event " << i << ", kind " << EventKindName(want[i].kind));
      CHECK(out[i] == want[i]);
    }
  }
}

TEST_CASE("an epoch 2 block (one event list, time column, relative seq) still decodes", "[trace]") {
  capnp::MallocMessageBuilder message;
  auto block = message.initRoot<schema::EventBlock>();
  block.setFirstIndex(40);
  block.setBaseTimeNs(-500);
  block.setSeqDelta(true);
  auto events = block.initEvents(4);
  auto times = block.initTimeDeltas(4);
  const int64_t deltas[] = {0, 250, -50, 1000};
  const uint64_t comms[] = {0xa, 0xb, 0xa, 0xb};
  const uint64_t stored_seqs[] = {7, 3, 1, 0};  // 7, 3, then 8 and 3 relative to them
  for (unsigned i = 0; i < 4; ++i) {
    times.set(i, deltas[i]);
    events[i].setThread(i);
    events[i].setIndexGap(i == 2 ? 5 : 0);
    if (i == 3) {
      auto ret = events[i].initRet();
      ret.setComm(comms[i]);
      ret.setSeq(stored_seqs[i]);
      ret.setRecvHash(0x1234);
      continue;
    }
    auto op = events[i].initOp();
    op.setComm(comms[i]);
    op.setSeq(stored_seqs[i]);
    op.setSendHash(0x99 + i);
  }
  std::string raw = Flat(message);
  std::vector<Event> out;
  REQUIRE(DecodeEventBlock(Bytes(raw), &out).ok());
  REQUIRE(out.size() == 4);
  CHECK(out[0].index == 40);
  CHECK(out[1].index == 41);
  CHECK(out[2].index == 47);
  CHECK(out[3].index == 48);
  CHECK(out[0].time_ns == -500);
  CHECK(out[1].time_ns == -250);
  CHECK(out[2].time_ns == -300);
  CHECK(out[3].time_ns == 700);
  CHECK(out[0].op.seq == 7);
  CHECK(out[1].op.seq == 3);
  CHECK(out[2].op.seq == 8);
  CHECK(out[2].op.send_hash == 0x9b);
  CHECK(out[3].kind == EventKind::kReturn);
  CHECK(out[3].ret.seq == 3);
  CHECK(out[3].ret.recv_hash == 0x1234);
  CHECK(out[3].thread == 3);
}

// An epoch 3 block of three events (op, cuda, op), built field by field: the
// starting point for damage the encoder never makes.
void SmallBlock(schema::EventBlock::Builder b) {
  b.setFirstIndex(10);
  b.setBaseTimeNs(1000);
  b.setSeqDelta(true);
  auto kinds = b.initKinds(3);
  kinds.set(0, schema::EventKind::OP);
  kinds.set(1, schema::EventKind::CUDA);
  kinds.set(2, schema::EventKind::OP);
  auto times = b.initTimeDeltas32(3);
  times.set(1, 20);
  times.set(2, -5);
  auto fp = b.initFingerprints(2);
  fp.set(0, 0xf00);
  fp.set(1, 0xf01);
  auto ops = b.initOps(2);
  for (unsigned i = 0; i < 2; ++i) {
    ops[i].setThread(1);
    ops[i].setFlags(op_flags::kHasSendHash);
    ops[i].setComm(0xc);
    ops[i].setSeq(i == 0 ? 4 : 1);
  }
  auto cuda = b.initCudas(1)[0];
  cuda.setOp(schema::CudaOp::EVENT_RECORD);
  cuda.setThread(2);
  cuda.setCallSite(0x4000);
}

Status DecodeBuilt(const std::function<void(schema::EventBlock::Builder)>& build, std::vector<Event>* out) {
  capnp::MallocMessageBuilder message;
  build(message.initRoot<schema::EventBlock>());
  std::string raw = Flat(message);
  return DecodeEventBlock(Bytes(raw), out);
}

TEST_CASE("an epoch 3 block reads its events from the lists the kind column names", "[trace]") {
  std::vector<Event> out;
  REQUIRE(DecodeBuilt(SmallBlock, &out).ok());
  REQUIRE(out.size() == 3);
  CHECK(out[0].kind == EventKind::kOp);
  CHECK(out[1].kind == EventKind::kCuda);
  CHECK(out[2].kind == EventKind::kOp);
  CHECK(out[0].index == 10);
  CHECK(out[2].index == 12);
  CHECK(out[1].time_ns == 1020);
  CHECK(out[2].time_ns == 1015);
  CHECK(out[0].op.seq == 4);
  CHECK(out[2].op.seq == 5);
  CHECK(out[0].op.send_hash == 0xf00);
  CHECK(out[2].op.send_hash == 0xf01);
  CHECK(out[1].cuda.op == CudaOp::kEventRecord);
  CHECK(out[1].thread == 2);
  CHECK(out[1].call_site == 0x4000);
}

TEST_CASE("an epoch 3 block whose columns and lists disagree is a corruption", "[trace]") {
  using B = schema::EventBlock::Builder;
  struct Damage {
    const char* what;
    std::function<void(B)> apply;
  };
  const Damage damages[] = {
      {"a kind list holds a record more than the kind column names", [](B b) { b.initOps(3); }},
      {"a kind list holds a record less than the kind column names", [](B b) { b.initOps(1); }},
      {"records of a kind the kind column never names", [](B b) { b.initDrops(1); }},
      {"the kind column names an event no list holds",
       [](B b) {
         auto k = b.initKinds(4);
         k.set(0, schema::EventKind::OP);
         k.set(1, schema::EventKind::CUDA);
         k.set(2, schema::EventKind::OP);
         k.set(3, schema::EventKind::CUDA);
         b.initTimeDeltas32(4);
       }},
      {"no kind column for the records", [](B b) { b.initKinds(0); }},
      {"a time column shorter than the kind column", [](B b) { b.initTimeDeltas32(2); }},
      {"no time column", [](B b) { b.initTimeDeltas32(0); }},
      {"both time columns", [](B b) { b.initTimeDeltas(3); }},
      {"index gaps for some events only", [](B b) { b.initIndexGaps(2); }},
      {"a fingerprint missing", [](B b) { b.initFingerprints(1); }},
      {"a fingerprint to spare", [](B b) { b.initFingerprints(3); }},
      {"a fingerprint its flag does not announce", [](B b) { b.getOps()[1].setFlags(0); }},
      {"a flagged hash in its record as well as in the column", [](B b) { b.getOps()[0].setSendHash(0xf00); }},
      {"events in the epoch 2 list as well", [](B b) { b.initEvents(1); }},
      {"an op list of another struct's pointers",
       [](B b) {
         auto l = b.initOps(2);
         l[0].initCounts(1);
         b.initFingerprints(2);
         capnp::AnyStruct::Builder(l[1]).getPointerSection()[0].setAs<capnp::Text>("not a list");
       }},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    std::vector<Event> out;
    Status st = DecodeBuilt(
        [&](B b) {
          SmallBlock(b);
          d.apply(b);
        },
        &out);
    CHECK(st.code() == Status::Code::kCorruption);
  }
}

TEST_CASE("the fingerprint column holds the hashes flags announce, and a hash without its flag stays in its record",
          "[trace]") {
  std::vector<Event> in;
  for (int i = 0; i < 4; ++i) {
    Event e = testing::AllreduceOp(1, i + 1, 8, 0xa000 + i);
    if (i % 2 == 1) e.op.flags = 0;  // a hash recorded without its flag
    e.index = 2 * i;
    in.push_back(e);
    Event r = Ret(1, i + 1, 0xb000 + i);
    r.ret.flags = op_flags::kHasRecvHash;
    r.index = 2 * i + 1;
    in.push_back(r);
  }
  Event done = Completion(1, 0, 9);
  done.completion.flags = op_flags::kHasSendHash;
  done.completion.send_hash = 0xc000;
  done.completion.recv_hash = 0xc001;  // without its flag
  done.index = in.size();
  in.push_back(done);
  std::string raw = Encode(in);
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  auto block = reader.getRoot<schema::EventBlock>();
  auto fp = block.getFingerprints();
  const uint64_t want[] = {0xa000, 0xb000, 0xb001, 0xa002, 0xb002, 0xb003, 0xc000};
  REQUIRE(fp.size() == std::size(want));
  for (unsigned i = 0; i < fp.size(); ++i) CHECK(fp[i] == want[i]);
  {
    // The column ends the message, where the writer compresses it apart.
    EventBlockEncoder enc;
    std::span<const uint8_t> bytes = enc.Encode(in);
    REQUIRE(enc.random_from() == bytes.size() - sizeof(want));
    CHECK(std::memcmp(bytes.data() + enc.random_from(), want, sizeof(want)) == 0);
  }
  // The packed records hold 0 where the column holds the hash, and the hash
  // itself where no flag announces it.
  CHECK(block.getOps().size() == 0);
  auto ops = block.getPackedOps();
  packed::Unpacker<OpEvent> u;
  REQUIRE(u.Start({ops.begin(), ops.size()}) == nullptr);
  Event e;
  OpEvent op{};
  REQUIRE(u.Next(&e, &op) == nullptr);
  CHECK(op.send_hash == 0);
  REQUIRE(u.Next(&e, &op) == nullptr);
  CHECK(op.send_hash == 0xa001);
  auto completions = block.getPackedCompletions();
  packed::Unpacker<CompletionEvent> uc;
  REQUIRE(uc.Start({completions.begin(), completions.size()}) == nullptr);
  CompletionEvent c{};
  REQUIRE(uc.Next(&e, &c) == nullptr);
  CHECK(c.recv_hash == 0xc001);
  CHECK(c.send_hash == 0);
  CHECK(uc.done());
  CHECK(RoundTrip(in) == in);
}

TEST_CASE("a packed ret's or completion's payload hash goes to the fingerprint column", "[trace]") {
  std::vector<Event> in;
  Event r = Ret(1, 1, 0xb000);
  r.ret.flags = op_flags::kHasRecvHash;
  r.ret.payload_size = 8;
  r.ret.payload_hash = 0xd000;
  r.index = 0;
  in.push_back(r);
  Event c = Completion(1, 2, 9);
  c.completion.flags = op_flags::kHasSendHash;
  c.completion.send_hash = 0xc000;
  c.completion.payload_size = 16;
  c.completion.payload_hash = 0xd001;
  c.index = 1;
  in.push_back(c);
  Event none = Ret(1, 3, 0);
  none.ret.payload_hash = 0xd002;  // without a payload: stays in its record
  none.index = 2;
  in.push_back(none);
  std::string raw = Encode(in);
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  auto fp = reader.getRoot<schema::EventBlock>().getFingerprints();
  const uint64_t want[] = {0xb000, 0xd000, 0xc000, 0xd001};
  REQUIRE(fp.size() == std::size(want));
  for (unsigned i = 0; i < fp.size(); ++i) CHECK(fp[i] == want[i]);
  CHECK(RoundTrip(in) == in);
  // A payload whose hash the column lacks is damage.
  std::vector<Event> out;
  Status st = DecodeBuilt(
      [&](schema::EventBlock::Builder b) {
        auto k = b.initKinds(1);
        k.set(0, schema::EventKind::RET);
        b.initTimeDeltas32(1);
        packed::Packer<ReturnEvent> p;
        p.Begin();
        ReturnEvent body{};
        body.payload_size = 8;
        p.Add(0, 0, body, {});
        auto d = b.initPackedRets(static_cast<unsigned>(p.bytes().size()));
        std::memcpy(d.begin(), p.bytes().data(), p.bytes().size());
      },
      &out);
  CHECK(st.code() == Status::Code::kCorruption);
}

TEST_CASE("an event block declaring more events than the format allows is refused", "[trace]") {
  std::vector<Event> out;
  Status st = DecodeBuilt([](schema::EventBlock::Builder b) { b.initKinds(format::kMaxBlockEvents + 1); }, &out);
  CHECK(st.code() == Status::Code::kCorruption);
  CHECK(out.empty());
}

TEST_CASE("an event kind this reader does not know keeps its place in an epoch 3 block", "[trace]") {
  std::vector<Event> out;
  REQUIRE(DecodeBuilt(
              [](schema::EventBlock::Builder b) {
                SmallBlock(b);
                auto k = b.initKinds(4);
                k.set(0, schema::EventKind::OP);
                k.set(1, static_cast<schema::EventKind>(kEventKindCount + 3));
                k.set(2, schema::EventKind::CUDA);
                k.set(3, schema::EventKind::OP);
                b.initTimeDeltas32(4);
              },
              &out)
              .ok());
  REQUIRE(out.size() == 4);
  CHECK(out[1].index == 11);
  CHECK(out[1].kind == EventKind::kInfo);
  CHECK(out[1].info_key() == "replay.unknown_event");
  CHECK(out[1].info_value() == std::to_string(kEventKindCount + 3));
  CHECK(out[2].kind == EventKind::kCuda);
  CHECK(out[3].op.seq == 5);
}

TEST_CASE("time deltas of any size round-trip through the packed time column", "[trace]") {
  for (int64_t big : {int64_t{INT32_MAX}, int64_t{INT32_MAX} + 1, int64_t{INT32_MIN}, int64_t{INT32_MIN} - 1}) {
    INFO("delta " << big);
    std::vector<Event> in;
    for (int i = 0; i < 3; ++i) {
      Event e = testing::AllreduceOp(1, i + 1, 8, 0x1000 + i);
      e.index = i;
      e.time_ns = i == 2 ? 10 + big : 10;
      in.push_back(e);
    }
    std::string raw = Encode(in);
    std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
    std::memcpy(words.data(), raw.data(), raw.size());
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
    auto block = reader.getRoot<schema::EventBlock>();
    CHECK(block.getTimeDeltas32().size() == 0);
    CHECK(block.getTimeDeltas().size() == 0);
    CHECK(block.getTimeDeltasPacked().size() >= 3);
    std::vector<Event> out;
    REQUIRE(DecodeEventBlock(Bytes(raw), &out).ok());
    REQUIRE(out.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(out[i] == in[i]);
  }
}

TEST_CASE("an event is stored in a record of its kind's size, not the largest kind's", "[trace]") {
  // What the layout is for: a CUDA event took 208 bytes in an epoch 2 block.
  std::vector<Event> in;
  for (int i = 0; i < 1000; ++i) {
    Event e = Event::Make(CudaEvent{CudaOp::kEventRecord, 0, 0, 0x10, 0x20 + static_cast<uint64_t>(i), 0, 0, 0});
    e.index = i;
    e.time_ns = 100 * i;
    in.push_back(e);
  }
  std::string raw = Encode(in);
  CHECK(raw.size() / in.size() < 80);
  CHECK(RoundTrip(in) == in);
}

TEST_CASE("damaged bytes anywhere in an event block are a status, never a crash", "[trace]") {
  std::vector<Event> in = testing::SampleEventsOfEveryKind();
  for (const Event& e : testing::Epoch2FixtureEvents()) in.push_back(e);
  for (size_t i = 0; i < in.size(); ++i) in[i].index = i;
  std::string raw = Encode(in);
  size_t corrupt = 0;
  for (size_t at = 0; at < raw.size(); ++at) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = raw;
      bad[at] = static_cast<char>(bad[at] ^ flip);
      std::vector<Event> out;
      Status st = DecodeEventBlock(Bytes(bad), &out);
      INFO("byte " << at << " ^ " << static_cast<int>(flip));
      REQUIRE((st.ok() || st.code() == Status::Code::kCorruption));
      corrupt += !st.ok();
    }
  }
  CHECK(corrupt > 0);
}

// The packed records of a block as the encoder wrote them.
std::string PackedColumn(const std::string& raw, EventKind kind) {
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  auto block = reader.getRoot<schema::EventBlock>();
  auto d = kind == EventKind::kOp       ? block.getPackedOps()
           : kind == EventKind::kReturn ? block.getPackedRets()
                                        : block.getPackedCompletions();
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}

TEST_CASE("a call repeated at one call site packs into one byte for its op and one for its return", "[trace]") {
  std::vector<Event> in;
  for (int i = 0; i < 100; ++i) {
    Event op = testing::AllreduceOp(7, 1000 + i, 8, 0xa000 + i);
    op.index = in.size();
    op.call_site = 0x401234;
    op.thread = 2;
    in.push_back(op);
    Event ret = Ret(7, 1000 + i, 0xb000 + i);
    ret.ret.flags = op_flags::kHasRecvHash;
    ret.index = in.size();
    ret.call_site = 0x401234;
    ret.thread = 2;
    in.push_back(ret);
  }
  std::string raw = Encode(in);
  for (EventKind kind : {EventKind::kOp, EventKind::kReturn}) {
    INFO(EventKindName(kind));
    std::string column = PackedColumn(raw, kind);
    // The field count, the first record, the second (its seq relative to the
    // first's, which was relative to none), then 98 masks of 0.
    REQUIRE(column.size() > 98);
    CHECK(column.substr(column.size() - 98) == std::string(98, '\0'));
    CHECK(column.size() < 98 + 48);
  }
  CHECK(RoundTrip(in) == in);
}

TEST_CASE("packed records number fields in the order docs/trace-format.md gives", "[trace]") {
  // Changing an order here changes the format: fields are only added at the end.
  const std::vector<std::string> op = {
      "api",      "kind",     "flags",     "comm",      "seq",       "peer_seq",  "count",
      "dtype",    "redop",    "dtype_size", "dtype_sig", "root",     "peer",      "tag",
      "group",    "send_buf", "recv_buf",  "stream",    "request",   "bytes",     "send_hash",
      "send_nan", "send_inf", "recv_peer", "recv_tag",  "recv_count", "recv_dtype", "recv_dtype_size"};
  const std::vector<std::string> ret = {"api",      "flags",      "rc",        "comm",       "seq",
                                        "peer_seq", "request",    "recv_hash", "recv_nan",   "recv_inf",
                                        "source",   "tag",        "recv_count", "payload_hash", "payload_size"};
  const std::vector<std::string> completion = {
      "request",  "api",    "flags", "rc",         "comm",         "seq",          "peer_seq",
      "recv_hash", "recv_nan", "recv_inf", "source", "tag", "recv_count", "payload_hash", "payload_size",
      "cancelled", "send_hash", "send_nan", "send_inf"};
  auto names = [](const auto& fields) { return std::vector<std::string>(std::begin(fields), std::end(fields)); };
  CHECK(names(packed::Fields<OpEvent>::kNames) == op);
  CHECK(names(packed::Fields<ReturnEvent>::kNames) == ret);
  CHECK(names(packed::Fields<CompletionEvent>::kNames) == completion);
  const std::vector<std::string> test = {"api", "flag", "index", "source", "tag", "count", "comm", "rc"};
  CHECK(names(packed::Fields<TestEvent>::kNames) == test);
  const std::vector<std::string> cuda = {"op", "rc", "device", "stream", "event", "graph", "other", "count"};
  CHECK(names(packed::Fields<CudaEvent>::kNames) == cuda);
}

TEST_CASE("packed records round-trip calls of every packed kind that vary field by field across call sites and threads",
          "[trace]") {
  std::mt19937_64 rng(42);
  std::vector<Event> in;
  const uint64_t sites[] = {0, 0x401000, 0x401040, 0x7fff00001000, 0x401000 + 64 * 0x9E3779B97F4A7C15ull};
  for (int i = 0; i < 3000; ++i) {
    auto pick = [&](uint64_t n) { return rng() % n; };
    Event e;
    const uint64_t comm = 1 + pick(3);
    const uint64_t seq = 1 + static_cast<uint64_t>(i) / 3;
    switch (pick(5)) {
      case 0: {
        e = testing::AllreduceOp(comm, seq, 1 + static_cast<int64_t>(pick(4)), rng());
        if (pick(4) == 0) e.op.flags = 0;
        if (pick(5) == 0) e.op.kind = OpKind::kAllgatherv;
        if (pick(5) == 0) e.op.send_buf += pick(3) * 0x1000;
        if (pick(7) == 0) e.op.recv_peer = -3;
        if (pick(6) == 0) e.op.root = static_cast<int32_t>(pick(4)) - 2;
        if (pick(9) == 0) e.op.dtype = static_cast<DataType>(pick(5));
        if (pick(4) == 0) e.list = {static_cast<int64_t>(pick(100)) - 50, INT64_MIN, INT64_MAX};
        break;
      }
      case 1: {
        e = Ret(comm, seq, rng());
        if (pick(2) == 0) e.ret.flags = op_flags::kHasRecvHash;
        if (pick(5) == 0) e.ret.rc = static_cast<int32_t>(pick(3)) - 1;
        if (pick(5) == 0) e.ret.source = static_cast<int32_t>(pick(4));
        e.ret.payload_size = pick(3) == 0 ? rng() : 0;
        break;
      }
      case 3: {
        TestEvent t{};
        t.api = static_cast<uint16_t>(pick(3));
        t.flag = pick(4) == 0;
        t.index = t.flag ? static_cast<int32_t>(pick(3)) : -1;
        t.comm = comm;
        e = Event::Make(t);
        if (pick(3) == 0) e.list = {static_cast<int64_t>(pick(4)), 7};
        break;
      }
      case 4: {
        CudaEvent c{};
        c.op = static_cast<CudaOp>(pick(kCudaOpCount));
        c.rc = pick(8) == 0 ? 600 : 0;
        c.device = static_cast<int32_t>(pick(3)) - 1;
        c.stream = 0x55d0c0a1e000 + pick(2) * 0x1200;
        c.event = 0x55d0c0b2f000 + pick(4) * 0x40;
        c.count = pick(5) == 0 ? rng() : 0;
        e = Event::Make(c);
        break;
      }
      default: {
        e = Completion(comm, pick(2) == 0 ? 0 : seq, rng());
        if (pick(2) == 0) e.completion.cancelled = true;
        if (pick(2) == 0) {
          e.completion.flags = op_flags::kHasSendHash;
          e.completion.send_hash = rng();
        }
        break;
      }
    }
    e.index = in.size();
    e.time_ns = i * 10;
    e.thread = static_cast<uint32_t>(pick(3) == 0 ? UINT32_MAX - pick(2) : pick(3));
    e.call_site = sites[pick(std::size(sites))];
    in.push_back(e);
  }
  std::vector<Event> out = RoundTrip(in);
  REQUIRE(out.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("event " << i);
    REQUIRE(out[i] == in[i]);
  }
}

// A block of two ops (kinds OP, CUDA, OP) whose packed column is `column`.
Status DecodePacked(const std::string& column, std::vector<Event>* out,
                    const std::function<void(schema::EventBlock::Builder)>& more = {}) {
  return DecodeBuilt(
      [&](schema::EventBlock::Builder b) {
        SmallBlock(b);
        b.disownOps();
        b.initFingerprints(0);
        auto d = b.initPackedOps(static_cast<unsigned>(column.size()));
        std::memcpy(d.begin(), column.data(), column.size());
        if (more) more(b);
      },
      out);
}

std::string Varints(std::initializer_list<uint64_t> values) {
  std::string s;
  for (uint64_t v : values) {
    uint8_t buf[packed::kMaxVarint];
    uint8_t* end = packed::PutVarint(buf, v);
    s.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
  }
  return s;
}

constexpr uint64_t FieldBit(unsigned i) { return uint64_t{1} << (packed::kHeadBits + i); }

TEST_CASE("a packed column of more or fewer fields than this reader knows still reads", "[trace]") {
  using packed::ZigZag;
  const uint64_t comm_field = 3, seq_field = 4;
  SECTION("a newer writer's fields are read past") {
    const uint64_t n = packed::Fields<OpEvent>::kCount + 2;
    const std::string column =
        Varints({n, FieldBit(comm_field) | FieldBit(seq_field) | FieldBit(n - 1), ZigZag(0xc), ZigZag(4), 77,
                 FieldBit(n - 2), 1u << 20});
    std::vector<Event> out;
    REQUIRE(DecodePacked(column, &out).ok());
    REQUIRE(out.size() == 3);
    CHECK(out[0].op.comm == 0xc);
    CHECK(out[0].op.seq == 4);
    CHECK(out[2].op.comm == 0xc);
    CHECK(out[2].op.seq == 8);  // the reference's stored 4, relative to the last 4
  }
  SECTION("an older writer's fields read as the reference's") {
    const std::string column = Varints({5, FieldBit(comm_field) | FieldBit(seq_field) | packed::kThreadBit, ZigZag(9),
                                        ZigZag(0xc), ZigZag(1), 0});
    std::vector<Event> out;
    REQUIRE(DecodePacked(column, &out).ok());
    REQUIRE(out.size() == 3);
    CHECK(out[0].thread == 9);
    CHECK(out[2].thread == 9);
    CHECK(out[2].op.comm == 0xc);
    CHECK(out[2].op.seq == 2);
    CHECK(out[2].op.recv_peer == 0);
  }
}

TEST_CASE("damaged packed records are a corruption", "[trace]") {
  using packed::ZigZag;
  const std::string good = Varints({packed::Fields<OpEvent>::kCount, FieldBit(3), ZigZag(0xc), 0});
  {
    std::vector<Event> out;
    REQUIRE(DecodePacked(good, &out).ok());
  }
  struct Damage {
    const char* what;
    std::string column;
    std::function<void(schema::EventBlock::Builder)> more;
  };
  const uint64_t n = packed::Fields<OpEvent>::kCount;
  const Damage damages[] = {
      {"an empty column", "", {}},
      {"a record missing", Varints({n, 0}), {}},
      {"a record to spare", good + Varints({0}), {}},
      {"a field cut short", Varints({n, FieldBit(3), 0x80}), {}},
      {"a varint of eleven bytes", Varints({n, 0}) + std::string(10, '\xff') + "\x01", {}},
      {"a mask bit beyond the field count", Varints({n, FieldBit(static_cast<unsigned>(n)), 0}), {}},
      {"more fields than a mask covers", Varints({packed::kMaxFields + 1, 0, 0}), {}},
      {"a list longer than the column", Varints({n, packed::kListBit, 1000, 1, 0}), {}},
      {"records both packed and in the list", good, [](schema::EventBlock::Builder b) { b.initOps(2); }},
      {"a fingerprint its flag does not announce", good,
       [](schema::EventBlock::Builder b) { b.initFingerprints(1); }},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    std::vector<Event> out;
    Status st = DecodePacked(d.column, &out, d.more);
    CHECK(st.code() == Status::Code::kCorruption);
    CHECK_THAT(st.message(), Catch::Contains("event block"));
  }
}

TEST_CASE("steady intervals at one call site pack into a byte of time each", "[trace]") {
  std::vector<Event> in;
  int64_t t = 1'000'000;
  for (int i = 0; i < 200; ++i) {
    Event op = testing::AllreduceOp(7, 1 + i, 8, 0);
    op.index = in.size();
    op.call_site = 0x401234;
    op.time_ns = (t += 5'000'000 + (i % 3) * 20);  // 5 ms and a few ns of jitter
    in.push_back(op);
    Event ret = Ret(7, 1 + i, 0);
    ret.index = in.size();
    ret.call_site = 0x401234;
    ret.time_ns = (t += 12'000);
    in.push_back(ret);
  }
  std::string raw = Encode(in);
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  auto times = reader.getRoot<schema::EventBlock>().getTimeDeltasPacked();
  // The first op and ret give their whole deltas; every later one its jitter.
  CHECK(times.size() < in.size() + 8);
  CHECK(RoundTrip(in) == in);
}

TEST_CASE("a block keeps short intervals that predict badly as they are", "[trace]") {
  std::mt19937_64 rng(3);
  for (bool steady : {false, true}) {
    INFO((steady ? "steady" : "short and random"));
    std::vector<Event> in;
    int64_t t = 0;
    for (int i = 0; i < 500; ++i) {
      Event e = testing::AllreduceOp(7, 1 + i, 8, 0);
      e.index = i;
      e.call_site = 0x401234;
      e.time_ns = (t += steady ? 1'000'000 + static_cast<int64_t>(rng() % 8) : static_cast<int64_t>(rng() % 60));
      in.push_back(e);
    }
    std::string raw = Encode(in);
    std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
    std::memcpy(words.data(), raw.data(), raw.size());
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
    CHECK(reader.getRoot<schema::EventBlock>().getTimeDeltasUnpredicted() == !steady);
    CHECK(RoundTrip(in) == in);
  }
}

TEST_CASE("damaged packed time deltas are a corruption", "[trace]") {
  using B = schema::EventBlock::Builder;
  auto with_times = [](const std::string& bytes, const std::function<void(B)>& more = {}) {
    return [=](B b) {
      SmallBlock(b);
      b.disownTimeDeltas32();
      auto d = b.initTimeDeltasPacked(static_cast<unsigned>(bytes.size()));
      std::memcpy(d.begin(), bytes.data(), bytes.size());
      if (more) more(b);
    };
  };
  {
    std::vector<Event> out;
    REQUIRE(DecodeBuilt(with_times(Varints({packed::ZigZag(5), packed::ZigZag(uint64_t(-7)), 0})), &out).ok());
    REQUIRE(out.size() == 3);
    CHECK(out[0].time_ns == 1005);
    CHECK(out[1].time_ns == 998);
    CHECK(out[2].time_ns == 1003);  // the first op's 5 predicts the second's
  }
  {
    std::vector<Event> out;
    REQUIRE(DecodeBuilt(with_times(Varints({packed::ZigZag(5), packed::ZigZag(uint64_t(-7)), 0}),
                                   [](B b) { b.setTimeDeltasUnpredicted(true); }),
                        &out)
                .ok());
    REQUIRE(out.size() == 3);
    CHECK(out[2].time_ns == 998);  // each delta as it is
  }
  struct Damage {
    const char* what;
    std::function<void(B)> build;
  };
  const Damage damages[] = {
      {"a delta missing", with_times(Varints({1, 2}))},
      {"a delta to spare", with_times(Varints({1, 2, 3, 4}))},
      {"a delta cut short", with_times(Varints({1, 2}) + "\x80")},
      {"deltas packed and in a column as well", with_times(Varints({1, 2, 3}), [](B b) { b.initTimeDeltas32(3); })},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    std::vector<Event> out;
    CHECK(DecodeBuilt(d.build, &out).code() == Status::Code::kCorruption);
  }
}

}  // namespace
}  // namespace replay
