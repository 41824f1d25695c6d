// timeline.h: a trace as operations in time, for the views that draw it (the
// Perfetto export, the HTML report).
//
// Each rank's events become operations from call to completion: a blocking
// call ends when it returns, a non-blocking one when the wait or test that
// observed it completed it; a call that never ended is open (end_ns < 0).
// Point-to-point operations carry world ranks on both sides and the channel
// sequence number, collectives their (communicator, seq), so views can draw
// which operations of different ranks belong together. Marks, errors and
// signals come along as instants. Communicators are named by lineage, as
// `replay check` names them.
//
// Times are absolute wall-clock nanoseconds (rank start + event time), so
// ranks on one host line up; ranks on different hosts are as far apart as
// their clocks.
//
// BuildTimeline reads every chosen rank once; the result is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "replay/check.h"
#include "replay/event.h"
#include "replay/status.h"
#include "replay/trace_reader.h"
#include "trace/python_sites.h"

namespace replay::interop {

struct TimelineOp {
  uint64_t index = 0;       // event index of the call on its rank
  uint64_t ordinal = 0;     // its place among the rank's operations, in call order from 0
  uint32_t thread = 0;
  uint32_t api = 0;         // into Timeline::apis
  OpKind kind = OpKind::kOther;
  bool nonblocking = false;
  bool is_send = false;
  uint64_t comm = 0;
  uint64_t seq = 0;         // collectives: sequence number on comm
  int32_t peer = kNoPeer;   // point-to-point: the other side's world rank, when known
  int32_t tag = 0;
  uint64_t peer_seq = 0;    // point-to-point: number on its channel, when known
  int64_t count = 0;
  DataType dtype = DataType::kUnknown;
  uint64_t bytes = 0;
  int64_t recv_count = 0;   // receive count where it differs from the send side
  int32_t root = -1;
  int32_t rc = 0;
  int64_t start_ns = 0;
  int64_t return_ns = -1;   // the call returned; -1 never
  int64_t end_ns = -1;      // completed (returned, for blocking calls); -1 never
  uint64_t call_site = 0;   // as recorded (trace/python_sites.h)
  uint32_t group = 0;       // the NCCL group it was enqueued in; 0 none

  bool collective() const { return IsCollective(kind) && comm != 0 && seq != 0; }
  bool point_to_point() const {
    return kind == OpKind::kSend || kind == OpKind::kRecv || kind == OpKind::kSendrecv || kind == OpKind::kMrecv;
  }
};

struct TimelineInstant {
  enum class Kind { kMark, kError, kSignal };
  Kind kind = Kind::kMark;
  uint32_t thread = 0;
  int64_t time_ns = 0;
  std::string text;  // "checkpoint=3", the error message, "SIGSEGV"
};

struct TimelineComm {
  std::string name;              // by lineage: "WORLD", "dup(WORLD)"
  std::vector<int32_t> members;  // world ranks, in communicator-rank order
};

struct RankTimeline {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string status;   // complete, salvaged, running, failed
  int64_t start_ns = 0;
  int64_t end_ns = 0;   // last thing known of the rank
  std::vector<TimelineOp> ops;  // in call order: all of them, or those TimelineOptions::keep took
  uint64_t op_count = 0;        // operations the rank made, held or not
  std::vector<TimelineInstant> instants;
  std::vector<uint32_t> threads;  // that made calls, ascending
  RankHeader header;              // modules and versions, to resolve call sites and say what ran
  std::unordered_map<uint64_t, PythonSite> python_sites;  // by id
  // Operations a thread was inside when the trace ends: it waited for them
  // (a wait for a request counts the requests' operations).
  std::vector<size_t> waited;     // into ops
  // Its communicators, named from its own creations (ScanRank).
  std::map<uint64_t, TimelineComm> comms;
};


struct Timeline {
  std::vector<RankTimeline> ranks;  // by rank
  std::vector<std::string> apis;    // interned API names
  std::map<uint64_t, TimelineComm> comms;
  int64_t start_ns = 0;             // earliest rank start
  int64_t end_ns = 0;
  std::vector<std::string> notes;   // ranks that could not be read

  std::string CommName(uint64_t comm) const;
};

// Whether a view holds operation `ordinal` (call order from 0) of world rank `rank`.
using TimelineKeep = std::function<bool(int32_t rank, uint64_t ordinal)>;
// An operation of world rank `rank` handed over when it ended (or, never
// ended, when its rank's walk did): ops of one rank come in the order they
// ended, not in call order.
using TimelineSink = std::function<void(int32_t rank, const TimelineOp& op)>;

struct TimelineOptions {
  std::vector<int32_t> ranks;  // world ranks; empty: all
  ReadProgressFn progress;  // how far reading the ranks has got
  // When set, each rank holds only the operations this takes (RankTimeline::op_count
  // still counts them all), so a view of parts of a big trace holds only those.
  TimelineKeep keep;
  // When set, every operation goes here instead and none is held: the light
  // first pass of a view that then builds only what it shows.
  TimelineSink sink;
};

Result<Timeline> BuildTimeline(const TraceReader& trace, const TimelineOptions& options = {});

// Walks the ranks `options` chooses again, handing every operation to
// `options.sink` (which must be set) as BuildTimeline did, with API names
// interned in `apis` (the timeline's, so that the ids agree).
Status ScanTimelineOps(const TraceReader& trace, const TimelineOptions& options, std::vector<std::string>* apis);


// One rank alone, walked once (a reader opened to stream holds nothing of it
// after): its operations, with API names interned in `apis`, and its
// communicators named from the rank's own creations, as every member names
// them. For the views that write a rank at a time.
RankTimeline ScanRank(const RankReader& reader, std::vector<std::string>* apis);

// An operation of a timeline: indexes into Timeline::ranks and that rank's ops.
struct OpRef {
  size_t rank = 0;
  size_t op = 0;
  auto operator<=>(const OpRef&) const = default;
};

// The operations `finding` is about, by rank then call order: every rank's
// call of its collective; for errors, its ranks' calls that failed; for
// unmatched messages, its ranks' point-to-point calls that never completed.
// Empty for findings about the job as a whole.
std::vector<OpRef> FindingOps(const Timeline& timeline, const Finding& finding);
// Whether operation `op` of world rank `rank` is one of those.
bool FindingIsAbout(const Finding& finding, int32_t rank, const TimelineOp& op);

// When `finding` happened on the timeline (absolute nanoseconds): the first
// call of its collective on any rank; for errors, the first error, signal or
// failed call of its ranks; for unmatched messages, the first of its ranks'
// point-to-point calls that never completed. Nothing for findings that are
// about the job as a whole (configuration, stragglers, devices) or that the
// timeline holds nothing of.
std::optional<int64_t> FindingTime(const Timeline& timeline, const Finding& finding);
// The same for a timeline that holds no operations: `earliest_op` is the
// earliest start among those FindingIsAbout, found by the caller on the way.
std::optional<int64_t> FindingTime(const Timeline& timeline, const Finding& finding,
                                   std::optional<int64_t> earliest_op);

// A key equal on the two sides of one message: (comm, sender, receiver, seq).
struct MessageKey {
  uint64_t comm;
  int32_t from;
  int32_t to;
  uint64_t seq;
  auto operator<=>(const MessageKey&) const = default;
};

}  // namespace replay::interop
