// session.h: the re-run session, the preload's side of `replay rerun`.
//
// A process started by `replay rerun` carries a RerunRequest in its
// environment (replay/rerun_state.h). When the preload loads it reads the
// request once (Detect); from then on every family of intercepted calls (MPI,
// NCCL, CUDA, entropy and seeds, marks) asks Active() whether to serve calls
// from the recording instead of recording them, and serves them through the
// session: the oracle over this rank's events, the communicators and requests
// the re-run has made, the fingerprint policy of the recording, the stop point
// (--stop-at), the state file shared with the command, and the way a re-run
// stops (Stop). What each family answers is in interpose/<family>_rerun.cpp.
//
// Re-running one rank alone (--rank R): every call is answered from rank R's
// recording; the first difference stops the program. Re-running every rank
// (--all): the calls are made for real, forced to the recorded choices; a
// difference is noted (NoteDivergence) and the run goes on, since stopping one
// rank would hang the others; past the end of the recording nothing more is
// forced (LeaveRecording).
//
// The session starts on first use (Get), not when the preload loads: a process
// that never makes a served call never opens the trace.
//
// Thread safety: everything may be called from any thread. Detect runs once,
// before the program's threads; the oracle serialises Serve; the tables are
// thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "record/comm_table.h"
#include "record/fingerprint.h"
#include "record/request_table.h"
#include "replay/oracle.h"
#include "replay/rerun_state.h"

namespace replay::rerun {

using Verdict = RerunVerdict;

// Called when the preload loads: in a process of a re-run, makes forked
// children pass through (they were not recorded either).
void Detect();

namespace internal {
// 0 not decided yet, 1 this process is served, 2 it is not.
extern std::atomic<int> g_mode;
extern bool g_all;
bool Decide();
}  // namespace internal

// Whether this process re-runs a recording: one load, asked on every call.
// Decided at the first call that asks, not when the preload loads, because
// libraries' constructors (a TLS library drawing entropy as it loads) may run
// before the preload's own, and what they draw was recorded and is served.
// Only the recorded program is served (record/program_identity.h): not the
// launcher, a shell or `env` on the way to it, the helpers MPI starts (a
// singleton's daemon), a debugger, nor another program of the same
// interpreter; each of those notes itself in the not-served file. At exit a
// served program still running is recorded as having reproduced its recording.
inline bool Active() {
  int mode = internal::g_mode.load(std::memory_order_acquire);
  if (__builtin_expect(mode != 0, 1)) return mode == 1;
  return internal::Decide();
}
// Active() where it has been decided, false where not yet: asks, never decides.
inline bool KnownActive() { return internal::g_mode.load(std::memory_order_acquire) == 1; }
// Whether every rank re-runs, really communicating (--all), rather than one
// rank alone.
inline bool AllRanks() { return internal::g_all; }

class Session;

// The session, started on first use; null when it could not start (it has
// then stopped the program) or when this process does not re-run.
Session* Get();

// The session if a call has already started it, else null; never starts it
// and never allocates. For calls that must not start it: clock readings,
// which allocators and runtimes make while holding their own locks.
Session* Started();

// Stops the program: reports `message` (stderr and the state file) and exits
// with kRerunExitStopped, or, at --stop-at under a debugger, raises SIGTRAP
// first so the state can be inspected.
[[noreturn]] void Stop(Verdict verdict, const std::string& message);

class Session {
 public:
  Oracle& oracle() { return *oracle_; }
  CommTable& comms() { return comms_; }
  RequestTable& requests() { return requests_; }
  // Fingerprints as the recording took them, so that equal data gives equal hashes.
  const FingerprintPolicy& policy() const { return policy_; }
  const FingerprintPolicy& received_policy() const { return received_policy_; }
  // Whether the re-run starts from a checkpoint mark (then counters the
  // program restarts, sequence numbers and request ids, are not compared).
  bool from_mark() const { return from_mark_; }

  // This thread's number, in the order threads first make a served call.
  uint32_t ThreadNumber();

  // The next recorded call of `form` for `api` on this thread, as Oracle::Serve;
  // also the stop point, and the served index in the state file. A call the
  // recording does not have there stops the program: the recording ended
  // (kRecordingEnded) or the program diverged; `call_site`, when not 0, is
  // named in the report. `check_stop` false: --stop-at does not stop here.
  ServedCall Serve(std::string_view api, CallForm form, OpKind kind, uint64_t call_site,
                   bool check_stop = true);

  // Records `first` as the last recorded event served.
  void NoteServed(const Event& first);
  // Stops the program if --stop-at is reached at the call that starts with `first`.
  void CheckStopAt(const Event& first, std::string_view api);

  // --all: notes the first way this rank departs from its recording.
  void NoteDivergence(const Event& recorded, const std::string& message);
  // --all: whether the run has left its recording (nothing more is forced).
  bool OffRecording() const { return off_.load(std::memory_order_relaxed); }
  void LeaveRecording(const std::string& why);

 private:
  friend Session* Get();
  friend void Stop(Verdict, const std::string&);
  friend void Detect();
  friend bool internal::Decide();
  Session() = default;
  void Start();
  // The outcome, into the state file.
  void Report(Verdict verdict, const std::string& message);
  static void AtExit();

  std::unique_ptr<Oracle> oracle_;
  CommTable comms_;
  RequestTable requests_;
  FingerprintPolicy policy_;
  FingerprintPolicy received_policy_;
  bool from_mark_ = false;
  int64_t stop_at_ = -1;
  RerunState* state_ = nullptr;  // shared with `replay rerun`
  std::atomic<uint32_t> next_thread_{0};
  std::atomic<bool> off_{false};
};

// "called from 0x...", for reports.
std::string Site(uint64_t call_site);

}  // namespace replay::rerun
