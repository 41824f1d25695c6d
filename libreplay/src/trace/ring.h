// ring.h: the recording ring, where appended events wait for the writer.
//
// The ring is a file in the rank directory (`ring`) mapped MAP_SHARED, so what a
// thread appends is in the kernel's page cache the moment it is published and
// survives the process being killed. Each recording thread owns a slot, a
// single-producer single-consumer byte ring: the owner appends records without a
// lock, an allocation or a system call; the writer thread drains them into blocks
// of the events stream and only then releases the space. A reader of a crashed
// rank salvages what is still in the ring (Salvage below).
//
// File layout (little-endian; docs/trace-format.md "The ring"):
//   [RingHeader, kRingHeaderBytes][slot 0][slot 1]...[slot slots_used-1]
//   slot = [SlotHeader, kSlotHeaderBytes][data, capacity bytes, a power of two]
// A slot's data holds records back to back at positions head/tail (byte counts
// that only grow; position mod capacity is the offset). A record never wraps:
// when it would, a padding record fills the rest of the data first.
//
// Thread safety: AppendRecord is called only by a slot's owner thread (or by
// whoever holds the slot exclusively, as the signal path does); Drain and
// Release only by the writer thread. Claim may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "util/clock.h"

namespace replay {

inline constexpr char kRingMagic[8] = {'R', 'E', 'P', 'L', 'R', 'I', 'N', 'G'};
inline constexpr uint32_t kRingVersion = 2;  // 2: a call's op and return in one record (RecordFlags)
inline constexpr size_t kRingHeaderBytes = 4096;
inline constexpr size_t kSlotHeaderBytes = 256;
inline constexpr uint16_t kPadKind = 0xffff;

struct RingHeader {
  char magic[8];                  // kRingMagic
  uint32_t version;               // kRingVersion
  uint32_t max_slots;
  uint64_t capacity;              // data bytes per slot, a power of two
  uint8_t trace_uuid[16];
  int32_t pid;                    // of the recording process
  uint32_t clock_tsc;             // 1: record ticks are TSC, 0: monotonic ns
  // Tick calibration; the writer refines it while recording.
  uint64_t tick_base;
  int64_t mono_base_ns;
  double ns_per_tick;
  int64_t start_mono_ns;          // RankHeader.startMonotonicNs: event times count from here
  std::atomic<uint32_t> slots_used;   // slots [0, slots_used) exist in the file
  std::atomic<uint32_t> closed;       // 1 once the writer drained everything and closed cleanly
  uint64_t unused;                    // 0; held the next index before it got a line of its own
  std::atomic<int32_t> fatal_signal;  // a fatal signal the process took, 0 if none
  std::atomic<uint64_t> lost_no_slot; // events lost because no slot was free
  std::atomic<uint32_t> failed;       // 1 once recording stopped on an error
  // The next event index to hand out. Every append takes one with a locked
  // increment, so it has a cache line to itself: the writer reads the fields
  // above, and each of its reads would otherwise send the line away.
  alignas(64) std::atomic<uint64_t> next_index;
  // Calls the process made but could not record: after recording stopped on
  // an error, or because the disk had no room for them in the ring.
  alignas(64) std::atomic<uint64_t> unrecorded;
  char failure[256];  // why recording stopped (NUL-terminated); empty if it did not
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

enum SlotState : uint32_t {
  kSlotFree = 0,
  kSlotOwned = 1,
  kSlotReleased = 2,  // its thread ended; the writer frees it once drained
};

struct SlotHeader {
  std::atomic<uint32_t> state;
  uint32_t thread;                          // per-rank thread number of the owner
  int64_t tid;                              // kernel thread id of the owner
  alignas(64) std::atomic<uint64_t> head;   // bytes published by the owner
  alignas(64) std::atomic<uint64_t> tail;   // bytes the writer has made durable
  alignas(64) std::atomic<uint64_t> dropped;   // records the owner had to drop (ring full)
  std::atomic<uint64_t> drop_noted;            // of those, how many a Drop record reports
  uint32_t dropping;                           // owner-private: drop without waiting until drained
  // Owner-private: `tail` as the owner last read it. The writer stores `tail`
  // once per drain; appends compare against this copy and read `tail` again
  // only when the copy says the slot is full (or past half full), so most
  // appends never wait for that line to come back from the writer's core.
  uint64_t tail_seen;
  // Owner-private. The file grows with use, so that a small disk keeps what
  // fits instead of losing it all to space reserved up front: a record may
  // end at `limit` (8 bytes short of what is reserved on disk, so that a pad
  // always fits after it; UINT64_MAX once the whole slot is reserved), and
  // records go round at `wrap_at`: the capacity, or `limit` while the disk
  // has no room to grow the slot, which then records in what it has.
  uint64_t limit;
  uint64_t wrap_at;
};
static_assert(sizeof(SlotHeader) <= kSlotHeaderBytes);

// Every record starts with this. `size` covers header, body, list and text,
// rounded up to 8 bytes, and the return's part when flags has kRecordTail.
struct RecordHeader {
  uint32_t size;
  uint16_t kind;        // EventKind, or kPadKind
  uint16_t flags;       // RecordFlags; the owner stores the last change with release
  uint32_t thread;
  uint32_t list_count;  // int64 values after the body
  uint32_t text_size;   // bytes after the list
  uint32_t reserved;
  uint64_t index;
  uint64_t ticks;
  uint64_t call_site;
};
static_assert(sizeof(RecordHeader) == 48);

inline constexpr size_t RecordSize(size_t body, size_t list_count, size_t text) {
  return (sizeof(RecordHeader) + body + list_count * 8 + text + 7) & ~size_t{7};
}

// A call's op and its return in one record. The op is appended on entry with
// room for the return after it (kRecordTail); the return is written there when
// the call returns, with its own index and ticks, and kRecordDone and
// kRecordReturned are then published together. Until then the record is open:
// the writer writes its op alone and keeps its space, and a reader of a
// killed rank's ring finds the op of the call it died in.
enum RecordFlags : uint16_t {
  kRecordTail = 1,      // size includes a ReturnTail at the record's end
  kRecordDone = 2,      // the call returned, or will not be completed here
  kRecordReturned = 4,  // with kRecordDone: the tail holds the return
};

struct ReturnTail {
  uint64_t index;
  uint64_t ticks;
  ReturnEvent ret;
};
static_assert(sizeof(ReturnTail) % 8 == 0);

struct RingOptions {
  uint64_t capacity = 1u << 20;  // data bytes per slot; rounded up to a power of two
  uint32_t max_slots = 256;
  bool prefer_tsc = true;
  int64_t start_mono_ns = 0;
  // How long an appender waits for the writer when its slot is full before
  // dropping (and counting) the record. Once a wait has timed out, further full
  // appends drop at once until the writer frees space.
  int64_t full_wait_ns = 200 * 1000 * 1000;
};

// A record as the writer or salvager sees it, pointing into ring memory.
struct RingRecord {
  const RecordHeader* header;
  const void* body;
  const int64_t* list;
  const char* text;
  uint64_t end = 0;  // the slot position just past this record (Drain sets it)
  // A call's record with room for its return: the return once written, else
  // null; `open` while the call has not returned.
  const ReturnTail* ret = nullptr;
  bool open = false;
};

// Converts a ring record to an Event, using `to_ns` for the timestamp.
void RecordToEvent(const RingRecord& rec, int64_t time_ns, Event* out);
// The return event a call's record holds in `tail`.
void ReturnToEvent(const RingRecord& rec, const ReturnTail& tail, int64_t time_ns, Event* out);

class Ring {
 public:
  // Creates (replacing) the ring file at `path`, mode 0600, and maps it.
  static Result<std::unique_ptr<Ring>> Create(const std::string& path, const RingOptions& options,
                                              const uint8_t trace_uuid[16]);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // In a forked child: forgets the mapping and descriptor without touching the
  // file, which still belongs to the parent.
  void AbandonAfterFork();

  // Claims a slot for the calling thread; extends the file when all existing
  // slots are taken. Null when none can be had (the caller counts a lost event).
  SlotHeader* Claim(uint32_t thread, int64_t tid);
  // Whether every record appended so far has been consumed.
  bool Drained() const;
  // Notes why recording stopped, for a reader of the ring (truncated to fit).
  void NoteFailure(std::string_view reason);
  // Marks `slot` as no longer owned; the writer frees it after draining.
  static void Release(SlotHeader* slot) { slot->state.store(kSlotReleased, std::memory_order_release); }

  // Appends one record to `slot` (which the caller owns). Returns false when the
  // record was dropped because the slot stayed full; the drop is counted and
  // reported by a Drop record later. Never blocks longer than full_wait_ns.
  [[gnu::always_inline]] bool AppendRecord(SlotHeader* slot, EventKind kind, const void* body, size_t body_size,
                    const int64_t* list, uint32_t list_count, const void* text,
                    uint32_t text_size, uint64_t call_site) {
    size_t need = RecordSize(body_size, list_count, text_size);
    uint64_t head = 0, tail = 0;
    uint8_t* dst = nullptr;
    if (Place at = Room(slot, need, &dst, &head, &tail); __builtin_expect(at != Place::kHere, 0)) {
      if (at == Place::kNoRoom) return NoRoom();
      return AppendSlow(slot, kind, body, body_size, list, list_count, text, text_size,
                        call_site);
    }
    Write(slot, dst, need, 0, kind, body, body_size, list, list_count, text, text_size, call_site);
    Publish(slot, head + need, tail);
    return true;
  }

  // Appends a call's op record with room for its return, which Complete
  // writes in place when the call returns. Null, with nothing appended or
  // counted, when the slot has no room at once or a drop is waiting to be
  // reported: the caller then appends the op and the return as records of
  // their own, which wait, drop or count as any record does.
  [[gnu::always_inline]] RecordHeader* AppendOpen(SlotHeader* slot, const OpEvent& op, const int64_t* list,
                                                  uint32_t list_count, uint64_t call_site) {
    size_t need = RecordSize(sizeof(OpEvent), list_count, 0) + sizeof(ReturnTail);
    uint64_t head = 0, tail = 0;
    uint8_t* dst = nullptr;
    if (__builtin_expect(Room(slot, need, &dst, &head, &tail) != Place::kHere, 0)) return nullptr;
    Write(slot, dst, need, kRecordTail, EventKind::kOp, &op, sizeof(OpEvent), list, list_count, nullptr, 0,
          call_site);
    Publish(slot, head + need, tail);
    return reinterpret_cast<RecordHeader*>(dst);
  }
  // Writes the return of the call `open` (from AppendOpen) holds, on the
  // thread that appended it. The index is taken now, so that events appended
  // while the call ran come before its return, as they would as records of
  // their own.
  [[gnu::always_inline]] void Complete(RecordHeader* open, const ReturnEvent& ret) {
    if (__builtin_expect(header_ == nullptr, 0)) return;  // a forked child's view, gone
    auto* t = reinterpret_cast<ReturnTail*>(reinterpret_cast<uint8_t*>(open) + open->size - sizeof(ReturnTail));
    t->index = header_->next_index.fetch_add(1, std::memory_order_relaxed);
    t->ticks = ReadTicks();
    std::memcpy(&t->ret, &ret, sizeof(ReturnEvent));
    __atomic_store_n(&open->flags, uint16_t{kRecordTail | kRecordDone | kRecordReturned}, __ATOMIC_RELEASE);
  }
  // The call `open` holds will not be completed (it ended without a return
  // event): its record is its op alone.
  // The caller makes sure the ring is still mapped (not a forked child's view).
  static void Abandon(RecordHeader* open) {
    __atomic_store_n(&open->flags, uint16_t{kRecordTail | kRecordDone}, __ATOMIC_RELEASE);
  }

  // Writer side. Calls `visit(const RingRecord&)` for the published records of
  // `slot` from its tail, up to `max_records`; returns the position after the
  // last one visited, to pass to Consume once those records are durable
  // elsewhere. Inline, so the writer pays no indirect call per record.
  template <typename Visit>
  uint64_t Drain(SlotHeader* slot, size_t max_records, Visit&& visit) const {
    uint64_t head = slot->head.load(std::memory_order_acquire);
    uint64_t pos = slot->tail.load(std::memory_order_relaxed);
    size_t n = 0;
    while (pos < head && n < max_records) {
      uint64_t off = pos & mask_;
      // The records were just written on another core: ask for the lines a few
      // records ahead now, so each is on its way before it is needed.
      __builtin_prefetch(Data(slot) + ((pos + 1024) & mask_));
      const auto* h = reinterpret_cast<const RecordHeader*>(Data(slot) + off);
      if (h->kind == kPadKind) {
        pos += capacity_ - off;
        continue;
      }
      if (h->size < sizeof(RecordHeader) || h->size > capacity_ - off || (h->size & 7) != 0) {
        // Our own memory, damaged: give up on this slot's backlog rather than crash.
        return head;
      }
      const auto* body = reinterpret_cast<const uint8_t*>(h + 1);
      size_t body_size = EventBodySize(static_cast<EventKind>(h->kind));
      const auto* list = reinterpret_cast<const int64_t*>(body + body_size);
      const auto* text = reinterpret_cast<const char*>(list + h->list_count);
      RingRecord rec{h, body, list, text, pos + h->size};
      uint16_t flags = __atomic_load_n(&h->flags, __ATOMIC_ACQUIRE);
      if (flags & kRecordTail) {
        if (h->size < sizeof(RecordHeader) + body_size + sizeof(ReturnTail)) return head;  // damaged, as above
        if (!(flags & kRecordDone)) {
          // A call in flight: its op is visited, its space kept, and the
          // slot's later records (the same thread's) wait for its return.
          rec.open = true;
          visit(rec);
          return pos;
        }
        if (flags & kRecordReturned) {
          rec.ret = reinterpret_cast<const ReturnTail*>(reinterpret_cast<const uint8_t*>(h) + h->size -
                                                        sizeof(ReturnTail));
        }
      }
      visit(rec);
      pos += h->size;
      ++n;
    }
    return pos;
  }
  // Releases ring space up to `position` (from Drain).
  static void Consume(SlotHeader* slot, uint64_t position) {
    slot->tail.store(position, std::memory_order_release);
  }
  // Frees released slots that are fully drained, for reuse.
  void ReapReleased();

  // The writer waits here until an appender asks it to drain, or `timeout_ns`.
  // True if it was asked (Wake), false if the time ran out.
  bool WaitForWork(int64_t timeout_ns);
  void Wake();

  RingHeader* header() const { return header_; }
  uint32_t slots_used() const { return header_->slots_used.load(std::memory_order_acquire); }
  SlotHeader* slot(uint32_t i) const {
    return reinterpret_cast<SlotHeader*>(base_ + kRingHeaderBytes + i * slot_bytes_);
  }
  uint64_t capacity() const { return capacity_; }
  const std::string& path() const { return path_; }
  bool tsc() const { return tsc_; }
  uint64_t ReadTicks() const { return replay::ReadTicks(tsc_); }
  // errno of the last failed attempt to grow the file; 0 if none. An event
  // that found no room on disk is counted in RingHeader::unrecorded.
  int grow_error() const { return grow_error_.load(std::memory_order_relaxed); }

  // Converts record ticks to ns since start_mono_ns with the current calibration.
  int64_t TicksToEventNs(uint64_t ticks) const;
  // The current calibration, for converting many records: the header line it
  // lives on is also where appenders take their index, so reading it once per
  // record would bounce that line between the writer and every appender.
  TickClock Clock() const;
  int64_t start_mono_ns() const { return header_->start_mono_ns; }
  // Refines the tick calibration (writer thread).
  void RefineClock();

 private:
  Ring() = default;
  uint8_t* Data(SlotHeader* slot) const {
    return reinterpret_cast<uint8_t*>(slot) + kSlotHeaderBytes;
  }
  // The fast path's room check. kHere: a record of `need` bytes goes at `dst`
  // now (padding to the slot's start was written if it would not fit before
  // its end), `head` is past the padding and `tail` what it was checked
  // against. kSlow: only the slow path can decide (the slot is full, or a drop
  // is waiting to be reported). kNoRoom: the disk has no room for it.
  enum class Place { kHere, kSlow, kNoRoom };
  [[gnu::always_inline]] Place Room(SlotHeader* slot, size_t need, uint8_t** dst, uint64_t* head_out,
                                    uint64_t* tail_out) {
    uint64_t head = slot->head.load(std::memory_order_relaxed);
    uint64_t pos = head & mask_;
    size_t pad = (pos + need > slot->wrap_at) ? capacity_ - pos : 0;
    uint64_t tail = slot->tail_seen;
    if (__builtin_expect(head + pad + need - tail > (capacity_ >> 1) || pos + need > slot->limit, 0)) {
      tail = slot->tail_seen = slot->tail.load(std::memory_order_acquire);
      if (pos + need > slot->limit) {
        if (Extend(slot, pos + need, false)) {
          pad = (pos + need > slot->wrap_at) ? capacity_ - pos : 0;
        } else if (need <= slot->limit || Extend(slot, need, true)) {
          pad = capacity_ - pos;  // go round within what is reserved
        } else {
          return Place::kNoRoom;
        }
      }
    }
    if (__builtin_expect(head + pad + need - tail > capacity_ ||
                             slot->dropped.load(std::memory_order_relaxed) !=
                                 slot->drop_noted.load(std::memory_order_relaxed),
                         0)) {
      return Place::kSlow;
    }
    if (pad != 0) {
      WritePad(slot, pos, pad);
      head += pad;
      pos = 0;
    }
    *dst = Data(slot) + pos;
    *head_out = head;
    *tail_out = tail;
    return Place::kHere;
  }
  [[gnu::always_inline]] void Write(SlotHeader* slot, uint8_t* dst, size_t need, uint16_t flags, EventKind kind,
                                    const void* body, size_t body_size, const int64_t* list,
                                    uint32_t list_count, const void* text, uint32_t text_size,
                                    uint64_t call_site) {
    // The locked increment waits for every earlier store to reach the cache,
    // so it goes before the record's stores, whose lines may still be coming.
    uint64_t index = header_->next_index.fetch_add(1, std::memory_order_relaxed);
    RecordHeader* h = reinterpret_cast<RecordHeader*>(dst);
    h->size = static_cast<uint32_t>(need);
    h->kind = static_cast<uint16_t>(kind);
    h->flags = flags;
    h->thread = slot->thread;
    h->list_count = list_count;
    h->text_size = text_size;
    h->reserved = 0;
    h->index = index;
    h->ticks = ReadTicks();
    h->call_site = call_site;
    uint8_t* p = dst + sizeof(RecordHeader);
    std::memcpy(p, body, body_size);
    p += body_size;
    if (list_count != 0) {
      std::memcpy(p, list, list_count * 8);
      p += list_count * 8;
    }
    if (text_size != 0) std::memcpy(p, text, text_size);
  }
  [[gnu::always_inline]] void Publish(SlotHeader* slot, uint64_t new_head, uint64_t tail) {
    slot->head.store(new_head, std::memory_order_release);
    if (__builtin_expect(new_head - tail > (capacity_ >> 1), 0)) MaybeWake();
    // The lines the next records go to were read by the writer's core a lap
    // ago: ask for them, to be written, now, so that taking them back from
    // that core overlaps this call instead of stalling the next append's
    // stores (measured in bench/README.md). A hint: never faults.
    if (__builtin_expect(prefetch_write_, 1)) {
      const uint8_t* base = Data(slot);
      const uint64_t pos = new_head & mask_;
      if (__builtin_expect(pos + kPrefetchBytes <= capacity_, 1)) {
#pragma GCC unroll 8
        for (uint64_t k = 0; k < kPrefetchBytes; k += 64) PrefetchForWrite(base + pos + k);
      } else {
        for (uint64_t k = 0; k < kPrefetchBytes; k += 64) PrefetchForWrite(base + ((pos + k) & mask_));
      }
    }
  }
  static constexpr uint64_t kPrefetchBytes = 384;  // about the next call's record
  static void PrefetchForWrite(const uint8_t* line) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(*line));
#else
    __builtin_prefetch(line, 1, 3);
#endif
  }
  void WritePad(SlotHeader* slot, uint64_t pos, size_t pad) {
    RecordHeader* h = reinterpret_cast<RecordHeader*>(Data(slot) + pos);
    h->size = static_cast<uint32_t>(pad);
    h->kind = kPadKind;
  }
  bool AppendSlow(SlotHeader* slot, EventKind kind, const void* body, size_t body_size,
                  const int64_t* list, uint32_t list_count, const void* text, uint32_t text_size,
                  uint64_t call_site);
  void MaybeWake();
  // Reserves `slot`'s data on disk so that a record may end at `end` (a data
  // position): twice what it had, or just that with `exact`. When the disk
  // has no room (or too little to spare), the slot goes round at its limit
  // instead, and this returns false.
  bool Extend(SlotHeader* slot, uint64_t end, bool exact);
  // A record that does not fit in what the disk let a slot reserve: counted
  // as unrecorded, and grow_error() says why. Returns false.
  bool NoRoom();

  std::string path_;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  size_t map_bytes_ = 0;
  RingHeader* header_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
  size_t slot_bytes_ = 0;
  bool tsc_ = false;
  bool prefetch_write_ = false;  // the CPU has a prefetch for writing (HavePrefetchWrite)
  int64_t full_wait_ns_ = 0;
  std::mutex grow_mu_;               // serialises file growth in Claim
  std::atomic<uint32_t> work_{0};    // futex word: 1 when the writer was asked to drain
  std::atomic<uint32_t> sleeping_{0};
  std::atomic<int> grow_error_{0};
  std::atomic<int> reserve_error_{0};  // errno of the last reservation the disk refused
};

// What a reader recovers from the ring of a rank that did not close cleanly.
struct SalvagedRing {
  std::vector<Event> events;         // published records not yet consumed, by slot then order
  uint64_t dropped = 0;              // records the owners counted as dropped
  uint64_t lost_no_slot = 0;
  uint64_t unrecorded = 0;           // calls made after recording stopped, or with no room on disk
  std::string failure;               // why recording stopped, if the writer said
  int32_t fatal_signal = 0;
  bool closed = false;               // the writer closed the ring cleanly
  bool failed = false;               // recording stopped on an error
  int32_t pid = 0;
  std::vector<std::string> problems; // damaged slots or records, with offsets
};

// Reads a ring file's bytes (a copy; the process may be gone or still running)
// and returns every record in [tail, head) of every slot. Never trusts the
// file: bounds and sizes are checked and damage is reported, not fatal.
// `consumed`, if given, holds each slot's tail read again after the copy was
// taken and before the events stream is read: records before it are in that
// stream by then (and a live rank's writer may have reused their space while
// the copy was taken), so are skipped.
Result<SalvagedRing> SalvageRing(std::span<const uint8_t> file,
                                 std::span<const uint64_t> consumed = {});
// Each slot's tail as stored in a ring file's bytes; empty if they don't parse.
std::vector<uint64_t> RingTails(std::span<const uint8_t> file);

}  // namespace replay
