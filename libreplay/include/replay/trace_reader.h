// trace_reader.h: reads a trace directory, start here.
//
// TraceReader opens a trace directory (DIR/manifest, DIR/rank-NNNNN/...) and
// lists its ranks without reading their events. RankReader reads one rank:
// its header, every intact block of its events stream, and whatever its ring
// still holds (a rank that crashed, or one that is still running), merged into
// one list of events in index order. Damage is never fatal: a torn or corrupt
// block is skipped and reported as a TraceProblem with its offset. Opened to
// stream (ReadOptions::stream), a reader holds no events and walks them from
// the file as often as asked.
//
// Readers are immutable once opened; const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_header.h"

namespace replay {

enum class RankStatus {
  kComplete,   // closed cleanly; everything is in the events stream
  kSalvaged,   // the process died before closing; the ring was salvaged
  kRunning,    // the process is still recording (its ring is locked)
  kFailed,     // recording stopped early on an error (see header.recording_error)
};
std::string_view RankStatusName(RankStatus status);
// How a rank's recording ended, in words: "complete (finalize)", "killed by
// SIGTERM", "crashed with SIGSEGV", "killed by SIGKILL, salvaged after crash"
// (with the fatal signal it recorded, 0 for none), "still being written".
std::string RankEndText(RankStatus status, CloseReason reason, int fatal_signal);

// Something wrong with a trace that did not stop the reading.
struct TraceProblem {
  std::string file;       // path of the file concerned
  uint64_t offset = 0;    // byte offset in it, when it applies
  uint64_t length = 0;    // bytes skipped
  bool torn_tail = false; // an incomplete last block (process died or still writing)
  std::string message;
};

struct RankStats {
  uint64_t blocks = 0;
  uint64_t stored_bytes = 0;     // events stream size on disk
  uint64_t raw_bytes = 0;        // decoded block content
  uint64_t salvaged = 0;         // events recovered from the ring
  uint64_t dropped = 0;          // events the recorder lost to a full ring
  uint64_t unrecorded = 0;       // calls not recorded: after recording failed, or with no room
  uint64_t missing = 0;          // gaps in the index sequence (lost to damage)
  uint64_t payload_bytes = 0;    // payloads stream size on disk
};

// Why a rank's recording stopped early, as its header (or ring) says.
inline std::string WhyRecordingStopped(const RankHeader& h) {
  return h.recording_error.empty() ? "the recorder left no reason" : h.recording_error;
}

// The payload an event names (a receive's bytes, level data): its hash.
inline std::optional<uint64_t> NamedPayload(const Event& e) {
  if (e.kind == EventKind::kReturn && e.ret.payload_size != 0) return e.ret.payload_hash;
  if (e.kind == EventKind::kCompletion && e.completion.payload_size != 0) return e.completion.payload_hash;
  return std::nullopt;
}

struct ReadOptions {
  bool salvage_ring = true;   // read the ring of ranks that did not close cleanly
  // Leave the events where they are: Open reads the header, the ring and the
  // file, and ForEachEvent decodes the events one block at a time as it walks
  // them, so a rank of any size is read in bounded memory. events() is then
  // empty, and what decoding finds (damaged blocks, gaps) is in the walk's
  // result rather than in problems() and stats().
  bool stream = false;
};

// What a walk over a rank's events saw (RankReader::ForEachEvent).
struct EventWalk {
  uint64_t events = 0;               // events passed to the callback
  int64_t first_ns = 0, last_ns = 0; // times of the first and last of them
  RankStats stats;                   // the rank's, complete
  std::vector<TraceProblem> problems;  // the rank's, complete
};

// How far a command that reads every rank of a trace has got. Commands call
// their progress function from one thread at a time, often (every few
// thousand events): throttle what it draws.
struct ReadProgress {
  size_t ranks_done = 0;
  size_t ranks = 0;          // to read in all
  uint64_t events_done = 0;
  uint64_t events = 0;       // in all, as the ranks' headers say; 0 when a rank's count is not known
};
using ReadProgressFn = std::function<void(const ReadProgress&)>;

class RankReader {
 public:
  // Opens the rank directory `dir` (DIR/rank-00003). Fails only when nothing of
  // the rank can be read at all.
  static Result<std::unique_ptr<RankReader>> Open(const std::string& dir,
                                                  const ReadOptions& options = {});
  // Whether a process is still recording into the rank directory `dir`.
  static bool IsRunning(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The header; when its file is damaged, a best-effort one (rank from the
  // directory name) and a problem saying so.
  const RankHeader& header() const { return header_; }
  bool header_ok() const { return header_ok_; }
  // For a rank whose header is unreadable: the recorder's API names, as
  // another rank's header (`from`) has them, so its calls keep their names.
  void AdoptApiNames(const std::vector<std::string>& names, const std::string& from);
  // World rank: from the header, else from the "mpi.world_rank" info event, else
  // from the directory name; -1 if none says.
  int32_t rank() const { return rank_; }
  RankStatus status() const { return status_; }
  // All events, by index, without duplicates; empty when opened to stream.
  const std::vector<Event>& events() const { return events_; }
  // Calls `fn` with every event, by index, without duplicates, until it
  // returns false. Opened to stream, each walk decodes the events stream
  // again, one block at a time; otherwise it walks events().
  Result<EventWalk> ForEachEvent(const std::function<bool(const Event&)>& fn) const;
  bool streaming() const { return stream_ != nullptr; }
  const std::vector<TraceProblem>& problems() const { return problems_; }
  const RankStats& stats() const { return stats_; }
  // The bytes stored under `hash` in the payloads stream; kNotFound if absent.
  Result<std::string> Payload(uint64_t hash) const;
  // Whether the payloads streams hold a payload stored under `hash`.
  bool HasPayload(uint64_t hash) const;
  // What is wrong with the received bytes (level data), one line each:
  // damaged regions, and payloads that the events name (`named`: their
  // hashes, as a walk collected them; the rank's own events when read whole)
  // but the streams lack. Not what a rank that did not close may leave: a
  // payload torn at its end, or named ones where it kept only a window.
  std::vector<std::string> ReceivedBytesDamage(std::vector<uint64_t> named = {}) const;
  bool has_payloads() const;
  // Damage in the payloads streams (received bytes, level data): every block's
  // checksum is verified. Empty when they are whole, or when there are none.
  std::vector<TraceProblem> PayloadProblems() const;

 private:
  struct Stream;  // the events file and salvaged ring of a rank opened to stream

  RankReader() = default;
  Status Load(const ReadOptions& options);
  void ReserveEvents(std::span<const uint8_t> events_stream, uint64_t offset);
  Status IndexPayloads() const;

  std::string dir_;
  RankHeader header_;
  bool header_ok_ = false;
  int32_t rank_ = -1;
  RankStatus status_ = RankStatus::kSalvaged;
  std::vector<Event> events_;
  std::shared_ptr<const Stream> stream_;
  std::vector<TraceProblem> problems_;
  RankStats stats_;
  // Payload index: hash -> offsets of its block(s), built on first use.
  mutable bool payloads_indexed_ = false;
  mutable std::multimap<uint64_t, std::pair<size_t, uint64_t>> payload_blocks_;  // -> (file, offset)
  mutable std::vector<std::string> payload_files_;
  mutable std::vector<TraceProblem> payload_problems_;  // what indexing them found damaged
};

struct RankEntry {
  std::string dir;       // full path of the rank directory
  std::string name;      // rank-00003
  int32_t rank = -1;     // from the header (or name); -1 unknown
  bool header_ok = false;
  RankHeader header;     // as far as it could be read
};

class TraceReader {
 public:
  // Opens a trace directory. Fails with a message saying what to do when `dir`
  // is missing, empty, not a trace, or of a newer format.
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The manifest, if the directory has a readable one.
  const std::optional<JobManifest>& manifest() const { return manifest_; }
  // Ranks in rank order (unknown ranks last, by directory name).
  const std::vector<RankEntry>& ranks() const { return ranks_; }
  // Problems found while listing (a foreign rank directory, a damaged manifest).
  const std::vector<TraceProblem>& problems() const { return problems_; }

  Result<std::unique_ptr<RankReader>> OpenRank(size_t i, const ReadOptions& options = {}) const;
  // The entry with world rank `rank`, or null.
  const RankEntry* FindRank(int32_t rank) const;

 private:
  std::string dir_;
  std::optional<JobManifest> manifest_;
  std::vector<RankEntry> ranks_;
  std::vector<TraceProblem> problems_;
};

}  // namespace replay
