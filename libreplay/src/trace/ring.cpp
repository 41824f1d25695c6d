#include "trace/ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>

namespace replay {
namespace {

uint64_t RoundUpPow2(uint64_t v) {
  uint64_t p = 4096;
  while (p < v) p <<= 1;
  return p;
}

// A slot capacity Ring::Create can have produced: a power of two from 4 KiB, and
// not absurdly large. Readers check it before doing arithmetic with it.
bool PlausibleCapacity(uint64_t capacity) {
  return capacity >= 4096 && (capacity & (capacity - 1)) == 0 && capacity <= (1ull << 34);
}

// Event time (ns since start_mono_ns) of a record in a ring file. The
// calibration comes from the file and is not trusted: where it is damaged the
// result is meaningless (SalvageRing says so) but never undefined.
int64_t SalvagedTimeNs(const RingHeader& h, uint64_t ticks) {
  double scaled = static_cast<double>(static_cast<int64_t>(ticks - h.tick_base)) * h.ns_per_tick;
  int64_t dt_ns = std::isfinite(scaled) ? static_cast<int64_t>(std::clamp(scaled, -9e18, 9e18)) : 0;
  return static_cast<int64_t>(static_cast<uint64_t>(h.mono_base_ns) + static_cast<uint64_t>(dt_ns) -
                              static_cast<uint64_t>(h.start_mono_ns));
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op | FUTEX_PRIVATE_FLAG, val,
                 timeout, nullptr, 0);
}

// Reserves the file's blocks so that writing the mapping can never fault with
// SIGBUS on a full disk: the failure surfaces here, as an error, instead.
int Reserve(int fd, off_t from, off_t to) { return posix_fallocate(fd, from, to - from); }

// Data bytes a new slot reserves on disk; it doubles as the slot fills.
constexpr uint64_t kInitialReserve = 16 * 1024;

}  // namespace

void RecordToEvent(const RingRecord& rec, int64_t time_ns, Event* out) {
  const RecordHeader& h = *rec.header;
  out->index = h.index;
  out->time_ns = time_ns;
  out->thread = h.thread;
  out->call_site = h.call_site;
  out->kind = static_cast<EventKind>(h.kind);
  std::memcpy(static_cast<void*>(&out->op), rec.body, EventBodySize(out->kind));
  out->list.assign(rec.list, rec.list + h.list_count);
  out->text.assign(rec.text, h.text_size);
}

void ReturnToEvent(const RingRecord& rec, const ReturnTail& tail, int64_t time_ns, Event* out) {
  out->index = tail.index;
  out->time_ns = time_ns;
  out->thread = rec.header->thread;
  out->call_site = rec.header->call_site;
  out->kind = EventKind::kReturn;
  out->ret = tail.ret;
  out->list.clear();
  out->text.clear();
}

Result<std::unique_ptr<Ring>> Ring::Create(const std::string& path, const RingOptions& options,
                                           const uint8_t trace_uuid[16]) {
  std::unique_ptr<Ring> ring(new Ring());
  ring->path_ = path;
  ring->capacity_ = RoundUpPow2(options.capacity);
  ring->mask_ = ring->capacity_ - 1;
  ring->slot_bytes_ = kSlotHeaderBytes + ring->capacity_;
  ring->full_wait_ns_ = options.full_wait_ns;
  uint32_t max_slots = options.max_slots == 0 ? 1 : options.max_slots;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("cannot create " + path, errno);
  ring->fd_ = fd;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return Status::FromErrno("cannot lock " + path, errno);
  if (int err = ftruncate(fd, kRingHeaderBytes) != 0 ? errno : Reserve(fd, 0, kRingHeaderBytes); err != 0) {
    return Status::FromErrno("cannot reserve space for " + path, err);
  }
  ring->map_bytes_ = kRingHeaderBytes + static_cast<size_t>(max_slots) * ring->slot_bytes_;
  void* base = mmap(nullptr, ring->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::FromErrno("cannot map " + path, errno);
  ring->base_ = static_cast<uint8_t*>(base);
  ring->header_ = new (base) RingHeader();
  RingHeader* h = ring->header_;
  std::memcpy(h->magic, kRingMagic, sizeof(h->magic));
  h->version = kRingVersion;
  h->max_slots = max_slots;
  h->capacity = ring->capacity_;
  std::memcpy(h->trace_uuid, trace_uuid, 16);
  h->pid = getpid();
  TickClock clock = TickClock::Start(options.prefer_tsc);
  ring->tsc_ = clock.tsc;
#if defined(__x86_64__)
  ring->prefetch_write_ = HavePrefetchWrite();
#else
  ring->prefetch_write_ = true;  // the compiler's prefetch for writing
#endif
  h->clock_tsc = clock.tsc ? 1 : 0;
  h->tick_base = clock.tick_base;
  h->mono_base_ns = clock.mono_base_ns;
  h->ns_per_tick = clock.ns_per_tick;
  h->start_mono_ns = options.start_mono_ns;
  return ring;
}

Ring::~Ring() {
  if (base_ != nullptr) munmap(base_, map_bytes_);
  if (fd_ >= 0) close(fd_);  // releases the lock
}

void Ring::AbandonAfterFork() {
  // In a forked child: drop our view without touching the parent's file. Closing
  // our copy of the descriptor matters: the parent's lock tells readers it is
  // still recording, and must end when the parent does.
  if (base_ != nullptr) munmap(base_, map_bytes_);
  base_ = nullptr;
  header_ = nullptr;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

SlotHeader* Ring::Claim(uint32_t thread, int64_t tid) {
  auto take = [&](SlotHeader* s) {
    s->thread = thread;
    s->tid = tid;
    s->dropping = 0;
    s->tail_seen = s->tail.load(std::memory_order_acquire);
    return s;
  };
  for (;;) {
    uint32_t n = slots_used();
    for (uint32_t i = 0; i < n; ++i) {
      SlotHeader* s = slot(i);
      uint32_t expected = kSlotFree;
      if (s->state.load(std::memory_order_relaxed) == kSlotFree &&
          s->state.compare_exchange_strong(expected, kSlotOwned, std::memory_order_acq_rel)) {
        return take(s);
      }
    }
    std::lock_guard<std::mutex> lock(grow_mu_);
    if (slots_used() != n) continue;  // someone grew it meanwhile; look again
    if (n >= header_->max_slots) return nullptr;
    // The file covers the whole slot at once (a reader finds every slot where
    // it belongs), but only the slot's start takes disk space; Extend reserves
    // the rest as it is used.
    off_t from = static_cast<off_t>(kRingHeaderBytes + n * slot_bytes_);
    uint64_t initial = std::min(kInitialReserve, capacity_);
    int err = ftruncate(fd_, from + static_cast<off_t>(slot_bytes_)) != 0 ? errno : 0;
    if (err == 0) err = Reserve(fd_, from, from + static_cast<off_t>(kSlotHeaderBytes + initial));
    if (err != 0) {
      grow_error_.store(err, std::memory_order_relaxed);
      return nullptr;
    }
    SlotHeader* s = new (slot(n)) SlotHeader();
    s->limit = initial >= capacity_ ? UINT64_MAX : initial - 8;
    s->wrap_at = capacity_;
    s->state.store(kSlotOwned, std::memory_order_relaxed);
    header_->slots_used.store(n + 1, std::memory_order_release);
    return take(s);
  }
}

bool Ring::Extend(SlotHeader* slot, uint64_t end, bool exact) {
  if (slot->limit == UINT64_MAX) return true;
  const uint64_t from = slot->limit + 8;
  uint64_t to = std::min(exact ? end + 8 : std::max(end + 8, from * 2), capacity_);
  if (to <= from) return true;
  // The events stream needs the disk more than the ring does: grow only while
  // the ring would stay a small part of the room that is left.
  struct statvfs fs;
  if (!exact && fstatvfs(fd_, &fs) == 0 && static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < (to - from) * 8) {
    reserve_error_.store(ENOSPC, std::memory_order_relaxed);
    slot->wrap_at = slot->limit;
    return false;
  }
  const off_t data = static_cast<off_t>(Data(slot) - base_);
  if (int err = Reserve(fd_, data + static_cast<off_t>(from), data + static_cast<off_t>(to)); err != 0) {
    reserve_error_.store(err, std::memory_order_relaxed);
    slot->wrap_at = slot->limit;
    return false;
  }
  slot->limit = to >= capacity_ ? UINT64_MAX : to - 8;
  slot->wrap_at = exact ? std::min<uint64_t>(slot->limit, capacity_) : capacity_;
  return true;
}

bool Ring::NoRoom() {
  grow_error_.store(reserve_error_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  header_->unrecorded.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool Ring::Drained() const {
  for (uint32_t i = 0, n = slots_used(); i < n; ++i) {
    const SlotHeader* s = slot(i);
    if (s->head.load(std::memory_order_acquire) != s->tail.load(std::memory_order_acquire)) return false;
  }
  return true;
}

void Ring::NoteFailure(std::string_view reason) {
  size_t n = std::min(reason.size(), sizeof(header_->failure) - 1);
  std::memcpy(header_->failure, reason.data(), n);
  header_->failure[n] = '\0';
}

bool Ring::AppendSlow(SlotHeader* slot, EventKind kind, const void* body, size_t body_size,
                      const int64_t* list, uint32_t list_count, const void* text,
                      uint32_t text_size, uint64_t call_site) {
  // Room for `need` bytes (after any padding) right now?
  auto fits = [&](size_t need) {
    uint64_t head = slot->head.load(std::memory_order_relaxed);
    uint64_t pos = head & mask_;
    size_t pad = (pos + need > slot->wrap_at) ? capacity_ - pos : 0;
    return head + pad + need - slot->tail.load(std::memory_order_acquire) <= capacity_;
  };
  size_t need = RecordSize(body_size, list_count, text_size);
  size_t drop_need = RecordSize(sizeof(DropEvent), 0, 0);
  int64_t deadline = 0;
  for (int spin = 0;; ++spin) {
    uint64_t pending = slot->dropped.load(std::memory_order_relaxed) -
                       slot->drop_noted.load(std::memory_order_relaxed);
    // The first record after a loss reports it, so that no drop is ever silent.
    if (fits(need + (pending != 0 ? drop_need + 8 : 0))) {
      if (pending != 0) {
        slot->drop_noted.fetch_add(pending, std::memory_order_relaxed);
        DropEvent d{pending};
        AppendRecord(slot, EventKind::kDrop, &d, sizeof(d), nullptr, 0, nullptr, 0, 0);
      }
      // Room has come back: wait again the next time it runs out.
      uint64_t used = slot->head.load(std::memory_order_relaxed) -
                      slot->tail.load(std::memory_order_relaxed);
      if (used <= (capacity_ >> 1)) slot->dropping = 0;
      if (fits(need)) {
        return AppendRecord(slot, kind, body, body_size, list, list_count, text, text_size,
                            call_site);
      }
    }
    if (need + drop_need + 8 > capacity_ || slot->dropping != 0) break;
    Wake();
    if (deadline == 0) deadline = MonotonicNs() + full_wait_ns_;
    if (MonotonicNs() > deadline) {
      slot->dropping = 1;
      break;
    }
    if (spin < 64) {
      sched_yield();
    } else {
      timespec ts{0, 50 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  slot->dropped.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void Ring::MaybeWake() {
  if (sleeping_.load(std::memory_order_relaxed) != 0) Wake();
}

void Ring::Wake() {
  if (work_.exchange(1, std::memory_order_acq_rel) == 0) {
    Futex(&work_, FUTEX_WAKE, 1, nullptr);
  }
}

bool Ring::WaitForWork(int64_t timeout_ns) {
  sleeping_.store(1, std::memory_order_seq_cst);
  if (work_.load(std::memory_order_acquire) == 0) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
    Futex(&work_, FUTEX_WAIT, 0, &ts);
  }
  sleeping_.store(0, std::memory_order_relaxed);
  return work_.exchange(0, std::memory_order_acq_rel) != 0;
}

void Ring::ReapReleased() {
  uint32_t n = slots_used();
  for (uint32_t i = 0; i < n; ++i) {
    SlotHeader* s = slot(i);
    if (s->state.load(std::memory_order_acquire) != kSlotReleased) continue;
    if (s->head.load(std::memory_order_acquire) != s->tail.load(std::memory_order_relaxed)) continue;
    uint64_t pending = s->dropped.load(std::memory_order_relaxed) -
                       s->drop_noted.load(std::memory_order_relaxed);
    if (pending != 0) {
      // Its owner is gone before it could report a loss: report it on its behalf
      // (the slot is ours alone now); the next drain writes it.
      s->drop_noted.fetch_add(pending, std::memory_order_relaxed);
      DropEvent d{pending};
      AppendRecord(s, EventKind::kDrop, &d, sizeof(d), nullptr, 0, nullptr, 0, 0);
      continue;
    }
    uint32_t expected = kSlotReleased;
    s->state.compare_exchange_strong(expected, kSlotFree, std::memory_order_acq_rel);
  }
}

int64_t Ring::TicksToEventNs(uint64_t ticks) const {
  const RingHeader* h = header_;
  int64_t dt = static_cast<int64_t>(ticks - h->tick_base);
  int64_t mono = h->mono_base_ns + static_cast<int64_t>(static_cast<double>(dt) * h->ns_per_tick);
  return mono - h->start_mono_ns;
}

TickClock Ring::Clock() const {
  TickClock c;
  c.tsc = tsc_;
  c.tick_base = header_->tick_base;
  c.mono_base_ns = header_->mono_base_ns;
  c.ns_per_tick = header_->ns_per_tick;
  return c;
}

void Ring::RefineClock() {
  TickClock c;
  c.tsc = tsc_;
  c.tick_base = header_->tick_base;
  c.mono_base_ns = header_->mono_base_ns;
  c.ns_per_tick = header_->ns_per_tick;
  c.Refine();
  header_->ns_per_tick = c.ns_per_tick;
}

std::vector<uint64_t> RingTails(std::span<const uint8_t> file) {
  std::vector<uint64_t> tails;
  if (file.size() < sizeof(RingHeader)) return tails;
  RingHeader h;
  std::memcpy(static_cast<void*>(&h), file.data(), sizeof(h));
  if (std::memcmp(h.magic, kRingMagic, sizeof(h.magic)) != 0 || !PlausibleCapacity(h.capacity)) {
    return tails;
  }
  // A slot is at least 4 KiB, so the file's size bounds the walk whatever
  // slots_used says.
  uint64_t slot_bytes = kSlotHeaderBytes + h.capacity;
  uint64_t slots = h.slots_used.load();
  for (uint64_t i = 0, at = kRingHeaderBytes; i < slots; ++i, at += slot_bytes) {
    if (at > file.size() || file.size() - at < sizeof(SlotHeader)) break;
    SlotHeader sh;
    std::memcpy(static_cast<void*>(&sh), file.data() + at, sizeof(sh));
    tails.push_back(sh.tail.load());
  }
  return tails;
}

Result<SalvagedRing> SalvageRing(std::span<const uint8_t> file, std::span<const uint64_t> consumed) {
  if (file.size() < sizeof(RingHeader)) {
    return Status::Corruption("ring file is too short (" + std::to_string(file.size()) + " bytes)");
  }
  RingHeader h;
  std::memcpy(static_cast<void*>(&h), file.data(), sizeof(h));
  if (std::memcmp(h.magic, kRingMagic, sizeof(h.magic)) != 0) {
    return Status::NotATrace("ring file has no ring magic");
  }
  if (h.version > kRingVersion) {
    return Status::Version("ring file version " + std::to_string(h.version) +
                           " is newer than this replay reads (" + std::to_string(kRingVersion) +
                           "): upgrade replay");
  }
  if (!PlausibleCapacity(h.capacity)) {
    return Status::Corruption("ring file has an impossible slot capacity " + std::to_string(h.capacity));
  }
  SalvagedRing out;
  out.closed = h.closed.load() != 0;
  out.failed = h.failed.load() != 0;
  out.fatal_signal = h.fatal_signal.load();
  out.lost_no_slot = h.lost_no_slot.load();
  out.unrecorded = h.unrecorded.load();
  out.failure.assign(h.failure, strnlen(h.failure, sizeof(h.failure)));
  out.pid = h.pid;
  if (!(h.ns_per_tick > 0 && h.ns_per_tick < 1e3)) {  // false for NaN too
    out.problems.push_back("ring clock calibration is damaged (" + std::to_string(h.ns_per_tick) +
                           " ns per tick): salvaged event times are not meaningful");
  }
  uint64_t slot_bytes = kSlotHeaderBytes + h.capacity;
  uint64_t slots = h.slots_used.load();
  uint64_t present = (file.size() - kRingHeaderBytes) / slot_bytes;
  if (file.size() < kRingHeaderBytes) present = 0;
  if (slots > present) {
    out.problems.push_back("ring declares " + std::to_string(slots) + " slots but the file holds " +
                           std::to_string(present));
    slots = present;
  }
  uint64_t mask = h.capacity - 1;
  for (uint64_t i = 0; i < slots; ++i) {
    const uint8_t* sbase = file.data() + kRingHeaderBytes + i * slot_bytes;
    SlotHeader sh;
    std::memcpy(static_cast<void*>(&sh), sbase, sizeof(sh));
    const uint8_t* data = sbase + kSlotHeaderBytes;
    uint64_t head = sh.head.load(), tail = sh.tail.load();
    out.dropped += sh.dropped.load() - sh.drop_noted.load();
    if (head < tail || head - tail > h.capacity) {
      out.problems.push_back("ring slot " + std::to_string(i) + " has head " + std::to_string(head) +
                             " and tail " + std::to_string(tail) + ": skipped");
      continue;
    }
    uint64_t pos = tail;
    uint64_t skip_before = i < consumed.size() ? consumed[i] : 0;
    while (pos < head) {
      uint64_t off = pos & mask;
      if (h.capacity - off < sizeof(RecordHeader)) {
        out.problems.push_back("ring slot " + std::to_string(i) + ": record header cut at " +
                               std::to_string(off));
        break;
      }
      RecordHeader rh;
      std::memcpy(&rh, data + off, sizeof(rh));
      if (rh.kind == kPadKind) {
        pos += h.capacity - off;
        continue;
      }
      auto kind = static_cast<EventKind>(rh.kind);
      size_t body = EventBodySize(kind);
      // A version 1 ring has no flags; a call's record with room for its
      // return is an op with no text.
      const bool has_tail = h.version >= 2 && (rh.flags & kRecordTail) != 0;
      const size_t tail_bytes = has_tail ? sizeof(ReturnTail) : 0;
      if (body == 0 || rh.size < sizeof(RecordHeader) || rh.size > h.capacity - off ||
          RecordSize(body, rh.list_count, rh.text_size) + tail_bytes != rh.size ||
          (has_tail && (kind != EventKind::kOp || rh.text_size != 0))) {
        out.problems.push_back("ring slot " + std::to_string(i) + ": damaged record at offset " +
                               std::to_string(off) + "; rest of the slot skipped");
        break;
      }
      const auto* bp = data + off + sizeof(RecordHeader);
      RingRecord rec{nullptr, bp, nullptr, nullptr, 0};
      rec.header = &rh;
      // list may be unaligned in a copied buffer: copy it out.
      std::vector<int64_t> list(rh.list_count);
      if (rh.list_count != 0) std::memcpy(list.data(), bp + body, rh.list_count * 8);
      rec.list = list.data();
      rec.text = reinterpret_cast<const char*>(bp + body + rh.list_count * 8);
      Event e;
      RecordToEvent(rec, SalvagedTimeNs(h, rh.ticks), &e);
      if (pos >= skip_before) {
        out.events.push_back(std::move(e));
        // The return of a call that returned; a call it died in is its op alone.
        constexpr uint16_t kReturned = kRecordDone | kRecordReturned;
        if (has_tail && (rh.flags & kReturned) == kReturned) {
          ReturnTail ret;
          std::memcpy(static_cast<void*>(&ret), data + off + rh.size - sizeof(ReturnTail), sizeof(ret));
          Event r;
          ReturnToEvent(rec, ret, SalvagedTimeNs(h, ret.ticks), &r);
          out.events.push_back(std::move(r));
        }
      }
      pos += rh.size;
    }
  }
  return out;
}

}  // namespace replay
