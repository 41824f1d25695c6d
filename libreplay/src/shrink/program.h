// program.h: a recorded job's communication as the shrinker reduces it.
//
// A Program holds every rank's events and groups the calls into units that
// can only be kept or removed together without making the job inconsistent:
// all members' calls of one collective (communicator, sequence number), both
// ends of one message (communicator, sender, receiver, message number), the
// creation of one communicator on all its members. A wait belongs to the
// operations it waits for; returns, completions, created communicators and
// errors belong to the call they follow; MPI_Init and MPI_Finalize stay.
//
// A Selection says which ranks and units to keep and which units get smaller
// counts; Materialize turns it into a consistent job of fewer ranks and
// calls: ranks renumbered densely, communicators rebuilt over the ranks that
// remain (members, sizes, ranks in them, peers, roots, per-rank counts),
// sequence numbers renumbered, a unit that names a rank no longer there
// (a message to it, a collective rooted on it) or a communicator no longer
// created left out. Values are not kept: fingerprints and payloads are
// dropped, and the job reads as recorded at level meta.
//
// A Program is immutable once loaded; const methods may be called from
// several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_header.h"
#include "replay/trace_reader.h"

namespace replay::shrink {

// One rank's events and header.
struct RankEvents {
  RankHeader header;
  std::vector<Event> events;
};

struct Unit {
  std::vector<std::pair<size_t, size_t>> calls;  // (rank index, call index) of its calls
  uint64_t comm = 0;                             // communicator its calls are on; 0: none
  std::vector<uint64_t> creates;                 // communicators it creates
  // Where it comes in the job: the smallest position of its calls among their
  // ranks' calls. Units are numbered in this order.
  uint64_t position = 0;
  // What it does, the same for the same call of another iteration: API,
  // communicator, and for messages the two world ranks.
  std::string shape;
  // Whether it has counts that can be made smaller (one above 1).
  bool scalable = false;
};

// What to keep. Sizes are those of the program's ranks and units.
struct Selection {
  std::vector<bool> ranks;
  std::vector<bool> units;
  // Units whose counts are made smaller: each count of a scaled unit (per
  // rank, for counts that grow with the communicator) becomes its place among
  // all the distinct counts of the job, 1, 2, 3, ..., so that counts equal
  // anywhere stay equal and larger ones stay larger.
  std::vector<bool> scaled;
};

// A reduced job, ready to be written as a trace or as a program.
struct Candidate {
  std::vector<int32_t> origin;     // new world rank -> world rank in the recording
  std::vector<bool> live;          // the units it has, by the program's unit index
  std::vector<RankEvents> ranks;   // by new world rank
  size_t operations = 0;           // calls in all, besides MPI_Init and MPI_Finalize
  size_t max_rank_operations = 0;  // on the busiest rank
  size_t communicators = 0;        // created ones, besides the world and self
  bool nccl = false;               // it makes NCCL calls
};

class Program {
 public:
  // Reads every rank of `trace`. Fails when a rank cannot be read or the
  // trace names no world ranks.
  static Result<Program> Load(const TraceReader& trace);

  size_t rank_count() const { return ranks_.size(); }
  int32_t world_rank(size_t rank_index) const { return ranks_[rank_index].header.rank; }
  const std::vector<Unit>& units() const { return units_; }
  const RankEvents& rank(size_t rank_index) const { return ranks_[rank_index]; }
  const JobManifest& manifest() const { return manifest_; }
  bool nccl() const { return nccl_; }

  // Keeps everything, counts as recorded.
  Selection All() const;

  Candidate Materialize(const Selection& selection) const;

 private:
  // A call of one rank: an op event (or a group bracket, for NCCL groups)
  // and the events that go with it.
  struct Call {
    size_t op = 0;                   // event index
    std::vector<size_t> events;      // with it: return, comm_create, completions, errors
    enum Role : uint8_t { kUnit, kFixed, kWait, kGroupStart, kGroupEnd } role = kUnit;
    size_t unit = 0;                 // kUnit
    std::vector<size_t> waits_for;   // kWait: call indices of the requests it waits for
    size_t partner = 0;              // group brackets: the other end
  };
  struct RankCalls {
    std::vector<Call> calls;
    std::vector<size_t> loose;  // events of no call: infos, signals
  };
  struct Comm {
    std::vector<int32_t> members;  // world ranks in communicator order; empty if not known
    bool world = false;
    bool self = false;
  };

  void Index();
  void BuildUnits();
  // World rank of communicator rank `r` of `comm`, or -1.
  int32_t WorldOf(uint64_t comm, int32_t r) const;
  // Members of `comm` in the recording; 0 when not known.
  int Size(uint64_t comm) const;
  // Its counts, per rank (as Selection::scaled says), into `out`.
  void Counts(const Unit& unit, std::set<int64_t>* out) const;

  JobManifest manifest_;
  std::vector<RankEvents> ranks_;
  std::vector<RankCalls> calls_;
  std::vector<Unit> units_;
  std::map<uint64_t, Comm> comms_;
  bool nccl_ = false;
};

// Whether an API name is NCCL's.
bool IsNcclApi(const std::string& api);

// The contiguous runs of units that repeat: a loop's iterations. Given units'
// shapes in job order, returns [begin, end) ranges of equal length, each an
// iteration of the longest periodic stretch; empty when nothing repeats.
std::vector<std::pair<size_t, size_t>> FindIterations(const std::vector<std::string>& shapes);

// Writes `candidate` as a trace directory `dir` (which must not exist), with
// `manifest` as recorded; the trace's identity is derived from the recorded one.
Status WriteCandidate(const Candidate& candidate, const JobManifest& manifest, const std::string& dir);

}  // namespace replay::shrink
