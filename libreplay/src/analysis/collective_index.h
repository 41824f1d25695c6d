// collective_index.h: every collective of a job, matched across ranks by
// (communicator identity, sequence number), as compact summaries.
//
// Ranks are merged one at a time, in any order; a summary holds counts and the
// few distinct values seen (signatures, output fingerprints, which collective
// came before), never one record per rank, so the index grows with the
// collectives of the job and not with its ranks times its events.
//
// The common case costs no set of ranks at all: the first value seen is kept
// with a count, and only values after it (a mismatch, a differing result)
// keep the ranks that had them. Who entered a collective need not be stored
// either: a rank numbers the collectives of a communicator 1, 2, 3, ..., so it
// entered (comm, seq) exactly when its last sequence number on comm is at
// least seq (RankDigest::last_seq). The checks rebuild the full sets where
// they report something (checks.cpp, Expand).
//
// Not synchronised: the caller serialises Merge calls; reads after the last
// Merge may come from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/rank_digest.h"
#include "analysis/rank_set.h"

namespace replay::analysis {

struct CollKey {
  uint64_t comm = 0;
  uint64_t seq = 0;
  bool operator==(const CollKey&) const = default;
};

// Ranks that called one collective the same way.
struct SigGroup {
  CollSignature sig;
  uint64_t hash = 0;
  uint32_t count = 0;
  bool changed = false;        // some rank's call site did something else the time before
  int32_t first_rank = std::numeric_limits<int32_t>::max();
  uint16_t api = 0;            // index into first_rank's API table
  uint64_t call_site = 0;      // on first_rank
  RankSet ranks;               // kept for the groups after the first only
  std::string api_name;        // filled where reported (checks.cpp, Expand)
};

struct OutGroup {
  uint64_t hash = 0;
  uint32_t count = 0;
  RankSet ranks;               // after the first only
};

// Ranks whose previous blocking collective on another communicator was (comm, seq).
struct PredClaim {
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint32_t count = 0;
  RankSet ranks;               // after the first only
};

// The first (in a healthy job, the only) signature of a collective, as the
// index keeps it: the signature itself is interned (CollectiveIndex::Signature).
struct SigCount {
  uint64_t hash = 0;
  uint32_t count = 0;
  uint16_t api = 0;            // index into first_rank's API table
  bool changed = false;        // some rank's call site did something else the time before
  int32_t first_rank = std::numeric_limits<int32_t>::max();
  uint64_t call_site = 0;      // on first_rank
};

// What only a collective that went wrong has: it is allocated for those alone.
struct CollAnomalies {
  std::vector<SigGroup> other_sigs;
  RankSet stuck;                     // entered and never got out
  RankSet in_progress;               // in it for less than the minimum wait
  RankSet pending;                   // non-blocking, not completed, not waited for
  std::vector<OutGroup> other_outs;
  std::vector<PredClaim> other_preds;
};

// One collective across ranks, in about 140 bytes: a job holds one per
// collective it made, so this is most of what `check` holds.
struct CollSummary {
  uint32_t entered = 0;              // ranks that entered it; 0: no rank did
  uint32_t timed = 0;                // ranks with a duration
  SigCount sig;                      // the first call signature seen
  struct {
    uint64_t hash = 0;
    uint32_t count = 0;
  } out;                             // output fingerprints, where outputs must agree
  struct {
    uint64_t comm = 0;
    uint64_t seq = 0;
    uint32_t count = 0;
  } pred;                            // the first predecessor claim (PredClaim)
  bool blocking = false;             // some rank called it blocking
  int32_t first_rank = -1;
  int32_t min1_rank = -1;
  int64_t first_enter_abs = std::numeric_limits<int64_t>::max();
  int64_t last_enter_abs = std::numeric_limits<int64_t>::min();
  // Time spent inside the call by the two ranks that spent least: the last
  // to arrive spends least, and the gap is how long it kept the others.
  int64_t min1_ns = std::numeric_limits<int64_t>::max();
  int64_t min2_ns = std::numeric_limits<int64_t>::max();
  std::unique_ptr<CollAnomalies> anomalies;  // null in a healthy collective

  const std::vector<SigGroup>& other_sigs() const;  // empty in a healthy job
  const RankSet& stuck() const;
  const RankSet& in_progress() const;
  const RankSet& pending() const;
  const std::vector<OutGroup>& other_outs() const;
  const std::vector<PredClaim>& other_preds() const;
  CollAnomalies& Anomalies();  // made on first use
  size_t sig_groups() const { return (sig.count > 0 ? 1 : 0) + other_sigs().size(); }
};

// Whether ranks must all receive the same bytes from a collective of `kind`.
bool OutputsMustAgree(OpKind kind);

class CollectiveIndex {
 public:
  // Takes `d.collectives` (leaving it empty).
  void Merge(RankDigest& d);
  // Merges some of rank `rank`'s collectives, whose rank-relative times count
  // from `start_realtime_ns` (a digest taken in parts, DigestOptions::flush).
  void Merge(const std::vector<CollEntry>& entries, int32_t rank, int64_t start_realtime_ns);
  // The signature with hash `hash` of some collective merged.
  const CollSignature& Signature(uint64_t hash) const;

  // Null when no rank entered (comm, seq).
  const CollSummary* Find(uint64_t comm, uint64_t seq) const;
  // Every collective some rank entered, by communicator identity, then seq.
  std::vector<CollKey> SortedKeys() const;
  size_t size() const { return count_; }

 private:
  // Sequence numbers are dense from 1 on each communicator: a vector per
  // communicator indexed by seq - 1 is both smaller and faster than a hash of
  // (comm, seq). Numbers far beyond the last one (a damaged trace) go aside.
  struct PerComm {
    std::deque<CollSummary> by_seq;  // a deque grows without moving what it holds
    std::unordered_map<uint64_t, CollSummary> far;
  };
  static constexpr uint64_t kMaxGap = 1u << 20;
  CollSummary& At(uint64_t comm, uint64_t seq);

  std::unordered_map<uint64_t, PerComm> comms_;
  std::unordered_map<uint64_t, CollSignature> signatures_;  // by hash: jobs repeat a few
  size_t count_ = 0;
};

}  // namespace replay::analysis
