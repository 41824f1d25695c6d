// oracle.h: serves one rank's recording back to a re-run of its program.
//
// `replay rerun --rank R` runs the program alone; every communication call it
// makes is answered from rank R's events instead of from peers. The oracle
// walks those events call by call, per thread: a call asks for the next
// recorded call of its form (an operation, a test, an entropy draw, a seed, a
// mark) and gets the group of events the recording has for it (op, return,
// test outcomes, completions, communicators created). The caller compares
// arguments and fingerprints and fills buffers from the payloads.
//
// Re-running from a checkpoint mark (--from-mark NAME=VALUE): the program
// starts again, creates its communicators again and may draw start-up entropy
// again, then resumes where the mark was taken. Initialisation, communicator
// creation and, until the first operation after the mark, entropy and seeds are
// served from the start of the recording; everything else from the mark on.
//
// Thread safety: Serve may be called from several threads (a lock serialises
// it); the returned events live as long as the oracle.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_header.h"
#include "replay/trace_reader.h"

namespace replay {

struct OracleOptions {
  std::string trace_dir;
  int32_t rank = 0;
  std::string from_mark;  // "NAME=VALUE", or empty: from the start
};

// What a call is, for finding its recording.
enum class CallForm {
  kOp,       // has an op event, then its return (blocking and non-blocking calls)
  kTest,     // a test/probe without an op: one test event, then completions
  kEntropy,
  kSeed,
  kMark,
};

struct ServedCall {
  const Event* first = nullptr;   // the op, test, entropy, seed or mark event
  const Event* ret = nullptr;     // kOp: the return, null if the recording ended inside the call
  std::vector<const Event*> more_ops;     // further ops of the same call (MPI_Startall: one per request)
  std::vector<const Event*> tests;        // test outcomes within the call
  std::vector<const Event*> completions;  // requests the call completed
  std::vector<const Event*> created;      // communicators the call created
  std::vector<const Event*> errors;
  std::vector<const Event*> infos;        // facts recorded with its return (a distributed graph's neighbours)
};

// How the recording of a thread ends, once it has been served entirely.
struct RecordingEnd {
  bool ended = false;             // nothing more was recorded on this thread
  const Event* last = nullptr;    // the last event served
  std::string how;                // "exited normally", "killed by SIGSEGV", ...
};

class Oracle {
 public:
  static Result<std::unique_ptr<Oracle>> Open(const OracleOptions& options);

  const RankHeader& header() const { return rank_->header(); }
  const std::vector<Event>& events() const { return rank_->events(); }
  int32_t world_rank() const { return world_rank_; }
  int32_t world_size() const { return world_size_; }
  Level level() const { return header().level; }
  // The recorded name of the API an event names.
  std::string ApiOf(const Event& e) const;

  // The next recorded call of `form` on `thread` (threads numbered in the order
  // they first make a served call, as the recorder numbered them). `api` is the
  // name the program called and `kind` its operation kind (kOp only). A
  // different call at that point is a kInvalidArgument Status describing both;
  // the recording having ended there is kUnavailable. Recorded clock
  // readings the program does not make again are passed by.
  Result<ServedCall> Serve(uint32_t thread, std::string_view api, CallForm form,
                           OpKind kind = OpKind::kOther);

  // The clock reading recorded next on `thread`, served; null where the next
  // recorded call is not one (the program reads the clock more often than it
  // did: the reading is its own) or the recording has ended. Never allocates:
  // allocators and runtimes read the clock while holding their own locks.
  const Event* ServeClock(uint32_t thread);

  // The recorded call `thread` is to make next (clock readings passed by), or
  // null where its recording has ended: where a re-run that departs from the
  // recording departs.
  const Event* Upcoming(uint32_t thread);

  // The completion of the recorded request `request`, or null if it never completed.
  const Event* FindCompletion(uint64_t request) const;

  // Payload bytes for a return or completion.
  Result<std::string> Payload(uint64_t hash) const { return rank_->Payload(hash); }

  // Index of the last event served on any thread, -1 before the first.
  int64_t last_index() const { return last_index_; }
  // How the recording ends (for the report when the program goes past it).
  std::string HowRecordingEnds() const;
  // A one-line description of a recorded call for reports.
  std::string Describe(const Event& e) const;
  // Whether `e` starts a call (an op, test, entropy draw, seed or mark) rather
  // than continuing one.
  static bool StartsCall(const Event& e);

 private:
  Oracle() = default;
  struct Cursor {
    std::vector<size_t> events;  // indices into events() of this recorded thread
    size_t next = 0;
  };
  Result<ServedCall> ServeFrom(Cursor& cursor, std::string_view api, CallForm form);

  std::unique_ptr<RankReader> rank_;
  int32_t world_rank_ = -1;
  int32_t world_size_ = -1;
  std::mutex mu_;
  std::vector<uint32_t> thread_ids_;   // recorded thread numbers in order of first event
  std::vector<Cursor> main_;           // per recorded thread
  std::vector<Cursor> setup_;          // --from-mark: from the start, for set-up calls
  std::unordered_map<uint64_t, size_t> completions_;  // request id -> index into events()
  bool from_mark_ = false;
  bool in_setup_ = false;
  int64_t last_index_ = -1;
};

}  // namespace replay
