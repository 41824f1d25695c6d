#include "replay/trace_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <thread>

#include "replay/trace_reader.h"
#include "support/sample_events.h"
#include "support/temp_dir.h"
#include "trace/block.h"
#include "trace/call_record.h"
#include "trace/format.h"
#include "util/file_system.h"
#include "util/hash.h"
#include "util/mapped_file.h"

namespace replay {
namespace {

WriterOptions Options(const std::string& dir, int rank = 0) {
  WriterOptions o;
  o.dir = dir;
  o.header.rank = rank;
  o.header.world_size = 1;
  o.header.host = "testhost";
  o.header.api_names = {"MPI_Init", "MPI_Allreduce", "MPI_Send"};
  return o;
}

std::unique_ptr<RankReader> ReadRank(const std::string& dir, int rank = 0) {
  char name[32];
  std::snprintf(name, sizeof(name), "/rank-%05d", rank);
  auto r = RankReader::Open(dir + name);
  REQUIRE(r.ok());
  return std::move(r).value();
}

// The rank holds the allreduces of seq 1, 2, ..., `n` in order, and no more.
void RequireSeqsUpTo(const RankReader& r, size_t n) {
  REQUIRE(r.events().size() == n);
  for (size_t i = 0; i < n; ++i) REQUIRE(r.events()[i].op.seq == i + 1);
}

TEST_CASE("every event kind round-trips through writer and reader", "[trace]") {
  testing::TempDir dir;
  auto w = TraceWriter::Open(Options(dir.path()));
  REQUIRE(w.ok());
  std::vector<Event> in = testing::SampleEventsOfEveryKind();
  for (const Event& e : in) REQUIRE((*w)->Append(e));
  REQUIRE((*w)->Close(CloseReason::kFinalize).ok());

  auto r = ReadRank(dir.path());
  CHECK(r->status() == RankStatus::kComplete);
  CHECK(r->problems().empty());
  CHECK(r->header().close_reason == CloseReason::kFinalize);
  CHECK(r->header().event_count == in.size());
  CHECK(r->header().api_names.size() == 3);
  REQUIRE(r->events().size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Event& got = r->events()[i];
    Event want = in[i];
    want.index = i;
    want.time_ns = got.time_ns;  // assigned by the writer
    want.thread = got.thread;
    INFO("kind " << EventKindName(want.kind));
    CHECK(got == want);
    CHECK(got.time_ns >= 0);
  }
  CHECK_FALSE(testing::ReadFile(dir / "rank-00000/ring").size() > 0);  // removed on close
}

TEST_CASE("trace directories are private: 0700 directories, 0600 files", "[trace]") {
  testing::TempDir dir;
  std::string trace = dir / "t";
  auto w = TraceWriter::Open(Options(trace));
  REQUIRE(w.ok());
  (*w)->Append(Event::MakeMark("x", 1));
  std::string bytes = "payload";
  REQUIRE((*w)->StorePayload({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                             Hash64(bytes.data(), bytes.size()))
              .ok());
  struct stat st;
  REQUIRE(stat((trace + "/rank-00000/ring").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE((*w)->Close(CloseReason::kExit).ok());
  for (const char* d : {"", "/rank-00000"}) {
    REQUIRE(stat((trace + d).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
  }
  for (const char* f : {"/manifest", "/rank-00000/header", "/rank-00000/events", "/rank-00000/payloads"}) {
    INFO(f);
    REQUIRE(stat((trace + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
}

TEST_CASE("many threads appending concurrently lose no event", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.ring_slot_bytes = 64 << 10;  // small: every slot wraps many times
  o.flush_interval_ns = 1000000;
  o.full_wait_ns = 10'000'000'000;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  const int kThreads = 8, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Event e = testing::AllreduceOp(t, i + 1, 1, 0);
        REQUIRE((*w)->Append(e));
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE((*w)->Close(CloseReason::kExit).ok());
  CHECK((*w)->stats().dropped == 0);

  auto r = ReadRank(dir.path());
  REQUIRE(r->events().size() == static_cast<size_t>(kThreads * kPerThread));
  std::map<uint64_t, uint64_t> last_seq;  // per comm (= per thread)
  for (size_t i = 0; i < r->events().size(); ++i) {
    const Event& e = r->events()[i];
    REQUIRE(e.index == i);  // dense
    REQUIRE(e.op.seq == last_seq[e.op.comm] + 1);  // each thread's order kept
    last_seq[e.op.comm] = e.op.seq;
  }
  CHECK(r->stats().dropped == 0);
  CHECK(r->stats().missing == 0);
}

// Runs `record` in a child process, which then kills itself with SIGKILL
// while the writer `record` opened (and left in *writer) is still open;
// waits for it. `record` stops the child with an exit status where it fails.
void RecordThenKill(const std::function<void(std::unique_ptr<TraceWriter>* writer)>& record) {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::unique_ptr<TraceWriter> writer;
    record(&writer);
    if (writer == nullptr) _exit(8);
    kill(getpid(), SIGKILL);
    _exit(7);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("the child's exit status: " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("a process killed with SIGKILL loses none of the events it appended", "[trace]") {
  testing::TempDir dir;
  const int kEvents = 20000;
  RecordThenKill([&](std::unique_ptr<TraceWriter>* writer) {
    WriterOptions o = Options(dir.path());
    // The first half reaches the events stream; the writer then sleeps (long
    // flush interval, ring far from half full) and the second half stays in the ring.
    o.flush_interval_ns = 60'000'000'000;
    o.ring_slot_bytes = 16 << 20;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) _exit(3);
    for (int i = 0; i < kEvents; ++i) {
      if (!(*w)->Append(testing::AllreduceOp(1, i + 1, 1, i))) _exit(4);
      if (i == kEvents / 2 && !(*w)->Flush().ok()) _exit(5);
    }
    *writer = std::move(w).value();
  });

  auto r = ReadRank(dir.path());
  CHECK(r->status() == RankStatus::kSalvaged);
  REQUIRE(r->events().size() == static_cast<size_t>(kEvents));
  for (int i = 0; i < kEvents; ++i) {
    REQUIRE(r->events()[i].index == static_cast<uint64_t>(i));
    REQUIRE(r->events()[i].op.seq == static_cast<uint64_t>(i + 1));
  }
  CHECK(r->stats().salvaged > 0);
  CHECK(r->stats().blocks > 0);
}

std::string EventsPath(const std::string& dir) { return dir + "/rank-00000/" + format::kEventsFile; }

// Appends `n` allreduce ops whose seq continues from `*appended`.
void AppendOps(TraceWriter& w, int* appended, int n) {
  for (int i = 0; i < n; ++i, ++*appended) {
    REQUIRE(w.Append(testing::AllreduceOp(1, *appended + 1, 1, static_cast<uint64_t>(*appended))));
  }
}

// Waits (up to ~20 s) until the running rank's events stream holds `n` events
// in `blocks` intact blocks and nothing else. It scans a copy of the file
// itself: a RankReader would take the file's lock, and a writer that finds it
// taken seals its open block rather than rewrite it.
// With `at_least`, `blocks` or more (a flush may fall between two appends),
// and the number found is left in *found_blocks.
bool StreamHolds(const std::string& dir, uint64_t n, uint64_t blocks, bool at_least = false,
                 uint64_t* found_blocks = nullptr) {
  std::string path = EventsPath(dir);
  for (int tries = 0; tries < 4000; ++tries) {
    auto file = MappedFile::Open(path, /*copy=*/true);
    if (file.ok() && file->bytes().size() > sizeof(format::FileHeader)) {
      BlockScanner scanner(file->bytes(), sizeof(format::FileHeader));
      FoundBlock b;
      uint64_t found = 0, events = 0;
      while (scanner.Next(&b)) {
        ++found;
        events += b.header.aux;
      }
      if ((at_least ? found >= blocks : found == blocks) && events == n && scanner.problems().empty()) {
        if (found_blocks != nullptr) *found_blocks = found;
        return true;
      }
    }
    usleep(5000);
  }
  return false;
}

// A call's op as the interposer records it: in a record its return completes.
OpEvent CallOp(uint64_t comm, uint64_t seq) {
  Event e = testing::AllreduceOp(comm, seq, 1, 0);
  return e.op;
}

ReturnEvent CallReturn(uint64_t comm, uint64_t seq, int32_t rc = 0) {
  ReturnEvent r{};
  r.comm = comm;
  r.seq = seq;
  r.rc = rc;
  return r;
}

// The position of the op (or return, `ret`) of call `seq` on `comm`; -1 if absent,
// -2 if there twice.
long Find(const RankReader& r, uint64_t comm, uint64_t seq, bool ret) {
  long at = -1;
  for (size_t i = 0; i < r.events().size(); ++i) {
    const Event& e = r.events()[i];
    bool match = ret ? e.kind == EventKind::kReturn && e.ret.comm == comm && e.ret.seq == seq
                     : e.kind == EventKind::kOp && e.op.comm == comm && e.op.seq == seq;
    if (match) at = at == -1 ? static_cast<long>(i) : -2;
  }
  return at;
}

TEST_CASE("a call in flight is written as its op once, and its return when it returns", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.flush_interval_ns = 60'000'000'000;  // only the flushes below
  o.block_events = 64;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  TraceWriter& tw = **w;
  REQUIRE(tw.Append(testing::AllreduceOp(9, 1, 1, 0)));  // the thread's first record takes its slot
  REQUIRE(AppendCall(tw, CallOp(9, 2), 0x77, {}));
  int appended = 0;
  auto others = [&](int n) {
    std::thread t([&] { AppendOps(tw, &appended, n); });
    t.join();
  };
  others(500);
  REQUIRE(tw.Flush().ok());
  CHECK(tw.stats().events_written == 502);  // the op sealed alone, its record kept
  REQUIRE(tw.Flush().ok());
  CHECK(tw.stats().events_written == 502);  // and not written again
  others(100);
  REQUIRE(tw.Flush().ok());
  CHECK(tw.stats().events_written == 602);
  REQUIRE(CompleteCall(tw, CallReturn(9, 2)));
  REQUIRE(tw.Flush().ok());
  CHECK(tw.stats().events_written == 603);
  REQUIRE(tw.Close(CloseReason::kExit).ok());

  auto r = ReadRank(dir.path());
  CHECK(r->status() == RankStatus::kComplete);
  CHECK(r->problems().empty());
  REQUIRE(r->events().size() == 603);
  for (size_t i = 0; i < r->events().size(); ++i) REQUIRE(r->events()[i].index == i);
  CHECK(Find(*r, 9, 2, false) == 1);
  CHECK(Find(*r, 9, 2, true) == 602);
  const Event& op = r->events()[1];
  const Event& ret = r->events()[602];
  CHECK(op.call_site == 0x77);
  CHECK(ret.call_site == 0x77);
  CHECK(ret.thread == op.thread);
  CHECK(ret.time_ns >= op.time_ns);
  CHECK(r->stats().missing == 0);
}

TEST_CASE("a record of the thread between a call's op and its return keeps its place", "[trace]") {
  testing::TempDir dir;
  auto w = TraceWriter::Open(Options(dir.path()));
  REQUIRE(w.ok());
  TraceWriter& tw = **w;
  REQUIRE(tw.Append(testing::AllreduceOp(9, 1, 1, 0)));
  REQUIRE(AppendCall(tw, CallOp(9, 2), 0, {}));
  MarkEvent m{7};
  REQUIRE(tw.AppendBody(EventKind::kMark, m, 0, {}, "between"));
  // Its record was closed as the op alone: the return goes in one of its own.
  CHECK_FALSE(CompleteCall(tw, CallReturn(9, 2)));
  Event ret = Event::Make(CallReturn(9, 2));
  REQUIRE(tw.Append(ret));
  REQUIRE(tw.Close(CloseReason::kExit).ok());

  auto r = ReadRank(dir.path());
  REQUIRE(r->events().size() == 4);
  CHECK(r->events()[1].kind == EventKind::kOp);
  CHECK(r->events()[2].kind == EventKind::kMark);
  CHECK(r->events()[3].kind == EventKind::kReturn);
  CHECK(r->problems().empty());
}

TEST_CASE("a rank closed or killed while a call is in flight keeps the call's op", "[trace]") {
  SECTION("closed") {
    testing::TempDir dir;
    auto w = TraceWriter::Open(Options(dir.path()));
    REQUIRE(w.ok());
    TraceWriter& tw = **w;
    REQUIRE(tw.Append(testing::AllreduceOp(9, 1, 1, 0)));
    REQUIRE(AppendCall(tw, CallOp(9, 2), 0, {}));
    REQUIRE(tw.Close(CloseReason::kExit).ok());
    // The call returns after the trace closed: nothing more is written, nothing breaks.
    CHECK(CompleteCall(tw, CallReturn(9, 2)));
    auto r = ReadRank(dir.path());
    CHECK(r->status() == RankStatus::kComplete);
    REQUIRE(r->events().size() == 2);
    CHECK(Find(*r, 9, 2, false) == 1);
    CHECK(Find(*r, 9, 2, true) == -1);
  }
  SECTION("killed") {
    testing::TempDir dir;
    RecordThenKill([&](std::unique_ptr<TraceWriter>* writer) {
      WriterOptions o = Options(dir.path());
      o.flush_interval_ns = 60'000'000'000;
      auto w = TraceWriter::Open(o);
      if (!w.ok()) _exit(3);
      *writer = std::move(w).value();
      TraceWriter& tw = **writer;
      for (uint64_t seq = 1; seq <= 100; ++seq) {
        if (!AppendCall(tw, CallOp(9, seq), 0, {})) {
          if (!tw.Append(Event::Make(CallOp(9, seq)))) _exit(4);  // the thread's first record
          if (!tw.Append(Event::Make(CallReturn(9, seq)))) _exit(4);
        } else if (seq != 100 && !CompleteCall(tw, CallReturn(9, seq))) {
          _exit(5);
        }
        if (seq == 50 && !tw.Flush().ok()) _exit(6);
      }
    });
    auto r = ReadRank(dir.path());
    CHECK(r->status() == RankStatus::kSalvaged);
    REQUIRE(r->events().size() == 199);
    for (size_t i = 0; i < r->events().size(); ++i) REQUIRE(r->events()[i].index == i);
    CHECK(Find(*r, 9, 100, false) == 198);
    CHECK(Find(*r, 9, 100, true) == -1);
    CHECK(Find(*r, 9, 99, true) == 197);
  }
}

TEST_CASE("calls on many threads, their records sealed at any point, lose and repeat nothing", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.ring_slot_bytes = 64 << 10;  // small: every slot wraps many times
  o.flush_interval_ns = 500'000;  // open blocks rewritten and sealed while calls are in flight
  o.block_events = 100;
  o.full_wait_ns = 10'000'000'000;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  TraceWriter& tw = **w;
  const int kThreads = 4, kCalls = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t comm = static_cast<uint64_t>(t) + 1;
      for (uint64_t seq = 1; seq <= kCalls; ++seq) {
        bool open = AppendCall(tw, CallOp(comm, seq), 0, {});
        if (!open) REQUIRE(tw.Append(Event::Make(CallOp(comm, seq))));
        if (seq % 7 == 0) {
          MarkEvent m{static_cast<int64_t>(seq)};
          REQUIRE(tw.AppendBody(EventKind::kMark, m, 0, {}, {}));
        }
        if (seq % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(700));  // in flight across a flush
        if (seq % 13 == 0) AbandonCall(tw);  // closed as the op alone; the return follows on its own
        if (!open || !CompleteCall(tw, CallReturn(comm, seq))) REQUIRE(tw.Append(Event::Make(CallReturn(comm, seq))));
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(tw.Close(CloseReason::kExit).ok());
  CHECK(tw.stats().dropped == 0);

  auto r = ReadRank(dir.path());
  for (const TraceProblem& p : r->problems()) UNSCOPED_INFO(p.message);
  CHECK(r->problems().empty());
  const size_t marks = kCalls / 7;
  REQUIRE(r->events().size() == static_cast<size_t>(kThreads) * (2 * kCalls + marks));
  CHECK(tw.stats().events_written == r->events().size());  // none written twice
  std::map<uint64_t, uint64_t> open_seq, last_seq;  // per comm (= per thread)
  for (size_t i = 0; i < r->events().size(); ++i) {
    const Event& e = r->events()[i];
    REQUIRE(e.index == i);  // dense, each once
    if (e.kind == EventKind::kOp) {
      REQUIRE(open_seq[e.op.comm] == 0);
      REQUIRE(e.op.seq == last_seq[e.op.comm] + 1);  // each thread's order kept
      open_seq[e.op.comm] = e.op.seq;
    } else if (e.kind == EventKind::kReturn) {
      REQUIRE(e.ret.seq == open_seq[e.ret.comm]);  // right after its op among its thread's calls
      open_seq[e.ret.comm] = 0;
      last_seq[e.ret.comm] = e.ret.seq;
    }
  }
  for (int t = 1; t <= kThreads; ++t) CHECK(last_seq[static_cast<uint64_t>(t)] == kCalls);
  CHECK(r->stats().missing == 0);
}

TEST_CASE("a slow stream's flushes rewrite its last block in place until it is sealed", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.flush_interval_ns = 2'000'000;  // a time-bound flush every 2 ms
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  int appended = 0;
  auto append = [&](int n) { AppendOps(**w, &appended, n); };
  // Each batch reaches the events stream by the next flush, yet the stream
  // keeps one block: the open one, written again with every batch. One event
  // at a time, more events now and then compress to fewer bytes than before.
  for (int batch = 0; batch < 60; ++batch) {
    append(batch < 50 ? 1 : 40);
    REQUIRE(StreamHolds(dir.path(), appended, 1));
  }
  CHECK((*w)->stats().blocks_written == 0);  // none sealed yet
  CHECK((*w)->stats().events_written == 0);
  // With nothing new, flushes leave the file alone.
  std::string events = EventsPath(dir.path());
  struct stat before, after;
  REQUIRE(stat(events.c_str(), &before) == 0);
  usleep(30000);  // 15 flush intervals
  REQUIRE(stat(events.c_str(), &after) == 0);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);

  // Flush seals it; what comes after starts a new open block.
  REQUIRE((*w)->Flush().ok());
  CHECK((*w)->stats().blocks_written == 1);
  CHECK((*w)->stats().events_written == 450);
  append(30);
  REQUIRE(StreamHolds(dir.path(), appended, 2));
  REQUIRE((*w)->Close(CloseReason::kFinalize).ok());
  CHECK((*w)->stats().blocks_written == 2);
  CHECK((*w)->stats().events_written == 480);

  auto r = ReadRank(dir.path());
  CHECK(r->status() == RankStatus::kComplete);
  CHECK(r->problems().empty());
  CHECK(r->stats().blocks == 2);
  RequireSeqsUpTo(*r, 480);
}

TEST_CASE("while a reader holds the events file's lock, the writer appends instead of rewriting", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.flush_interval_ns = 2'000'000;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  int appended = 0;
  auto append = [&](int n) { AppendOps(**w, &appended, n); };
  append(10);
  REQUIRE(StreamHolds(dir.path(), 10, 1));
  // A reader copying the file: the open block is sealed as it is at each
  // flush and the new events go after it.
  std::string events = EventsPath(dir.path());
  int fd = open(events.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_SH) == 0);
  // A flush may fall between two of the ten appends and seal one block more.
  uint64_t blocks = 0;
  append(10);
  REQUIRE(StreamHolds(dir.path(), 20, 2, true, &blocks));
  append(10);
  REQUIRE(StreamHolds(dir.path(), 30, blocks + 1, true, &blocks));
  // The reader is done: the last block is rewritten in place again.
  close(fd);
  append(10);
  REQUIRE(StreamHolds(dir.path(), 40, blocks));
  REQUIRE((*w)->Close(CloseReason::kFinalize).ok());
  CHECK((*w)->stats().blocks_written == blocks);  // the open one sealed as it was
  auto r = ReadRank(dir.path());
  CHECK(r->problems().empty());
  RequireSeqsUpTo(*r, 40);
}

TEST_CASE("an open block is sealed when it is full or when its thread ends", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.flush_interval_ns = 2'000'000;
  o.block_events = 100;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  uint64_t seq = 0;
  // 250 events: two full blocks are sealed, the last 50 stay open.
  for (int i = 0; i < 250; ++i, ++seq) REQUIRE((*w)->Append(testing::AllreduceOp(1, seq + 1, 1, 0)));
  REQUIRE(StreamHolds(dir.path(), 250, 3));
  CHECK((*w)->stats().blocks_written == 2);
  CHECK((*w)->stats().events_written == 200);

  // A thread that appends and ends: its slot cannot be reused until the
  // writer has sealed what it holds.
  std::thread([&] {
    for (int i = 0; i < 10; ++i) REQUIRE((*w)->Append(testing::AllreduceOp(2, i + 1, 1, 0)));
  }).join();
  REQUIRE(StreamHolds(dir.path(), 260, 3));
  CHECK((*w)->stats().events_written == 260);
  CHECK((*w)->stats().blocks_written == 3);

  REQUIRE((*w)->Close(CloseReason::kFinalize).ok());
  CHECK((*w)->stats().dropped == 0);
  auto r = ReadRank(dir.path());
  CHECK(r->problems().empty());
  REQUIRE(r->events().size() == 260);
  for (size_t i = 0; i < r->events().size(); ++i) REQUIRE(r->events()[i].index == i);
}

TEST_CASE("a slot past half full is sealed at once, without waiting for the flush interval", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.flush_interval_ns = 600'000'000'000;  // no time-bound flush during the test
  o.ring_slot_bytes = 64 << 10;           // a few hundred records
  o.full_wait_ns = 600'000'000'000;       // a stalled writer would hang the test, not drop
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  const int kEvents = 5000;
  for (int i = 0; i < kEvents; ++i) REQUIRE((*w)->Append(testing::AllreduceOp(1, i + 1, 1, i)));
  WriterStats before_close = (*w)->stats();
  CHECK(before_close.events_written >= kEvents / 2);
  CHECK(before_close.blocks_written >= 2);
  REQUIRE((*w)->Close(CloseReason::kFinalize).ok());
  CHECK((*w)->stats().dropped == 0);
  auto r = ReadRank(dir.path());
  REQUIRE(r->events().size() == static_cast<size_t>(kEvents));
  CHECK(r->stats().missing == 0);
}

TEST_CASE("a rank killed with its last block open reads every event once, torn block or not", "[trace]") {
  testing::TempDir dir;
  const int kEvents = 300;
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    WriterOptions o = Options(dir.path());
    o.flush_interval_ns = 2'000'000;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) _exit(3);
    for (int i = 0; i < kEvents; ++i) {
      if (!(*w)->Append(testing::AllreduceOp(1, i + 1, 1, i))) _exit(4);
    }
    // Killed once the open block holds everything: the ring still does too.
    if (!StreamHolds(dir.path(), kEvents, 1)) _exit(5);
    kill(getpid(), SIGKILL);
    _exit(6);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  auto check_all_once = [&](const RankReader& r) {
    CHECK(r.status() == RankStatus::kSalvaged);
    REQUIRE(r.events().size() == static_cast<size_t>(kEvents));
    for (int i = 0; i < kEvents; ++i) {
      REQUIRE(r.events()[i].index == static_cast<uint64_t>(i));
      REQUIRE(r.events()[i].op.seq == static_cast<uint64_t>(i + 1));
    }
    CHECK(r.stats().missing == 0);
  };
  {
    auto r = ReadRank(dir.path());
    check_all_once(*r);
    CHECK(r->stats().blocks == 1);
    CHECK(r->stats().salvaged == 0);  // the ring's copies are duplicates
  }
  // As if the kill had come in the middle of rewriting the block: the ring
  // gives back what the damaged block held.
  std::string events = EventsPath(dir.path());
  struct stat sb;
  REQUIRE(stat(events.c_str(), &sb) == 0);
  REQUIRE(truncate(events.c_str(), sb.st_size - 7) == 0);
  {
    auto r = ReadRank(dir.path());
    check_all_once(*r);
    CHECK(r->stats().blocks == 0);
    CHECK(r->stats().salvaged == static_cast<uint64_t>(kEvents));
    REQUIRE(r->problems().size() == 1);
    CHECK(r->problems()[0].message.find("torn tail") != std::string::npos);
  }
}

TEST_CASE("a full disk turns recording off with one warning", "[trace]") {
  testing::TempDir dir;
  FaultFileSystem fs(FileSystem::Default());
  WriterOptions o = Options(dir.path());
  o.fs = &fs;
  o.background_thread = false;
  o.block_events = 100;
  int warnings = 0;
  std::string message;
  o.on_failure = [&](const Status& s) {
    ++warnings;
    message = s.message();
  };
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  fs.FailWritesAfter(2000);
  int appended = 0;
  for (int i = 0; i < 5000; ++i) {
    if ((*w)->Append(testing::AllreduceOp(1, i + 1, 1, i))) ++appended;
    if (i % 500 == 499) (*w)->Flush();
  }
  CHECK_FALSE((*w)->recording());
  CHECK(warnings == 1);
  CHECK(message.find("No space left on device") != std::string::npos);
  // The interposers count the calls they pass on unrecorded from now on.
  for (int i = 0; i < 7; ++i) (*w)->NoteUnrecorded();
  CHECK_FALSE((*w)->Close(CloseReason::kExit).ok());
  (*w)->NoteUnrecorded();  // after Close: not the trace's business
  CHECK(warnings == 1);
  CHECK(appended < 5000);  // appends stopped being accepted, without error or crash

  // What reached the disk is readable, and the header, written into the room
  // kept for it when the disk still had some, says why it stops there.
  w->reset();
  auto r = ReadRank(dir.path());
  CHECK(r->status() == RankStatus::kFailed);
  CHECK(r->events().size() >= 500);
  CHECK(r->header().close_reason == CloseReason::kFailed);
  CHECK(r->header().recording_error.find("No space left on device") != std::string::npos);
  CHECK(r->stats().unrecorded == 7);
  CHECK_FALSE(FileExists(FileSystem::SparePath(dir / "rank-00000/header")));
}

TEST_CASE("an unwritable trace directory fails to open with the reason", "[trace]") {
  testing::TempDir dir;
  FaultFileSystem fs(FileSystem::Default());
  fs.FailDirCreation(true);
  WriterOptions o = Options(dir / "trace");
  o.fs = &fs;
  auto w = TraceWriter::Open(o);
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("Permission denied") != std::string::npos);
  CHECK(w.status().message().find(dir / "trace") != std::string::npos);
}

TEST_CASE("a writer refuses blocks larger than the format lets readers accept", "[trace]") {
  testing::TempDir dir;
  for (uint32_t events : {0u, format::kMaxBlockEvents + 1}) {
    WriterOptions o = Options(dir / "trace");
    o.block_events = events;
    auto w = TraceWriter::Open(o);
    REQUIRE_FALSE(w.ok());
    CHECK(w.status().code() == Status::Code::kInvalidArgument);
  }
  WriterOptions o = Options(dir / "trace");
  o.block_events = format::kMaxBlockEvents;
  CHECK(TraceWriter::Open(o).ok());
}

TEST_CASE("payloads are stored once per content and read back whole", "[trace]") {
  testing::TempDir dir;
  auto w = TraceWriter::Open(Options(dir.path()));
  REQUIRE(w.ok());
  std::string small = "hello gradients";
  std::string big(format::kPayloadPartBytes * 2 + 12345, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  auto bytes = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  uint64_t hs = Hash64(small.data(), small.size());
  uint64_t hb = Hash64(big.data(), big.size());
  for (int i = 0; i < 3; ++i) {
    REQUIRE((*w)->StorePayload(bytes(small), hs).ok());
    REQUIRE((*w)->StorePayload(bytes(big), hb).ok());
  }
  CHECK((*w)->stats().payload_bytes == small.size() + big.size());
  REQUIRE((*w)->Close(CloseReason::kExit).ok());
  auto r = ReadRank(dir.path());
  auto a = r->Payload(hs);
  REQUIRE(a.ok());
  CHECK(*a == small);
  auto b = r->Payload(hb);
  REQUIRE(b.ok());
  CHECK(*b == big);
  CHECK(r->Payload(12345).status().code() == Status::Code::kNotFound);
}

}  // namespace
}  // namespace replay

namespace replay {
namespace {

TEST_CASE("a payload window keeps only what was received since the k-th last mark", "[trace]") {
  testing::TempDir dir;
  WriterOptions o = Options(dir.path());
  o.payload_window_marks = 2;
  auto w = TraceWriter::Open(o);
  REQUIRE(w.ok());
  auto store = [&](const std::string& s) {
    auto ref = (*w)->StorePayload({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, Hash64(s.data(), s.size()));
    REQUIRE(ref.ok());
    return ref->hash;
  };
  uint64_t before = store("before any mark");
  uint64_t again = store("stored in every stretch");
  (*w)->NoteMark();
  uint64_t first = store("after mark 1");
  store("stored in every stretch");
  (*w)->NoteMark();
  uint64_t second = store("after mark 2");
  store("stored in every stretch");
  REQUIRE((*w)->Close(CloseReason::kExit).ok());
  auto r = ReadRank(dir.path());
  CHECK(r->Payload(before).status().code() == Status::Code::kNotFound);
  CHECK(r->Payload(before).status().message().find("data window") != std::string::npos);
  CHECK(*r->Payload(first) == "after mark 1");
  CHECK(*r->Payload(second) == "after mark 2");
  CHECK(*r->Payload(again) == "stored in every stretch");  // stored again after each mark
  CHECK_FALSE(testing::ReadFile(dir / "rank-00000/payloads").size() > 0);
}

}  // namespace
}  // namespace replay
