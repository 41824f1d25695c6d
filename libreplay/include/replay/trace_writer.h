// trace_writer.h: writes one rank of a trace.
//
// A TraceWriter owns a rank directory (DIR/rank-NNNNN/): its header, events and
// payloads streams and the recording ring. Appending is lock-free and goes into
// the calling thread's slot of the ring, which survives the process being killed;
// a background thread drains the ring into compressed blocks at least every
// flush interval, and sooner when a slot fills up. Close() drains everything,
// marks the header complete and removes the ring.
//
// When recording fails (full disk, unwritable directory, I/O error) the writer
// reports it once through the failure callback, stops recording and keeps
// answering appends with `false`: callers never see an exception or a crash.
//
// Thread safety: Append*, StorePayload, Flush and the accessors may be called
// from any thread. Close from one thread. A TraceWriter must outlive every
// thread that appended to it (or those threads must have ended).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_header.h"

namespace replay {

class Ring;
struct SlotHeader;
class FileSystem;

struct WriterOptions {
  std::string dir;            // trace directory; created (mode 0700) if missing
  // Header facts. rank names the directory (rank-00003); with rank < 0 it is
  // named after the pid (pid-12345) until the reader learns the rank.
  RankHeader header;
  // Manifest written to DIR/manifest if there is none yet.
  JobManifest manifest;
  uint64_t ring_slot_bytes = 1u << 20;  // per recording thread
  uint32_t ring_max_slots = 256;
  // Appended events wait at most this long before they are written. A flush
  // leaves the last block open, to be rewritten in place with more events.
  int64_t flush_interval_ns = 1'000'000'000;
  uint32_t block_events = 8192;        // events per block at most; 1 to 1,048,576 (the format's limit)
  int zstd_level = 1;
  int64_t full_wait_ns = 200'000'000;  // see RingOptions
  // Payloads kept: 0 keeps all; K keeps those received since the K-th last
  // mark (payloads are stored in one file per stretch between marks, and
  // older files are removed; see NoteMark).
  uint32_t payload_window_marks = 0;
  bool background_thread = true;      // false: nothing is written until Flush()/Close()
  FileSystem* fs = nullptr;           // null: the real file system
  // Called once, from whichever thread noticed, when recording stops because
  // of an error. Default: one line on stderr.
  std::function<void(const Status&)> on_failure;
};

struct WriterStats {
  uint64_t events_written = 0;
  uint64_t blocks_written = 0;
  uint64_t raw_bytes = 0;         // uncompressed block content
  uint64_t stored_bytes = 0;      // bytes written to the events stream
  uint64_t payload_bytes = 0;     // distinct payload bytes offered
  uint64_t payload_stored = 0;    // bytes written to the payloads stream
  uint64_t dropped = 0;           // lost to full rings
  uint64_t unrecorded = 0;        // calls not recorded: after a failure, or with no slot or disk room
};

struct PayloadRef {
  uint64_t hash = 0;
  uint64_t size = 0;
};

class TraceWriter {
 public:
  static Result<std::unique_ptr<TraceWriter>> Open(WriterOptions options);
  ~TraceWriter();  // closes with CloseReason::kExit if still open
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends `e` (its index, time and thread are assigned here; call_site is
  // kept). False if the event could not be recorded.
  bool Append(const Event& e);

  // The hot path: appends a kind's body without building an Event.
  template <typename Body>
  bool AppendBody(EventKind kind, const Body& body, uint64_t call_site,
                  std::span<const int64_t> list = {}, std::string_view text = {}) {
    return AppendRaw(kind, &body, sizeof(Body), list, text, call_site);
  }
  bool AppendRaw(EventKind kind, const void* body, size_t body_size,
                 std::span<const int64_t> list, std::string_view text, uint64_t call_site);
  // For an append inlined where it is made (record/recorder.h): the ring
  // (from Open until the writer is destroyed), the generation the calling
  // thread's cached slot must carry (trace/thread_slot.h), and what to call
  // when the ring refused a record: notes why if the disk is full; false.
  Ring* ring() const { return ring_.get(); }
  uint64_t generation() const { return generation_; }
  bool AppendRefused();
  // Closes the calling thread's open call record (ThreadSlot::open, of this
  // writer's generation) as its op alone.
  void CloseOpenCall();

  // Stores received bytes in the payload stream, once per distinct content.
  // `hash` must be Hash64 of `bytes`.
  Result<PayloadRef> StorePayload(std::span<const uint8_t> bytes, uint64_t hash);

  // A checkpoint mark was appended: with a payload window, starts a new
  // payload file and removes those that fell out of the window.
  void NoteMark();

  // Writes everything appended so far (by threads that finished appending) now,
  // in sealed blocks.
  Status Flush();
  // Drains, syncs, completes the header with `reason` and removes the ring.
  Status Close(CloseReason reason);

  // From a signal handler, or a thread about to _exit: asks the background
  // thread to close the trace with `reason` and waits at most `timeout_ns` for
  // it. `signo` (0 if none) is noted in the ring first, so a reader learns it
  // even if the process dies before the close ends. Only async-signal-safe
  // operations are used on the calling thread.
  void CloseFromSignal(CloseReason reason, int signo, int64_t timeout_ns);

  // Appends from a signal handler, through a slot reserved for that, since the
  // interrupted thread may be half-way through an append to its own. Lock-free
  // and async-signal-safe; false if another handler holds the slot.
  bool AppendFromSignal(EventKind kind, const void* body, size_t body_size);

  // Changes header facts learned while recording (rank, versions); the header
  // is rewritten with them at close.
  void UpdateHeader(const std::function<void(RankHeader&)>& change);

  // In a forked child: stop recording and forget the parent's ring and files
  // without touching them. The writer must then never be destroyed (its
  // background thread does not exist in the child).
  void AbandonAfterFork();

  bool recording() const { return recording_.load(std::memory_order_acquire); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  Status failure() const;
  WriterStats stats() const;
  const std::string& rank_dir() const { return rank_dir_; }
  const RankHeader& header() const { return options_.header; }

  // Gives the calling thread's slot up for reuse (thread exit).
  void ReleaseThreadSlot();
  // Counts a call the program made after recording stopped on an error, which
  // the trace then says it lacks. Nothing before the failure or after Close.
  void NoteUnrecorded();

 private:
  struct BlockTally;
  explicit TraceWriter(WriterOptions options);
  Status Start();
  std::string PayloadPath(uint32_t segment) const;
  // The calling thread's slot: the one it was given, else ClaimThreadSlot.
  SlotHeader* ThreadSlot();
  SlotHeader* ClaimThreadSlot();
  void Fail(const Status& st);
  void BackgroundLoop();
  Status DrainOnce(bool seal);
  void SealOpenBlock();
  void Seal(const std::vector<uint64_t>& ends, const BlockTally& tally, const std::vector<uint64_t>& ops);
  // Writes the header; `size`, if given, gets its length.
  Status WriteHeader(bool complete, size_t* size = nullptr);
  Status CloseLocked(CloseReason reason);

  struct State;
  WriterOptions options_;
  std::string rank_dir_;
  std::unique_ptr<Ring> ring_;  // from Start on; destroyed after state_
  std::unique_ptr<State> state_;
  std::atomic<bool> recording_{false};
  std::atomic<bool> closed_{false};
  std::atomic<int32_t> signal_close_{0};  // 1 + CloseReason asked for, 0 if none
  std::atomic_flag signal_slot_busy_ = ATOMIC_FLAG_INIT;
  SlotHeader* signal_slot_ = nullptr;
  uint64_t generation_ = 0;
};

}  // namespace replay
