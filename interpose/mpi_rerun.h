// mpi_rerun.h: the preload in re-run mode (`replay rerun --rank R`).
//
// The program runs as one process, with no peers. MPI is really initialised
// (as a singleton, for datatypes, operations and the like), but every
// communication call is answered from rank R's recording: WORLD has the
// recorded rank and size, communicators have their recorded identities and
// sizes, receive buffers get the recorded bytes, statuses the recorded sources
// and tags, tests and wait-any/some the recorded outcomes, entropy the recorded
// bytes. Each call is first checked against the recording (the call itself,
// its arguments, the fingerprint of what it sends); the first difference stops
// the program with a report, as does reaching the end of the recording or the
// requested event.
//
// The session is configured by environment variables `replay rerun` sets:
// REPLAY_MODE=rerun, REPLAY_RERUN_TRACE, REPLAY_RERUN_RANK,
// REPLAY_RERUN_STOP_AT, REPLAY_RERUN_FROM_MARK, REPLAY_RERUN_STATE.
//
// Thread safety: Serve calls from several threads are serialised by the oracle;
// the session's tables are themselves thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "replay/oracle.h"

namespace replay::interpose {
namespace mpi {
struct CallContext;
}

namespace rerun {

// Whether this process re-runs a recording (read once, when the preload loads).
bool Active();

// Points a call's context at the session, starting it on first use. False when
// the session could not start (it has then already stopped the program).
bool Bind(mpi::CallContext* ctx);

// Whether every rank re-runs, really communicating (--all), rather than one
// rank alone.
bool AllRanks();

// --all: notes the first way this rank departs from its recording (the run
// goes on: stopping one rank would hang the others).
void NoteDivergence(const Event& recorded, const std::string& message);

// Whether the run has already left its recording (nothing more is forced).
bool OffRecording();
void LeaveRecording(const std::string& why);

// Whether the re-run starts from a checkpoint mark.
bool FromMark();

// Starts the session if needed; false when it could not start.
bool Ready();

// Serves an entropy read of up to `len` bytes into `buf` from the recording;
// returns what the recorded call returned. Stops the program at a divergence.
int64_t ServeEntropy(std::string_view api, void* buf, size_t len, uint64_t call_site);
// Serves a seed: the value the recording has for it.
uint64_t ServeSeed(std::string_view api, uint64_t value, uint64_t call_site);
// Checks a mark against the recording.
void ServeMark(std::string_view name, int64_t value, uint64_t call_site);

// The session's oracle; Active() and a successful Bind() first.
Oracle& oracle();

// This thread's number, in the order threads first make a served call.
uint32_t ThreadNumber();

// The WORLD communicator handle and its recorded identity, once MPI_Init ran.
void NoteServed(const Event& first);

enum class Verdict : int32_t {
  kRunning = 0,
  kReproduced = 1,     // the program finished consistent with the recording
  kDiverged = 2,       // the program did something the recording did not
  kRecordingEnded = 3, // the program reached the point where the recording stops
  kStoppedAt = 4,      // --stop-at reached
  kFailed = 5,         // the re-run could not be set up (bad trace, missing payloads)
};

// Stops the program: reports `message` (stderr and the state file) and exits,
// or, under a debugger, raises SIGTRAP first so the state can be inspected.
[[noreturn]] void Stop(Verdict verdict, const std::string& message);

// Checks --stop-at before serving the call that starts with `first`.
void CheckStopAt(const Event& first, std::string_view api);

}  // namespace rerun
}  // namespace replay::interpose
