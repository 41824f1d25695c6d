#include "replay/trace_reader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>

#include "replay/trace_writer.h"
#include "support/live_writer.h"
#include "support/sample_events.h"
#include "support/temp_dir.h"
#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"

namespace replay {
namespace {

// Writes `ranks` ranks of `events` allreduces each, in blocks of 100 events.
void WriteTrace(const std::string& dir, int ranks, int events, bool close = true) {
  for (int r = 0; r < ranks; ++r) {
    WriterOptions o;
    o.dir = dir;
    o.header.rank = r;
    o.header.world_size = ranks;
    o.block_events = 100;
    o.background_thread = false;
    o.header.trace_uuid = Uuid{1, 2, 3};
    o.manifest.world_size = ranks;
    auto w = TraceWriter::Open(o);
    REQUIRE(w.ok());
    for (int i = 0; i < events; ++i) REQUIRE((*w)->Append(testing::AllreduceOp(5, i + 1, 4, i)));
    if (close) {
      REQUIRE((*w)->Close(CloseReason::kFinalize).ok());
    } else {
      REQUIRE((*w)->Flush().ok());
      (*w).release();  // keep the ring locked: the rank looks alive
    }
  }
}

TEST_CASE("a trace directory lists its ranks in rank order", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 3, 10);
  auto t = TraceReader::Open(dir.path());
  REQUIRE(t.ok());
  REQUIRE((*t)->manifest().has_value());
  CHECK((*t)->manifest()->world_size == 3);
  REQUIRE((*t)->ranks().size() == 3);
  for (int r = 0; r < 3; ++r) CHECK((*t)->ranks()[r].rank == r);
  auto rank1 = (*t)->OpenRank(1);
  REQUIRE(rank1.ok());
  CHECK((*rank1)->events().size() == 10);
}

TEST_CASE("reader skips a truncated trailing block and keeps the rest", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 1000);
  std::string path = dir / "rank-00000/events";
  std::string bytes = testing::ReadFile(path);
  testing::WriteFile(path, bytes.substr(0, bytes.size() - 10));
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  CHECK((*r)->events().size() == 900);
  REQUIRE((*r)->problems().size() >= 1);
  CHECK((*r)->problems()[0].torn_tail);
  CHECK((*r)->problems()[0].message.find("torn tail") != std::string::npos);
}

TEST_CASE("reader skips a corrupt middle block, reports its offset and the gap", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 1000);
  std::string path = dir / "rank-00000/events";
  std::string bytes = testing::ReadFile(path);
  size_t target = bytes.size() / 2;
  bytes[target] ^= 0x10;
  testing::WriteFile(path, bytes);
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  CHECK((*r)->events().size() == 900);
  CHECK((*r)->stats().missing == 100);
  bool found = false;
  for (const TraceProblem& p : (*r)->problems()) {
    if (p.message.find("damaged block") != std::string::npos) {
      found = true;
      CHECK(p.offset <= target);
      CHECK(p.offset + p.length > target);
    }
  }
  CHECK(found);
}

TEST_CASE("blocks that declare more events than they hold read as what they hold", "[trace]") {
  // The reader reserves room for the events the block headers declare before
  // decoding them; a crafted stream whose intact blocks each claim the
  // format's maximum must read the same and not allocate what it claims.
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 1000);
  std::string path = dir / "rank-00000/events";
  std::string bytes = testing::ReadFile(path);
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  std::string forged = bytes.substr(0, sizeof(format::FileHeader));
  BlockScanner scanner(in, sizeof(format::FileHeader));
  BlockCodec codec;
  FoundBlock block;
  std::string raw;
  int blocks = 0;
  while (scanner.Next(&block)) {
    REQUIRE(codec.Decode(block.header, block.stored, &raw).ok());
    std::span<const uint8_t> r(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
    REQUIRE(codec.Encode(static_cast<format::BlockKind>(block.header.kind), block.header.tag,
                         format::kMaxBlockEvents, r, &forged).ok());
    ++blocks;
  }
  REQUIRE(blocks == 10);
  testing::WriteFile(path, forged);
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  REQUIRE((*r)->events().size() == 1000);
  CHECK((*r)->events().back().index == 999);
  CHECK((*r)->stats().missing == 0);
  CHECK((*r)->events().capacity() <= (uint64_t{1} << 22));
}

TEST_CASE("a trace of a newer epoch is refused with what to do", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 10);
  std::string path = dir / "rank-00000/events";
  std::string bytes = testing::ReadFile(path);
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  h.min_reader_epoch = format::kFormatEpoch + 1;
  h.checksum = FileHeaderChecksum(h);
  std::memcpy(bytes.data(), &h, sizeof(h));
  testing::WriteFile(path, bytes);
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kVersion);
  CHECK(r.status().message().find("upgrade replay") != std::string::npos);
}

// The trace in `dir`, which opens with its two ranks and one problem, that says `what`.
std::unique_ptr<TraceReader> OpenWithOneProblem(const std::string& dir, const std::string& what) {
  auto t = TraceReader::Open(dir);
  REQUIRE(t.ok());
  CHECK((*t)->ranks().size() == 2);
  REQUIRE((*t)->problems().size() == 1);
  CHECK((*t)->problems()[0].message.find(what) != std::string::npos);
  return std::move(t).value();
}

TEST_CASE("a manifest from another recording is ignored, not every rank", "[trace]") {
  testing::TempDir a, b;
  WriteTrace(a.path(), 2, 10);
  // Another recording's manifest, copied over this one's.
  JobManifest other;
  other.trace_uuid = Uuid{9, 9, 9};
  other.world_size = 2;
  testing::WriteFile(a / "manifest", EncodeJobManifest(other));
  auto t = OpenWithOneProblem(a.path(), "the manifest is ignored");
  CHECK(!t->manifest().has_value());

  // Ranks of two recordings and a manifest of neither: nothing to go by.
  std::filesystem::copy(a / "rank-00000", b / "rank-00000");
  testing::WriteFile(b / "manifest", EncodeJobManifest(other));
  RankHeader h = [&] {
    auto r = RankReader::Open(b / "rank-00000");
    REQUIRE(r.ok());
    return (*r)->header();
  }();
  h.trace_uuid = Uuid{7, 7, 7};
  h.rank = 1;
  std::filesystem::create_directory(b / "rank-00001");
  testing::WriteFile(b / "rank-00001/header", EncodeRankHeader(h));
  auto mixed = TraceReader::Open(b.path());
  REQUIRE(!mixed.ok());
  CHECK(mixed.status().message().find("mixes the ranks of 2 recordings") != std::string::npos);
}

TEST_CASE("a bit flip in a manifest's file header is damage, not a newer format", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 2, 10);
  std::string bytes = testing::ReadFile(dir / "manifest");
  bytes[offsetof(format::FileHeader, min_reader_epoch)] ^= 0x10;
  testing::WriteFile(dir / "manifest", bytes);
  OpenWithOneProblem(dir.path(), "checksum mismatch");
}

TEST_CASE("traces the epoch 2 and epoch 3 writers wrote still read, every kind intact", "[trace]") {
  for (uint32_t epoch : {2u, 3u}) {
    INFO("epoch " << epoch);
    testing::TempDir dir;
    std::filesystem::copy(std::string(REPLAY_SOURCE_DIR) + "/tests/trace/testdata/epoch" + std::to_string(epoch) +
                              "-trace",
                          dir.path(), std::filesystem::copy_options::recursive);
    auto t = TraceReader::Open(dir.path());
    REQUIRE(t.ok());
    REQUIRE((*t)->ranks().size() == 1);
    auto r = (*t)->OpenRank(0);
    REQUIRE(r.ok());
    CHECK((*r)->header().format_epoch == epoch);
    CHECK((*r)->status() == RankStatus::kComplete);
    CHECK((*r)->problems().empty());
    CHECK((*r)->stats().blocks == 3);  // written 8 events per block
    // The writer numbered the events itself, from its one thread, at its own times.
    std::vector<Event> want = testing::Epoch2FixtureEvents();
    const std::vector<Event>& got = (*r)->events();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("event " << i << ", kind " << EventKindName(want[i].kind));
      want[i].index = i;
      want[i].thread = 0;
      want[i].time_ns = got[i].time_ns;
      CHECK(got[i] == want[i]);
    }
  }
}

// Rank 0, still writing: 50 allreduces in sealed blocks, 30 more only in its ring.
std::unique_ptr<TraceWriter> RunningRank(const std::string& dir) {
  WriterOptions o;
  o.dir = dir;
  o.header.rank = 0;
  o.background_thread = false;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  for (int i = 0; i < 50; ++i) (*w)->Append(testing::AllreduceOp(1, i + 1, 1, i));
  REQUIRE((*w)->Flush().ok());
  for (int i = 50; i < 80; ++i) (*w)->Append(testing::AllreduceOp(1, i + 1, 1, i));
  return std::move(w).value();
}

TEST_CASE("a rank that is still writing is reported as such, with its ring", "[trace]") {
  testing::TempDir dir;
  auto w = RunningRank(dir.path());
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  CHECK((*r)->status() == RankStatus::kRunning);
  CHECK((*r)->events().size() == 80);
  CHECK((*r)->stats().salvaged == 30);
  REQUIRE(w->Close(CloseReason::kExit).ok());
  auto done = RankReader::Open(dir / "rank-00000");
  REQUIRE(done.ok());
  CHECK((*done)->status() == RankStatus::kComplete);
  CHECK((*done)->events().size() == 80);
}

TEST_CASE("reading a running rank while its writer seals and rewrites blocks misses nothing", "[trace]") {
  testing::TempDir dir;
  testing::LiveWriter live(dir.path());
  REQUIRE(live.ok());
  std::string rank_dir = dir.path() + "/rank-00000";
  int reads = 0;
  // Reads for two seconds while the writer appends (at least five reads:
  // under a sanitizer one read of the grown rank takes seconds).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((std::chrono::steady_clock::now() < deadline && reads < 200) || reads < 5) {
    uint64_t before = live.appended();
    auto r = RankReader::Open(rank_dir);
    REQUIRE(r.ok());
    ++reads;
    INFO("read " << reads << ": " << (*r)->events().size() << " events, " << before << " appended before it");
    testing::RequireAllPublished(**r, before);
    for (const TraceProblem& p : (*r)->problems()) {
      INFO(p.message);
      CHECK(p.torn_tail);  // at most a block being appended
    }
  }
  live.Stop();
  REQUIRE(live.writer().Close(CloseReason::kFinalize).ok());
  CHECK(live.writer().stats().dropped == 0);
  auto r = RankReader::Open(rank_dir);
  REQUIRE(r.ok());
  CHECK((*r)->events().size() == live.appended());
  CHECK((*r)->problems().empty());
}

TEST_CASE("bad trace directories get an error that says what to do", "[trace]") {
  testing::TempDir dir;
  auto missing = TraceReader::Open(dir / "nope");
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message().find("does not exist") != std::string::npos);

  auto empty = TraceReader::Open(dir.path());
  CHECK(empty.status().code() == Status::Code::kNotATrace);
  CHECK(empty.status().message().find("replay record") != std::string::npos);

  testing::WriteFile(dir / "file.txt", "hello");
  CHECK(TraceReader::Open(dir / "file.txt").status().code() == Status::Code::kNotATrace);
}

TEST_CASE("a rank directory of another recording is ignored and reported", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 2, 5);
  WriterOptions o;
  o.dir = dir.path();
  o.header.rank = 7;
  o.header.trace_uuid = Uuid{9, 9, 9};
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  REQUIRE((*w)->Close(CloseReason::kExit).ok());
  OpenWithOneProblem(dir.path(), "another recording");
}

TEST_CASE("a foreign file in place of a stream is refused, not parsed", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 5);
  testing::WriteFile(dir / "rank-00000/events", std::string(4096, 'Q'));
  testing::WriteFile(dir / "rank-00000/header", "not a header");
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kNotATrace);
}

TEST_CASE("a header or manifest holding an empty message is damage, not a crash", "[trace]") {
  // Found by the decoder fuzz target: an empty block reached memcpy with a null
  // destination.
  const uint8_t uuid[16] = {7};
  std::string header;
  EncodeFileHeader(format::StreamKind::kHeader, uuid, &header);
  BlockCodec codec;
  REQUIRE(codec.Encode(format::BlockKind::kHeader, 0, 0, {}, &header).ok());
  auto h = DecodeRankHeader({reinterpret_cast<const uint8_t*>(header.data()), header.size()}, "header");
  CHECK(h.status().code() == Status::Code::kCorruption);

  std::string manifest;
  EncodeFileHeader(format::StreamKind::kManifest, uuid, &manifest);
  REQUIRE(codec.Encode(format::BlockKind::kManifest, 0, 0, {}, &manifest).ok());
  auto m = DecodeJobManifest({reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size()},
                             "manifest");
  CHECK(m.status().code() == Status::Code::kCorruption);
}

TEST_CASE("a header or manifest stating a rank, world size or clock no job has reads with that value unknown",
          "[trace]") {
  // Found by the analysis fuzz target: a world size of 2^31-1 made `check`
  // list two billion untraced ranks.
  auto decode = [](const RankHeader& h) {
    std::string bytes = EncodeRankHeader(h);
    auto d = DecodeRankHeader({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "header");
    REQUIRE(d.ok());
    return std::move(d).value();
  };
  RankHeader good;
  good.rank = 3;
  good.world_size = 4;
  good.host = "node7";
  good.start_realtime_ns = 1'700'000'000'000'000'000;
  good.start_monotonic_ns = 5'000'000'000;
  CHECK(decode(good).damage.empty());
  RankHeader edge = good;
  edge.rank = format::kMaxRanks - 1;
  edge.world_size = format::kMaxRanks;
  CHECK(decode(edge).damage.empty());
  edge.rank = edge.world_size = -1;  // not known yet
  CHECK(decode(edge).damage.empty());
  struct Case {
    const char* said;
    std::function<void(RankHeader*)> damage;
    std::function<bool(const RankHeader&)> unknown;
  };
  for (const Case& c : std::vector<Case>{
           {"states world size 2147483647, outside -1..1048576", [](RankHeader* h) { h->world_size = INT32_MAX; },
            [](const RankHeader& h) { return h.world_size == -1; }},
           {"states world size 1048577", [](RankHeader* h) { h->world_size = format::kMaxRanks + 1; },
            [](const RankHeader& h) { return h.world_size == -1; }},
           {"states world size -2", [](RankHeader* h) { h->world_size = -2; },
            [](const RankHeader& h) { return h.world_size == -1; }},
           {"states rank 1048576, outside -1..1048575", [](RankHeader* h) { h->rank = format::kMaxRanks; },
            [](const RankHeader& h) { return h.rank == -1; }},
           {"states rank -7", [](RankHeader* h) { h->rank = -7; }, [](const RankHeader& h) { return h.rank == -1; }},
           {"states start time -1 ns, not a clock reading", [](RankHeader* h) { h->start_realtime_ns = -1; },
            [](const RankHeader& h) { return h.start_realtime_ns == 0; }},
           {"states monotonic start time 9223372036854775807 ns",
            [](RankHeader* h) { h->start_monotonic_ns = INT64_MAX; },
            [](const RankHeader& h) { return h.start_monotonic_ns == 0; }},
           {"states close time 4611686018427387904 ns",
            [](RankHeader* h) { h->close_realtime_ns = format::kMaxClockNs; },
            [](const RankHeader& h) { return h.close_realtime_ns == 0; }},
       }) {
    INFO(c.said);
    RankHeader h = good;
    c.damage(&h);
    RankHeader d = decode(h);
    CHECK(d.damage.find(c.said) != std::string::npos);
    CHECK(d.damage.find("(damaged, or not written by replay): ignored") != std::string::npos);
    CHECK(c.unknown(d));
    CHECK(d.host == "node7");  // the rest is kept
  }
  JobManifest m;
  m.world_size = INT32_MAX;
  std::string bytes = EncodeJobManifest(m);
  auto dm = DecodeJobManifest({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "manifest");
  REQUIRE(dm.ok());
  CHECK(dm->world_size == -1);
  CHECK(dm->damage.find("states world size 2147483647") != std::string::npos);

  // The reader says so.
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 3);
  RankHeader h = decode(good);
  h.rank = 0;
  h.trace_uuid = Uuid{1, 2, 3};
  h.world_size = INT32_MAX;
  testing::WriteFile(dir / "rank-00000/header", EncodeRankHeader(h));
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  CHECK((*r)->header().world_size == -1);
  REQUIRE(!(*r)->problems().empty());
  CHECK((*r)->problems()[0].message.find("states world size 2147483647") != std::string::npos);
}

// Allreduces on comm 5 with seq 1 to `n`, indexed from 0, as a rank appends them.
std::vector<Event> IndexedAllreduces(int n) {
  std::vector<Event> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(testing::AllreduceOp(5, i + 1, 4, i));
    out.back().index = static_cast<uint64_t>(i);
  }
  return out;
}

TEST_CASE("event times no clock gives are clamped and reported, so sums of times cannot overflow", "[trace]") {
  // Found by the analysis fuzz target: a crafted time overflowed check's
  // arithmetic on wall-clock times.
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 3);
  std::vector<Event> events = IndexedAllreduces(3);
  events[0].time_ns = 1000;
  events[1].time_ns = INT64_MAX;
  events[2].time_ns = INT64_MIN + 5;
  EventBlockEncoder encoder;
  std::span<const uint8_t> raw = encoder.Encode(events);
  std::string file;
  const Uuid uuid{1, 2, 3};
  EncodeFileHeader(format::StreamKind::kEvents, uuid.data(), &file);
  BlockCodec codec;
  REQUIRE(codec.Encode(format::BlockKind::kEvents, 0, events.size(), raw, &file).ok());
  testing::WriteFile(dir / "rank-00000/events", file);
  auto r = RankReader::Open(dir / "rank-00000");
  REQUIRE(r.ok());
  REQUIRE((*r)->events().size() == 3);
  CHECK((*r)->events()[0].time_ns == 1000);
  CHECK((*r)->events()[1].time_ns == format::kMaxEventTimeNs);
  CHECK((*r)->events()[2].time_ns == -format::kMaxEventTimeNs);
  bool said = false;
  for (const TraceProblem& p : (*r)->problems()) said = said || p.message.find("2 events with a time") != std::string::npos;
  CHECK(said);
}

// The events of a rank, walked as a stream.
std::vector<Event> Walked(const std::string& rank_dir, EventWalk* walk = nullptr) {
  ReadOptions o;
  o.stream = true;
  auto r = RankReader::Open(rank_dir, o);
  REQUIRE(r.ok());
  CHECK((*r)->events().empty());
  std::vector<Event> out;
  auto w = (*r)->ForEachEvent([&](const Event& e) {
    out.push_back(e);
    return true;
  });
  REQUIRE(w.ok());
  CHECK(w->events == out.size());
  if (walk != nullptr) *walk = *w;
  return out;
}

// Rewrites rank 0's events stream as the given blocks of events.
void WriteBlocks(const std::string& dir, const std::vector<std::vector<Event>>& blocks) {
  std::string file;
  const Uuid uuid{1, 2, 3};
  EncodeFileHeader(format::StreamKind::kEvents, uuid.data(), &file);
  EventBlockEncoder encoder;
  BlockCodec codec;
  for (const std::vector<Event>& b : blocks) {
    std::span<const uint8_t> raw = encoder.Encode(b);
    REQUIRE(codec.Encode(format::BlockKind::kEvents, b.front().index, b.size(), raw, &file).ok());
  }
  testing::WriteFile(dir + "/rank-00000/events", file);
}

TEST_CASE("a rank opened to stream walks the events and the damage of one read whole", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 1000);
  std::string path = dir / "rank-00000/events";
  std::string bytes = testing::ReadFile(path);
  bytes[bytes.size() / 2] ^= 0x10;
  testing::WriteFile(path, bytes);
  auto whole = RankReader::Open(dir / "rank-00000");
  REQUIRE(whole.ok());
  EventWalk walk;
  std::vector<Event> streamed = Walked(dir / "rank-00000", &walk);
  CHECK(streamed == (*whole)->events());
  CHECK(walk.stats.missing == 100);
  CHECK(walk.stats.blocks == (*whole)->stats().blocks);
  CHECK(walk.first_ns == (*whole)->events().front().time_ns);
  CHECK(walk.last_ns == (*whole)->events().back().time_ns);
  REQUIRE(walk.problems.size() == (*whole)->problems().size());
  for (size_t i = 0; i < walk.problems.size(); ++i) CHECK(walk.problems[i].message == (*whole)->problems()[i].message);

  SECTION("and can stop early") {
    ReadOptions o;
    o.stream = true;
    auto r = RankReader::Open(dir / "rank-00000", o);
    REQUIRE(r.ok());
    int seen = 0;
    REQUIRE((*r)->ForEachEvent([&](const Event&) { return ++seen < 10; }).ok());
    CHECK(seen == 10);
  }
}

TEST_CASE("a running rank opened to stream walks its blocks and then its ring", "[trace]") {
  testing::TempDir dir;
  auto w = RunningRank(dir.path());
  EventWalk walk;
  std::vector<Event> streamed = Walked(dir / "rank-00000", &walk);
  REQUIRE(streamed.size() == 80);
  for (size_t i = 0; i < streamed.size(); ++i) CHECK(streamed[i].index == i);
  CHECK(walk.stats.salvaged == 30);
  REQUIRE(w->Close(CloseReason::kExit).ok());
}

TEST_CASE("events a slow thread published late are walked in index order", "[trace]") {
  testing::TempDir dir;
  WriteTrace(dir.path(), 1, 1);
  std::vector<Event> all = IndexedAllreduces(800);
  auto block = [&](std::vector<int> indexes) {
    std::vector<Event> b;
    for (int i : indexes) b.push_back(all[static_cast<size_t>(i)]);
    return b;
  };
  auto range = [](int from, int to, std::vector<int> skip = {}) {
    std::vector<int> v;
    for (int i = from; i < to; ++i) {
      if (std::find(skip.begin(), skip.end(), i) == skip.end()) v.push_back(i);
    }
    return v;
  };
  std::vector<int> late_block = {50};
  for (int i : range(200, 300)) late_block.push_back(i);
  SECTION("one or a few blocks late: in order either way") {
    WriteBlocks(dir.path(), {block(range(0, 100, {50})), block(range(100, 200)), block(late_block)});
    std::vector<Event> streamed = Walked(dir / "rank-00000");
    REQUIRE(streamed.size() == 300);
    for (size_t i = 0; i < streamed.size(); ++i) CHECK(streamed[i].index == i);
  }
  SECTION("further out of place: the stream passes it late and says so, read whole it is sorted in") {
    // Blocks of 20,000 events: the merge looks back over at least 65,536.
    all = IndexedAllreduces(200000);
    std::vector<std::vector<Event>> blocks = {block(range(0, 20000, {50}))};
    for (int b = 1; b < 9; ++b) blocks.push_back(block(range(b * 20000, (b + 1) * 20000)));
    std::vector<int> very_late = {50};
    for (int i : range(180000, 200000)) very_late.push_back(i);
    blocks.push_back(block(very_late));
    WriteBlocks(dir.path(), blocks);
    EventWalk walk;
    std::vector<Event> streamed = Walked(dir / "rank-00000", &walk);
    REQUIRE(streamed.size() == 200000);
    bool said = false;
    for (const TraceProblem& p : walk.problems) said = said || p.message.find("1 events stored further out of place") == 0;
    CHECK(said);
    auto whole = RankReader::Open(dir / "rank-00000");
    REQUIRE(whole.ok());
    REQUIRE((*whole)->events().size() == 200000);
    size_t out_of_place = 0;
    for (size_t i = 0; i < 200000; ++i) out_of_place += (*whole)->events()[i].index != i;
    CHECK(out_of_place == 0);
    CHECK((*whole)->stats().missing == 0);
    CHECK((*whole)->problems().empty());
  }
}

}  // namespace
}  // namespace replay
