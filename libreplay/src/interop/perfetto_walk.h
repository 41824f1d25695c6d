// perfetto_walk.h: what the Perfetto writers share (replay/perfetto.h): one
// walk over a trace's timeline that decides the picture and hands each piece
// of it to a sink, which only encodes it (Trace Event JSON, Perfetto's
// protobuf).
//
// The walk decides everything both formats show: which operations and
// instants a window keeps, the tracks of each rank (a thread's calls outside
// communicators, each communicator) and the lane of a track each operation
// goes on so that slices of one lane never overlap, the names, categories and
// arguments of slices, and the arrows that join the operations of one
// collective across ranks and each message's send to its receive. Arrows are
// matched before anything is handed out, so a sink that attaches them to
// slices (protobuf) knows each slice's arrows when it gets the slice, and one
// that writes them apart (JSON) gets them again at the end.
//
// Memory stays far below the trace's decoded size: planning reads the ranks
// once without holding their operations (a few numbers per operation: its
// lane, and per collective or message the ends of its arrow), and the walk
// reads each rank again, handing each operation out as it is read.
//
// Order of the calls: for each rank, BeginRank, then its slices in the order
// they ended (those that never ended last), then its instants; after every
// rank, each arrow. Every pointer and span a sink is given is valid during
// the call only.
//
// Thread safety: a walk uses its plan and sink from the calling thread alone.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "interop/timeline.h"
#include "replay/perfetto.h"
#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay::interop {

// A rank's track: one lane of a thread's calls outside communicators or of a
// communicator. Ids count from 1 per rank in the order tracks are laid out:
// threads, then communicators by name, a track's lanes one after another;
// that is also the order to show them in.
struct PerfettoTrack {
  int32_t id = 0;
  std::string name;  // "thread 0", "WORLD", "WORLD (2)" for its second lane
};

// A value shown with a slice; the names are the JSON form's argument names.
// A string points into the slice (its communicator's name) or at a constant.
struct PerfettoArg {
  const char* name;
  std::variant<int64_t, uint64_t, double, std::string_view> value;
};

// An operation, drawn from its call to its completion (the end of its rank's
// trace if it never completed).
struct PerfettoSlice {
  const TimelineOp* op = nullptr;
  int32_t track = 0;
  std::string name;  // "MPI_Allreduce #3", "MPI_Send to 2 (never completed)"
  const char* category = "";  // collective, p2p, call
  std::string comm;           // its communicator's name; empty outside one
  int64_t start_ns = 0;       // absolute, as the timeline counts
  int64_t end_ns = 0;
  std::vector<PerfettoArg> args;
  // The arrows that start at this slice and that end at it (PerfettoArrow::id).
  std::span<const uint64_t> arrows_out;
  std::span<const uint64_t> arrows_in;
};

// One end of an arrow: where its slice was drawn.
struct PerfettoArrowEnd {
  int32_t rank = 0;
  int32_t track = 0;
  int64_t time_ns = 0;  // the slice's start, absolute
};

struct PerfettoArrow {
  uint64_t id = 0;    // from 1, in the order the arrows are handed out
  const char* name;   // "same collective", "message"
  PerfettoArrowEnd from;
  PerfettoArrowEnd to;
};

class PerfettoSink {
 public:
  virtual ~PerfettoSink() = default;
  // A rank, before anything drawn on it, with its tracks that show something
  // (all of them without a window), by id.
  virtual void BeginRank(const RankTimeline& rank, const std::vector<PerfettoTrack>& tracks) = 0;
  virtual void Slice(const RankTimeline& rank, const PerfettoSlice& slice) = 0;
  // `track` is its thread's first track; 0 when the thread has none (it made
  // no calls).
  virtual void Instant(const RankTimeline& rank, int32_t track, const TimelineInstant& instant) = 0;
  virtual void Arrow(const PerfettoArrow& arrow) = 0;
};

// One end of an arrow as the walk finds it again: the rank (into
// Timeline::ranks), the operation's ordinal there, and where it was drawn.
struct PerfettoAnchor {
  uint32_t rank = 0;
  int32_t track = 0;
  uint64_t ordinal = 0;
  int64_t time_ns = 0;
};

// Arrow ids by the ordinal of the operation they start or end at, sorted.
using PerfettoArrowIndex = std::vector<std::pair<uint64_t, uint64_t>>;

// One rank laid out.
struct PerfettoRankPlan {
  std::vector<int32_t> track;          // by ordinal: the operation's track; 0 outside the window
  std::vector<PerfettoTrack> tracks;   // by id - 1
  std::vector<bool> used;              // by track id: shows something
  std::vector<std::pair<int32_t, size_t>> instants;  // in the window: (track, into the rank's instants)
  PerfettoArrowIndex out_of;           // arrows that start at an operation
  PerfettoArrowIndex into;             // and that end at one
};

// What a walk draws: the timeline without its operations, the window resolved
// from the options, each rank's lanes and the arrows.
struct PerfettoPlan {
  const TraceReader* trace = nullptr;
  std::vector<int32_t> ranks;            // as PerfettoOptions::ranks
  Timeline timeline;                     // ranks, communicators and instants; no operations
  std::optional<PerfettoWindow> window;  // nanoseconds from timeline.start_ns
  int finding = -1;                      // the finding of options.around it is centred on
  std::vector<PerfettoRankPlan> layouts;  // as timeline.ranks
  struct Joined {
    PerfettoAnchor from;
    PerfettoAnchor to;
    const char* name;
  };
  std::vector<Joined> arrows;  // id = index + 1; empty without PerfettoOptions::flows
  uint64_t left_out = 0;       // operations outside the window
};

// Reads the ranks `options` chooses and lays them out (a window around a
// finding fails with kNotFound when no finding happened at a moment). The
// plan refers to `trace`, which must outlive it.
Result<PerfettoPlan> PlanPerfetto(const TraceReader& trace, const PerfettoOptions& options);

// Reads the ranks again and hands `plan` to `sink`; the plan's layouts are
// used up. The summary counts slices, arrows, ranks and the operations left
// out by the window, and says which window; the sink's own count of what it
// wrote (`events`) is for the caller to fill in. Fails when a rank cannot be
// read again.
Result<PerfettoSummary> WalkPerfetto(PerfettoPlan& plan, PerfettoSink& sink);

}  // namespace replay::interop
