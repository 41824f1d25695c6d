// recorder.h: the per-process recorder the interposer feeds.
//
// One Recorder per recorded process. It starts on the first recorded call (so
// a preloaded process that never communicates never opens a trace or starts a
// thread), reads the REPLAY_* settings, opens the rank's TraceWriter and owns
// the state that numbers operations: communicators and requests in flight.
// It closes the trace at exit, at a fatal signal, or when told to.
//
// Thread safety: everything here may be called from any thread. Get() may
// block while another thread activates. Only AppendFromSignal and
// CloseFromSignal are async-signal-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "record/comm_table.h"
#include "record/fingerprint.h"
#include "record/request_table.h"
#include "replay/event.h"
#include "replay/settings.h"
#include "replay/trace_writer.h"
#include "trace/call_record.h"
#include "trace/ring.h"
#include "trace/thread_slot.h"

namespace replay {

class Recorder {
 public:
  // The API table (Event api ids index it). Set once, before the first Get(),
  // by whoever defines the intercepted functions.
  static void SetApiNames(std::vector<std::string> names);
  // Called once, right after a successful activation, on the activating
  // thread (the interposer installs its signal handlers and fork hooks there).
  static void SetActivationHook(void (*hook)());
  // Called once when the trace closes, other than from a signal handler, on the
  // closing thread and before the last events are written: the interposer
  // appends what it holds back (kernel launches it counted).
  static void SetCloseHook(void (*hook)(Recorder*));

  // The recorder, activating it on first use. Null when recording is disabled
  // (REPLAY_DISABLE=1, a forked child, a failure to start) and after Close.
  // Inline: every recorded call asks.
  static Recorder* Get() {
    Recorder* r = active_.load(std::memory_order_acquire);
    return __builtin_expect(r != nullptr, 1) ? r : GetSlow();
  }
  // The recorder if already active; never activates.
  static Recorder* Peek() { return active_.load(std::memory_order_acquire); }
  // The recorder for a call about to be recorded: Get(), or null when there
  // is none, activating it failed, or recording stopped (the call is then
  // counted as one the trace lacks). Never throws.
  static Recorder* ForCall() noexcept {
    Recorder* r = nullptr;
    try {
      r = Get();
    } catch (...) {
      return nullptr;
    }
    if (r != nullptr && !r->recording()) {
      r->writer().NoteUnrecorded();
      return nullptr;
    }
    return r;
  }

  TraceWriter& writer() { return *writer_; }
  bool recording() const { return writer_->recording(); }
  Level level() const { return level_; }
  const FingerprintPolicy& fingerprints() const { return fingerprint_policy_; }
  // Of buffers a call receives, where what was sent into them is fingerprinted.
  const FingerprintPolicy& received_fingerprints() const { return received_policy_; }
  CommTable& comms() { return comms_; }
  RequestTable& requests() { return requests_; }
  const Settings& settings() const { return settings_; }

  template <typename Body>
  bool Append(EventKind kind, const Body& body, uint64_t call_site,
              std::span<const int64_t> list = {}, std::string_view text = {}) {
    // The common record, a body alone from a thread that has its slot: the
    // ring's append inline, with the body's size known here.
    TraceWriter& w = *writer_;
    if (__builtin_expect(list.empty() && text.empty() && w.recording(), 1)) {
      if (SlotHeader* slot = CachedSlot(w.generation()); __builtin_expect(slot != nullptr, 1)) {
        if (__builtin_expect(t_thread_slot.open != nullptr, 0)) w.CloseOpenCall();
        return w.ring()->AppendRecord(slot, kind, &body, sizeof(Body), nullptr, 0, nullptr, 0, call_site) ||
               w.AppendRefused();
      }
    }
    return w.AppendBody(kind, body, call_site, list, text);
  }

  // A call's op in a record its return completes in place (trace/call_record.h).
  bool AppendCall(const OpEvent& op, uint64_t call_site, std::span<const int64_t> list) {
    if (replay::AppendCall(*writer_, op, call_site, list)) return true;
    Append(EventKind::kOp, op, call_site, list);
    return false;
  }
  void AppendCallReturn(const ReturnEvent& ret, uint64_t call_site) {
    if (!replay::CompleteCall(*writer_, ret)) Append(EventKind::kReturn, ret, call_site);
  }
  void AbandonCall() { replay::AbandonCall(*writer_); }
  bool AppendInfo(std::string_view key, std::string_view value);

  // The close reason to use at exit: finalize once MPI_Finalize returned.
  void NoteFinalized() { finalized_.store(true, std::memory_order_relaxed); }
  // The world rank and size, once MPI tells; renames nothing (the directory was
  // named from the launcher's variables) but fixes the header.
  void NoteWorld(int32_t rank, int32_t size);
  // This process's rank and size in an NCCL communicator it made. When
  // neither a launcher nor MPI said which rank the process is, NCCL does: the
  // world is the first communicator made, or a larger one made later.
  void NoteNcclCommunicator(int32_t rank, int32_t size);
  void SetVersion(const std::string& key, const std::string& value);

  // Drains and completes the trace. Later appends are ignored.
  void Close(CloseReason reason);

  // In a forked child: stop using the parent's trace, without touching it.
  static void AbandonInChild();

  // Signal path: appends a Signal event through a slot reserved for signal
  // handlers; then, for a fatal signal, closes the trace (bounded wait).
  static void RecordSignal(int signo, int code, uint64_t address, bool fatal);

  // The process is about to end without exit handlers (_exit, possibly from a
  // signal handler): close the trace through the writer thread, bounded.
  // Async-signal-safe.
  static void CloseBeforeExit();

  // Events seen before activation that must not be lost if the process goes on
  // to be recorded (entropy read at start-up). Bounded; async-signal-unsafe.
  static void BufferEarly(const Event& e);

 private:
  Recorder() = default;
  static Recorder* GetSlow();
  static Recorder* Activate();
  Status Start();

  static std::atomic<Recorder*> active_;
  Settings settings_;
  Level level_ = Level::kHash;
  FingerprintPolicy fingerprint_policy_;
  FingerprintPolicy received_policy_;
  std::unique_ptr<TraceWriter> writer_;
  CommTable comms_;
  RequestTable requests_;
  std::atomic<bool> finalized_{false};
  // Who said which rank this is: 0 nobody yet, 1 the launcher or MPI, 2 NCCL
  // (with nccl_world_size_ ranks).
  std::mutex world_mu_;
  int world_from_ = 0;
  int32_t nccl_world_size_ = 0;
  std::atomic<bool> closed_{false};
};

}  // namespace replay
