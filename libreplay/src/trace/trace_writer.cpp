#include "util/log.h"
#include "replay/trace_writer.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"
#include "trace/ring.h"
#include "trace/thread_slot.h"
#include "util/clock.h"
#include "util/file_system.h"

namespace replay {

constinit thread_local ThreadSlot t_thread_slot __attribute__((tls_model("initial-exec")));

namespace {

// Writers alive in this process, by generation, so that a thread-exit hook
// never touches the ring of a writer that is gone.
std::mutex g_live_mu;
std::set<uint64_t>& LiveWriters() {
  static auto* s = new std::set<uint64_t>();
  return *s;
}
std::atomic<uint64_t> g_next_generation{1};

// Gives the thread's slot back when the thread ends, if its writer lives.
struct SlotReturn {
  bool armed = false;
  ~SlotReturn() {
    ThreadSlot& t = t_thread_slot;
    if (!armed || t.slot == nullptr) return;
    std::lock_guard<std::mutex> lock(g_live_mu);
    if (LiveWriters().count(t.generation) != 0) {
      if (t.open != nullptr) Ring::Abandon(t.open);
      Ring::Release(t.slot);
    }
    t.open = nullptr;
    t.slot = nullptr;
  }
};
thread_local SlotReturn t_slot_return __attribute__((tls_model("initial-exec")));

std::string RankDirName(int32_t rank, int32_t pid) {
  char buf[48];
  if (rank >= 0) {
    std::snprintf(buf, sizeof(buf), "%s%05d", format::kRankDirPrefix, rank);
  } else {
    std::snprintf(buf, sizeof(buf), "pid-%d", pid);
  }
  return buf;
}

int64_t Tid() { return static_cast<int64_t>(syscall(SYS_gettid)); }

// One event to write: a ring record's, or one of the two of a call's record
// (its op, its return). Small, as there is one per event.
struct PendingRecord {
  uint64_t index;
  uint64_t ticks;
  const RecordHeader* header;
  // How far the slot's space may go once this event and the slot's earlier
  // ones are written: past the record, or, for the op of a call's record
  // (`keeps`), only to its start, since the return is still to come or to be
  // written.
  uint64_t done;
  uint32_t slot;
  EventKind kind;
  bool is_return;  // the return a call's record holds
  bool keeps;
};

}  // namespace

// What some blocks of the events stream hold, for WriterStats.
struct TraceWriter::BlockTally {
  uint64_t events = 0;
  uint64_t blocks = 0;
  uint64_t raw = 0;
  uint64_t stored = 0;
  uint64_t drops = 0;  // counts carried by Drop events
};

struct TraceWriter::State {
  FileSystem* fs = nullptr;
  std::unique_ptr<WritableFile> events;
  std::unique_ptr<WritableFile> payloads;
  std::thread background;
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> next_thread{0};

  std::mutex drain_mu;  // one drain at a time; guards everything below
  BlockCodec codec;
  EventBlockEncoder encoder;
  std::vector<PendingRecord> pending;
  std::vector<uint64_t> slot_end;
  std::vector<uint64_t> seal_end;
  std::string out;
  // The events stream is sealed blocks up to `sealed_at`, then the open block
  // (`open.stored` bytes, 0 if there is none). See DrainOnce.
  uint64_t sealed_at = 0;
  BlockTally open;
  std::vector<uint64_t> open_end;  // per slot: the position past its records in the open block
  // Per slot: 1 + the position of a call's record whose op is in a sealed
  // block while its space is kept for the return (0: none). Its op is not
  // written again.
  std::vector<uint64_t> op_sealed;
  std::vector<uint64_t> open_op;   // the same for the open block, once it is sealed
  std::vector<uint64_t> seal_ops;  // the same for the blocks being sealed

  std::mutex payload_mu;
  std::unordered_set<uint64_t> payload_seen;  // in the current payload file
  uint32_t payload_segment = 0;               // payloads, payloads.1, payloads.2, ...
  std::vector<std::string> payload_closed;    // earlier segment files still kept
  BlockCodec payload_codec{1};
  std::string payload_out;

  mutable std::mutex failure_mu;
  Status failure;
  std::once_flag failure_reported;

  std::mutex header_mu;  // guards options_.header updates after Start

  std::atomic<uint64_t> events_written{0};
  std::atomic<uint64_t> blocks_written{0};
  std::atomic<uint64_t> raw_bytes{0};
  std::atomic<uint64_t> stored_bytes{0};
  std::atomic<uint64_t> payload_bytes{0};
  std::atomic<uint64_t> payload_stored{0};
  std::atomic<uint64_t> drops_reported{0};
  std::atomic<bool> signal_closed{false};
};

TraceWriter::TraceWriter(WriterOptions options)
    : options_(std::move(options)), state_(std::make_unique<State>()) {}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Open(WriterOptions options) {
  std::unique_ptr<TraceWriter> w(new TraceWriter(std::move(options)));
  REPLAY_RETURN_IF_ERROR(w->Start());
  return w;
}

Status TraceWriter::Start() {
  State& st = *state_;
  st.fs = options_.fs != nullptr ? options_.fs : FileSystem::Default();
  st.codec.set_level(options_.zstd_level);
  RankHeader& h = options_.header;
  if (h.trace_uuid == Uuid{}) h.trace_uuid = NewUuid();
  h.format_epoch = format::kFormatEpoch;
  h.min_reader_epoch = format::kMinReaderEpoch;
  if (h.pid == 0) h.pid = getpid();
  if (h.start_monotonic_ns == 0) h.start_monotonic_ns = MonotonicNs();
  if (h.start_realtime_ns == 0) h.start_realtime_ns = RealtimeNs();
  h.complete = false;
  h.close_reason = CloseReason::kNone;
  if (options_.dir.empty()) return Status::InvalidArgument("no trace directory given");
  if (options_.block_events == 0 || options_.block_events > format::kMaxBlockEvents) {
    return Status::InvalidArgument("events per block must be 1 to " + std::to_string(format::kMaxBlockEvents) +
                                   ", not " + std::to_string(options_.block_events));
  }

  REPLAY_RETURN_IF_ERROR(st.fs->CreateDirs(options_.dir, 0700).WithContext("trace directory"));
  std::string base = options_.dir + "/" + RankDirName(h.rank, h.pid);
  rank_dir_ = base;
  Status made = st.fs->CreateDirExclusive(rank_dir_, 0700);
  if (struct stat existing; !made.ok() && stat(base.c_str(), &existing) != 0) {
    return made.WithContext("rank directory");  // not taken: unwritable, or no room
  }
  if (!made.ok()) {
    // Another process of this job already uses the name (a launcher wrapper
    // with the same rank variables): keep both, apart.
    rank_dir_ = base + ".p" + std::to_string(h.pid);
    REPLAY_RETURN_IF_ERROR(st.fs->CreateDirExclusive(rank_dir_, 0700).WithContext(
        "rank directory (" + base + " is taken by another recording; use a new trace directory)"));
  }

  std::string manifest_path = options_.dir + "/" + format::kManifestFile;
  if (access(manifest_path.c_str(), F_OK) != 0) {
    JobManifest m = options_.manifest;
    m.trace_uuid = h.trace_uuid;
    m.format_epoch = format::kFormatEpoch;
    m.min_reader_epoch = format::kMinReaderEpoch;
    if (m.created_realtime_ns == 0) m.created_realtime_ns = h.start_realtime_ns;
    if (m.command.empty()) m.command = h.command_line;
    if (m.host.empty()) m.host = h.host;
    m.level = h.level;
    REPLAY_RETURN_IF_ERROR(st.fs->WriteAtomic(manifest_path, EncodeJobManifest(m)));
  }
  size_t header_size = 0;
  REPLAY_RETURN_IF_ERROR(WriteHeader(false, &header_size));
  // Room for the closing header, kept now: a disk that fills while the job
  // runs must not leave the rank without its end and the reason it stopped.
  // Without it the rank records all the same.
  (void)st.fs->ReserveFor(rank_dir_ + "/" + format::kHeaderFile, std::max<uint64_t>(64 * 1024, 4 * header_size));

  REPLAY_ASSIGN_OR_RETURN(st.events, st.fs->OpenAppend(rank_dir_ + "/" + format::kEventsFile, true));
  std::string fh;
  EncodeFileHeader(format::StreamKind::kEvents, h.trace_uuid.data(), &fh);
  REPLAY_RETURN_IF_ERROR(st.events->Append(fh));
  st.sealed_at = fh.size();

  RingOptions ro;
  ro.capacity = options_.ring_slot_bytes;
  ro.max_slots = options_.ring_max_slots;
  ro.start_mono_ns = h.start_monotonic_ns;
  ro.full_wait_ns = options_.full_wait_ns;
  REPLAY_ASSIGN_OR_RETURN(ring_,
                          Ring::Create(rank_dir_ + "/" + format::kRingFile, ro, h.trace_uuid.data()));

  signal_slot_ = ring_->Claim(UINT32_MAX, 0);
  generation_ = g_next_generation.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(g_live_mu);
    LiveWriters().insert(generation_);
  }
  recording_.store(true, std::memory_order_release);
  if (options_.background_thread) {
    st.background = std::thread([this] {
      // Signals belong to the application's threads, never to ours.
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      pthread_setname_np(pthread_self(), "replay-writer");
      BackgroundLoop();
    });
  }
  return Status::Ok();
}

TraceWriter::~TraceWriter() {
  if (!closed() && ring_ != nullptr) Close(CloseReason::kExit);
  if (state_->background.joinable()) {
    state_->stop.store(true);
    ring_->Wake();
    state_->background.join();
  }
  std::lock_guard<std::mutex> lock(g_live_mu);
  LiveWriters().erase(generation_);
}

SlotHeader* TraceWriter::ClaimThreadSlot() {
  SlotHeader* s = ring_->Claim(state_->next_thread.fetch_add(1), Tid());
  if (s == nullptr) {
    if (int err = ring_->grow_error(); err != 0) {
      Fail(Status::FromErrno("cannot grow the recording ring in " + rank_dir_, err));
    }
    return nullptr;
  }
  t_thread_slot.generation = generation_;
  t_thread_slot.slot = s;
  t_slot_return.armed = true;
  return s;
}

void TraceWriter::NoteUnrecorded() {
  if (!closed() && ring_ != nullptr && ring_->header()->failed.load(std::memory_order_relaxed) != 0) {
    ring_->header()->unrecorded.fetch_add(1, std::memory_order_relaxed);
  }
}

void TraceWriter::ReleaseThreadSlot() {
  if (SlotHeader* s = CachedSlot(generation_)) {
    CloseOpenCall();
    Ring::Release(s);
    t_thread_slot.slot = nullptr;
  }
}

void TraceWriter::CloseOpenCall() {
  replay::ThreadSlot& t = t_thread_slot;
  if (t.open != nullptr && t.generation == generation_ && ring_ != nullptr && ring_->header() != nullptr) {
    Ring::Abandon(t.open);
  }
  t.open = nullptr;
}

// Inline where it is called: every append asks.
inline SlotHeader* TraceWriter::ThreadSlot() {
  if (SlotHeader* s = CachedSlot(generation_); __builtin_expect(s != nullptr, 1)) return s;
  return ClaimThreadSlot();
}

bool TraceWriter::AppendRaw(EventKind kind, const void* body, size_t body_size,
                            std::span<const int64_t> list, std::string_view text,
                            uint64_t call_site) {
  if (!recording_.load(std::memory_order_relaxed)) return false;
  SlotHeader* slot = ThreadSlot();
  if (slot == nullptr) {
    ring_->header()->lost_no_slot.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (t_thread_slot.open != nullptr) CloseOpenCall();
  if (__builtin_expect(ring_->AppendRecord(slot, kind, body, body_size, list.data(),
                                                  static_cast<uint32_t>(list.size()), text.data(),
                                                  static_cast<uint32_t>(text.size()), call_site),
                       1)) {
    return true;
  }
  return AppendRefused();
}

bool TraceWriter::AppendRefused() {
  if (int err = ring_->grow_error(); err != 0) {
    Fail(Status::FromErrno("no room on disk for the recording ring in " + rank_dir_, err));
  }
  return false;
}

bool TraceWriter::Append(const Event& e) {
  return AppendRaw(e.kind, &e.op, EventBodySize(e.kind), e.list, e.text, e.call_site);
}

Result<PayloadRef> TraceWriter::StorePayload(std::span<const uint8_t> bytes, uint64_t hash) {
  State& st = *state_;
  PayloadRef ref{hash, bytes.size()};
  if (!recording()) return failure().ok() ? Status::Unavailable("trace is closed") : failure();
  std::lock_guard<std::mutex> lock(st.payload_mu);
  if (!st.payload_seen.insert(hash).second) return ref;
  st.payload_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
  if (st.payloads == nullptr) {
    auto f = st.fs->OpenAppend(PayloadPath(st.payload_segment), true);
    if (!f.ok()) {
      Fail(f.status());
      return f.status();
    }
    st.payloads = std::move(f).value();
    std::string fh;
    EncodeFileHeader(format::StreamKind::kPayloads, options_.header.trace_uuid.data(), &fh);
    if (Status s = st.payloads->Append(fh); !s.ok()) {
      Fail(s);
      return s;
    }
  }
  // Written by the calling thread, so the bytes are in the page cache before
  // the event that refers to them can be appended: nothing dangles after a kill.
  size_t offset = 0;
  do {
    size_t n = std::min<size_t>(bytes.size() - offset, format::kPayloadPartBytes);
    st.payload_out.clear();
    Status s = st.payload_codec.Encode(format::BlockKind::kPayload, hash, offset,
                                       bytes.subspan(offset, n), &st.payload_out);
    if (s.ok()) s = st.payloads->Append(st.payload_out);
    if (!s.ok()) {
      st.payload_seen.erase(hash);
      Fail(s);
      return s;
    }
    st.payload_stored.fetch_add(st.payload_out.size(), std::memory_order_relaxed);
    offset += n;
  } while (offset < bytes.size());
  return ref;
}

std::string TraceWriter::PayloadPath(uint32_t segment) const {
  std::string p = rank_dir_ + "/" + format::kPayloadsFile;
  if (segment > 0) p += "." + std::to_string(segment);
  return p;
}

void TraceWriter::NoteMark() {
  State& st = *state_;
  if (options_.payload_window_marks == 0) return;
  std::lock_guard<std::mutex> lock(st.payload_mu);
  if (st.payloads != nullptr) {
    st.payloads->Close();
    st.payloads.reset();
    st.payload_closed.push_back(PayloadPath(st.payload_segment));
  }
  // A payload stored before must be stored again: its file may go.
  st.payload_seen.clear();
  ++st.payload_segment;
  while (st.payload_closed.size() + 1 > options_.payload_window_marks) {
    st.fs->Remove(st.payload_closed.front());
    st.payload_closed.erase(st.payload_closed.begin());
  }
}

void TraceWriter::Fail(const Status& status) {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.failure_mu);
    if (st.failure.ok()) st.failure = status;
  }
  recording_.store(false, std::memory_order_release);
  if (ring_ != nullptr) {
    ring_->NoteFailure(status.ToString());
    ring_->header()->failed.store(1, std::memory_order_release);
  }
  std::call_once(st.failure_reported, [&] {
    if (options_.on_failure) {
      options_.on_failure(status);
    } else {
      log::Warn("replay: recording stopped: " + status.ToString() + "; the program continues unrecorded");
    }
  });
}

Status TraceWriter::failure() const {
  std::lock_guard<std::mutex> lock(state_->failure_mu);
  return state_->failure;
}

void TraceWriter::BackgroundLoop() {
  State& st = *state_;
  int rounds = 0;
  while (!st.stop.load(std::memory_order_acquire)) {
    // Woken by an appender: its slot is past half full, so seal what is there.
    // Woken by the clock: write what is there, leaving the last block open.
    bool asked = ring_->WaitForWork(options_.flush_interval_ns);
    if (int close_reason = signal_close_.load(std::memory_order_acquire); close_reason != 0) {
      Close(static_cast<CloseReason>(close_reason - 1));
      st.signal_closed.store(true, std::memory_order_release);
      return;
    }
    if (!recording()) continue;
    if (Status s = DrainOnce(/*seal=*/asked); !s.ok()) Fail(s);
    if (++rounds % 16 == 0) ring_->RefineClock();
  }
}

// Writes what the ring holds to the events stream, in blocks of at most
// block_events. A time-bound flush (seal false) would otherwise cut a block at
// every interval, and a slow job's blocks would be small, which costs
// compression (each block is compressed on its own). So the last, partial
// block stays open: it is written where it belongs, and the next flush writes
// it again in place with the events appended since, until it is sealed: when
// it holds block_events, when a slot is past half full or its thread has
// ended, and at Flush() and Close(). Only sealing releases ring space, so an
// open block's events are also still in the ring: a rank killed while the
// block is rewritten loses nothing, and the reader drops the duplicates by
// index. The stream never gets shorter (a reader may have it mapped): more
// events can compress to fewer bytes, so the block that replaces an open one
// is padded to at least its length.
Status TraceWriter::DrainOnce(bool seal) {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.drain_mu);
  Ring& ring = *ring_;
  for (;;) {
    uint32_t slots = ring.slots_used();
    st.pending.clear();
    st.slot_end.assign(slots, 0);
    size_t budget = options_.block_events * 8;
    bool seal_all = seal;
    for (uint32_t i = 0; i < slots; ++i) {
      SlotHeader* s = ring.slot(i);
      uint32_t state = s->state.load(std::memory_order_acquire);
      if (state == kSlotFree) {
        st.slot_end[i] = UINT64_MAX;
        continue;
      }
      uint64_t tail = s->tail.load(std::memory_order_relaxed);
      if (st.op_sealed.size() < slots) st.op_sealed.resize(slots, 0);
      const uint64_t sealed_op = st.op_sealed[i];
      st.slot_end[i] = ring.Drain(s, budget, [&](const RingRecord& r) __attribute__((always_inline)) {
        const RecordHeader& h = *r.header;
        const uint64_t start = r.end - h.size;
        // Not a call's record whose op is already sealed (a call in flight
        // then; it may since have returned, or been closed as the op alone).
        const bool call = r.open || r.ret != nullptr;
        if (__builtin_expect(sealed_op != start + 1, 1)) {
          st.pending.push_back(
              PendingRecord{h.index, h.ticks, &h, call ? start : r.end, i, static_cast<EventKind>(h.kind), false, call});
        }
        if (r.ret != nullptr) {
          st.pending.push_back(PendingRecord{r.ret->index, r.ret->ticks, &h, r.end, i, EventKind::kReturn, true, false});
        }
      });
      // A finished thread's slot is reused only once drained, and a slot past
      // half full would soon make its owner wait.
      uint64_t backlog = st.slot_end[i] - tail;
      if (backlog != 0 && (state == kSlotReleased || backlog > ring.capacity() / 2)) seal_all = true;
    }
    if (st.pending.empty()) break;
    // One pass takes everything published before it began unless a slot hit its
    // budget; only then go round again. Chasing the heads instead would read the
    // lines appenders are writing at this moment and make them wait.
    const bool more = st.pending.size() >= budget;
    if (more) seal_all = true;
    const size_t total = st.pending.size();
    // Nothing appended since the open block was written: leave it as it is.
    if (!seal_all && total == st.open.events) break;
    auto by_index = [](const PendingRecord& a, const PendingRecord& b) { return a.index < b.index; };
    if (!std::is_sorted(st.pending.begin(), st.pending.end(), by_index)) {
      std::sort(st.pending.begin(), st.pending.end(), by_index);
    }
    const size_t sealed = seal_all ? total : total - total % options_.block_events;
    const TickClock clock = ring.Clock();
    const int64_t start_ns = ring.start_mono_ns();
    auto event_ns = [&](uint64_t ticks) { return clock.ToMonotonicNs(ticks) - start_ns; };
    st.out.clear();
    BlockTally sealed_tally, open_tally;
    for (size_t at = 0; at < total; at += options_.block_events) {
      size_t n = std::min<size_t>(options_.block_events, total - at);
      const PendingRecord& first = st.pending[at];
      int64_t base_time = event_ns(first.ticks);
      EventKindCounts kinds;
      for (size_t i = at; i < at + n; ++i) kinds.Add(st.pending[i].kind);
      st.encoder.Begin(kinds, first.index, base_time);
      uint64_t drops = 0;
      for (size_t i = at; i < at + n; ++i) {
        const PendingRecord& p = st.pending[i];
        const RecordHeader& h = *p.header;
        const auto* body = reinterpret_cast<const uint8_t*>(&h + 1);
        EventView v{p.index, event_ns(p.ticks), h.thread, h.call_site, p.kind, body, {}, {}};
        if (p.is_return) {
          v.body = &reinterpret_cast<const ReturnTail*>(reinterpret_cast<const uint8_t*>(&h) + h.size -
                                                        sizeof(ReturnTail))->ret;
        } else if (h.list_count != 0 || h.text_size != 0) {
          const auto* list = reinterpret_cast<const int64_t*>(body + EventBodySize(p.kind));
          v.list = std::span<const int64_t>(list, h.list_count);
          v.text = std::string_view(reinterpret_cast<const char*>(list + h.list_count), h.text_size);
        }
        if (v.kind == EventKind::kDrop) drops += static_cast<const DropEvent*>(v.body)->count;
        st.encoder.Add(v);
      }
      std::span<const uint8_t> raw = st.encoder.Finish();
      // The last block must not end before the open block it replaces did.
      size_t min_bytes = at + n == total && st.open.stored > st.out.size() ? st.open.stored - st.out.size() : 0;
      size_t before = st.out.size();
      REPLAY_RETURN_IF_ERROR(
          st.codec.Encode(format::BlockKind::kEvents, first.index, n, raw, &st.out, min_bytes,
                          st.encoder.random_from()));
      BlockTally& t = at < sealed ? sealed_tally : open_tally;
      t.events += n;
      t.blocks += 1;
      t.raw += raw.size();
      t.stored += st.out.size() - before;
      t.drops += drops;
    }
    // Rewriting the open block in place needs the file's lock, which a reader
    // of this running rank holds shared while it copies the file (a copy taken
    // during a rewrite could hold a torn block followed by intact ones). With a
    // reader there, or blocks that came out shorter than the open block and
    // could not be padded, seal that block as it is and go round again for
    // what came after it: appending needs no lock.
    const bool rewrite = st.open.stored != 0;
    if (rewrite && (st.out.size() < st.open.stored || !st.events->TryLock())) {
      SealOpenBlock();
      continue;
    }
    Status written = st.events->WriteAt(st.sealed_at, st.out);
    if (rewrite) st.events->Unlock();
    REPLAY_RETURN_IF_ERROR(written);
    // The sealed blocks are durable in the events stream (page cache): their
    // ring space can go. Each slot's sealed records come first in it (a
    // call's return comes right after its op among its thread's events: any
    // other record of the thread in between closes the call's record first).
    // The op of a call whose return is not in them is sealed alone: the
    // space stays, and the op is not written again.
    if (sealed != total) {
      st.seal_end.assign(slots, UINT64_MAX);
      for (size_t i = 0; i < sealed; ++i) st.seal_end[st.pending[i].slot] = st.pending[i].done;
    }
    auto ops_alone = [&](size_t from, size_t to, std::vector<uint64_t>* marks) {
      marks->assign(slots, 0);
      for (size_t i = from; i < to; ++i) {
        const PendingRecord& p = st.pending[i];
        if (p.keeps) (*marks)[p.slot] = p.done + 1;
      }
    };
    ops_alone(0, sealed, &st.seal_ops);
    ops_alone(sealed, total, &st.open_op);
    Seal(sealed == total ? st.slot_end : st.seal_end, sealed_tally, st.seal_ops);
    st.open = open_tally;
    st.open_end = st.slot_end;
    if (!more) break;
  }
  ring.ReapReleased();
  return Status::Ok();
}

void TraceWriter::SealOpenBlock() {
  State& st = *state_;
  if (st.open.stored == 0) return;
  Seal(st.open_end, st.open, st.open_op);
  st.open = BlockTally{};
}

// Blocks written at `sealed_at` and holding `tally` are sealed: the stream
// goes on after them, and their ring space, up to `ends` per slot (UINT64_MAX:
// none), can go. `ops` marks per slot (1 + position, 0: none) a call's record
// whose op they hold without its return.
void TraceWriter::Seal(const std::vector<uint64_t>& ends, const BlockTally& tally,
                       const std::vector<uint64_t>& ops) {
  State& st = *state_;
  Ring& ring = *ring_;
  if (st.op_sealed.size() < ends.size()) st.op_sealed.resize(ends.size(), 0);
  for (uint32_t i = 0; i < ends.size() && i < ring.slots_used(); ++i) {
    if (i < ops.size() && ops[i] != 0) st.op_sealed[i] = ops[i];
    if (ends[i] != UINT64_MAX) {
      Ring::Consume(ring.slot(i), ends[i]);
      // Once the record's space is gone, so is the mark (a reused slot counts again).
      if (st.op_sealed[i] != 0 && ends[i] >= st.op_sealed[i]) st.op_sealed[i] = 0;
    }
  }
  st.sealed_at += tally.stored;
  st.events_written.fetch_add(tally.events, std::memory_order_relaxed);
  st.blocks_written.fetch_add(tally.blocks, std::memory_order_relaxed);
  st.raw_bytes.fetch_add(tally.raw, std::memory_order_relaxed);
  st.stored_bytes.fetch_add(tally.stored, std::memory_order_relaxed);
  st.drops_reported.fetch_add(tally.drops, std::memory_order_relaxed);
}

Status TraceWriter::Flush() {
  if (!recording()) return failure();
  Status s = DrainOnce(/*seal=*/true);
  if (!s.ok()) Fail(s);
  return s;
}

Status TraceWriter::WriteHeader(bool complete, size_t* size) {
  State& st = *state_;
  std::string bytes;
  {
    std::lock_guard<std::mutex> lock(st.header_mu);
    options_.header.complete = complete;
    bytes = EncodeRankHeader(options_.header);
  }
  if (size != nullptr) *size = bytes.size();
  return st.fs->WriteAtomic(rank_dir_ + "/" + format::kHeaderFile, bytes);
}

void TraceWriter::UpdateHeader(const std::function<void(RankHeader&)>& change) {
  std::lock_guard<std::mutex> lock(state_->header_mu);
  change(options_.header);
}

bool TraceWriter::AppendFromSignal(EventKind kind, const void* body, size_t body_size) {
  if (!recording_.load(std::memory_order_acquire) || signal_slot_ == nullptr) return false;
  if (signal_slot_busy_.test_and_set(std::memory_order_acquire)) return false;
  // Attribute the signal to the thread it interrupted, when that thread records.
  const SlotHeader* own = CachedSlot(generation_);
  signal_slot_->thread = own != nullptr ? own->thread : UINT32_MAX;
  bool ok = ring_->AppendRecord(signal_slot_, kind, body, body_size, nullptr, 0, nullptr, 0, 0);
  signal_slot_busy_.clear(std::memory_order_release);
  return ok;
}

void TraceWriter::AbandonAfterFork() {
  recording_.store(false, std::memory_order_release);
  closed_.store(true, std::memory_order_release);
  if (ring_ != nullptr) ring_->AbandonAfterFork();
  // The child's one thread forgets its slot (and any call record open in it)
  // in the mapping that is gone.
  if (t_thread_slot.generation == generation_) t_thread_slot = replay::ThreadSlot{};
  // The std::thread object names a thread of the parent: forget it unjoined.
  new (&state_->background) std::thread();
  state_->events.release();
  state_->payloads.release();
}

Status TraceWriter::Close(CloseReason reason) {
  State& st = *state_;
  if (closed_.exchange(true)) return failure();
  bool was_recording = recording();
  if (st.background.joinable() && std::this_thread::get_id() != st.background.get_id()) {
    st.stop.store(true, std::memory_order_release);
    ring_->Wake();
    st.background.join();
  }
  Status result;
  if (was_recording) {
    result = DrainOnce(/*seal=*/true);
    if (result.ok()) result = st.events->Sync();
    if (result.ok() && st.payloads != nullptr) result = st.payloads->Sync();
    if (!result.ok()) Fail(result);
  } else if (st.events != nullptr && ring_ != nullptr && !ring_->Drained()) {
    // Stopped on an error (no room for the ring, say) while the events stream
    // may still take what the ring holds: it is written at the same place
    // again, so a write that failed before leaves nothing in between.
    if (DrainOnce(/*seal=*/true).ok()) (void)st.events->Sync();
  }
  recording_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(st.header_mu);
    RankHeader& h = options_.header;
    Status f = failure();
    h.close_reason = f.ok() ? reason : CloseReason::kFailed;
    h.recording_error = f.ok() ? "" : f.ToString();
    h.close_realtime_ns = RealtimeNs();
    h.event_count = st.events_written.load();
    h.dropped_events = st.drops_reported.load();
    h.unrecorded_calls = ring_->header()->lost_no_slot.load() + ring_->header()->unrecorded.load();
  }
  // A failed recording keeps its ring while it holds what the events stream
  // lacks, or while the header could not say why recording stopped.
  bool clean = failure().ok();
  Status hs = WriteHeader(clean);
  if (!clean && hs.ok() && ring_->Drained()) st.fs->Remove(ring_->path());
  if (result.ok()) result = hs;
  if (clean && hs.ok()) {
    ring_->header()->closed.store(1, std::memory_order_release);
    st.fs->Remove(ring_->path());
  }
  if (st.events != nullptr) st.events->Close();
  if (st.payloads != nullptr) st.payloads->Close();
  return result.ok() ? failure() : result;
}

void TraceWriter::CloseFromSignal(CloseReason reason, int signo, int64_t timeout_ns) {
  State& st = *state_;
  if (ring_ == nullptr || closed()) return;
  if (signo != 0) ring_->header()->fatal_signal.store(signo, std::memory_order_relaxed);
  if (!st.background.joinable()) return;
  signal_close_.store(static_cast<int32_t>(reason) + 1, std::memory_order_release);
  ring_->Wake();
  // Bounded: if the writer cannot finish (it may need a lock the interrupted
  // thread holds) the ring still has everything; the reader salvages it.
  int64_t deadline = MonotonicNs() + timeout_ns;
  while (!st.signal_closed.load(std::memory_order_acquire) && MonotonicNs() < deadline) {
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

WriterStats TraceWriter::stats() const {
  const State& st = *state_;
  WriterStats s;
  s.events_written = st.events_written.load();
  s.blocks_written = st.blocks_written.load();
  s.raw_bytes = st.raw_bytes.load();
  s.stored_bytes = st.stored_bytes.load();
  s.payload_bytes = st.payload_bytes.load();
  s.payload_stored = st.payload_stored.load();
  s.dropped = st.drops_reported.load();
  s.unrecorded = ring_ ? ring_->header()->lost_no_slot.load() + ring_->header()->unrecorded.load() : 0;
  return s;
}

}  // namespace replay
