// rank_digest.h: one pass over one rank's events, keeping only what the
// cross-rank checks need.
//
// DigestRank walks a rank's events once, in index order, pairing each call
// (`op`) with its return on the same thread and each non-blocking request with
// its completion, and produces a RankDigest: one compact CollEntry per
// collective the rank entered, its point-to-point channel counts, the
// communicators it saw created, the calls it was still inside when its trace
// ends, and the facts the other checks use (errors, signals, the first NaN it
// sent, its configuration). The rank's events can be dropped afterwards; the
// digest holds no pointer into them.
//
// A digest is a plain value, built by one thread and read by any.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "replay/event.h"
#include "replay/trace_header.h"
#include "replay/trace_reader.h"
#include "trace/python_sites.h"
#include "trace/read_progress.h"

namespace replay::analysis {

// The arguments ranks must agree on for one collective, with the fields that
// may legitimately differ between ranks (a scatter's send count off the root,
// an allgatherv's own count) zeroed for the op's kind.
struct CollSignature {
  OpKind kind = OpKind::kOther;
  bool nonblocking = false;
  DataType dtype = DataType::kUnknown;
  RedOp redop = RedOp::kNone;
  DataType recv_dtype = DataType::kUnknown;
  int32_t root = -1;
  int64_t count = 0;
  int64_t recv_count = 0;
  uint64_t bytes = 0;
  uint64_t counts_hash = 0;  // per-rank counts every rank passes alike
  uint64_t api = 0;          // hash of the API name: dup and split must not match
  bool operator==(const CollSignature&) const = default;
};
uint64_t HashSignature(const CollSignature& sig);

// The result of one collective on one rank.
enum class CallState : uint8_t {
  kDone,        // returned (blocking) or completed (non-blocking)
  kStuck,       // the rank is inside it, or inside a wait for it, and never got out
  kInProgress,  // as kStuck, but for less than the minimum wait
  kPending,     // non-blocking, never completed, and the rank is not waiting for it
};

struct CollEntry {
  uint64_t comm = 0;
  uint64_t seq = 0;
  CollSignature sig;
  uint64_t sig_hash = 0;
  // The signature differs from this rank's previous call from the same call
  // site: the likelier culprit of a tie.
  bool sig_changed = false;
  CallState state = CallState::kDone;
  bool blocking = true;
  bool has_out = false;
  uint64_t out_hash = 0;      // received fingerprint (a bcast root: what it sent)
  uint16_t api = 0;           // index into the rank's API table
  uint64_t call_site = 0;
  int64_t enter_ns = 0;       // rank-relative time of the call
  int64_t done_ns = -1;       // return or completion; -1 never
  // The previous blocking collective of this rank on another communicator
  // (with two or more members): the order checks compare it across ranks.
  uint64_t prev_comm = 0;
  uint64_t prev_seq = 0;
};

// A collective captured into a CUDA graph: it runs on the GPU at each launch of
// an executable graph made from that graph, not when it was called.
struct CapturedColl {
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint16_t api = 0;
  uint64_t call_site = 0;
  int64_t enter_ns = 0;       // the call, during the capture
  uint64_t launches = 0;      // successful launches of executable graphs holding it
};

// A communicator as one member saw it created.
struct CommRecord {
  uint64_t id = 0;
  uint64_t parent = 0;
  std::string api;
  uint64_t parent_seq = 0;
  int64_t color = 0;
  int64_t key = 0;
  int32_t size = 0;
  int32_t rank = -1;
  uint16_t flags = 0;
  int32_t device = -1;
  std::vector<int32_t> members;  // world ranks
};

// The communicator a commCreate event announces, as `header`'s rank saw it.
// A size, rank or member list no job has (a damaged trace) is left out (size
// and rank -1, no members), and `*damaged` is set when given.
CommRecord CommRecordOf(const Event& e, const RankHeader& header, bool* damaged = nullptr);

// Messages between this rank and one peer on one communicator, one direction.
struct P2pChannel {
  uint64_t comm = 0;
  int32_t peer = -1;      // world rank of the other side (comm rank if unknown)
  bool send = true;       // this rank sends (false: receives)
  uint64_t count = 0;     // messages sent / matched receives
  std::unordered_map<int32_t, uint64_t> by_tag;  // the same, per (matched) tag
};

// A call the rank is inside of when its trace ends (or a request it waits for).
struct OpenCall {
  uint16_t api = 0;
  OpKind kind = OpKind::kOther;
  uint64_t comm = 0;
  uint64_t seq = 0;
  int32_t peer = kNoPeer;     // world rank for point-to-point; kAnySource
  int32_t tag = 0;
  uint64_t peer_seq = 0;      // the message number it expects or sends
  bool nonblocking = false;
  bool is_send = false;
  int64_t enter_ns = 0;
  uint64_t call_site = 0;
};

struct BlockedCall {
  OpenCall call;                  // the call the thread is inside
  std::vector<OpenCall> waits_for;  // a wait's incomplete requests
  bool stuck = true;              // false: in progress for less than the minimum wait
  bool enqueued = false;          // the call returned; the work it enqueued never completed
};

struct ErrorRecord {
  ErrorSource source = ErrorSource::kMpi;
  int32_t code = 0;
  uint64_t comm = 0;
  std::string message;
  int64_t time_ns = 0;
  uint64_t call_site = 0;
  std::optional<OpenCall> after;  // the call it followed
};

struct NanOrigin {
  uint64_t comm = 0;
  uint64_t seq = 0;           // 0 for point-to-point
  int32_t peer = kNoPeer;     // point-to-point: world rank sent to
  uint16_t api = 0;
  uint32_t nan = 0;
  uint32_t inf = 0;
  int64_t time_ns = 0;
  uint64_t call_site = 0;
  std::string mark;           // the last mark before it, "checkpoint=4"
  // Some of what the rank had received by then was counted on its sample only
  // (REPLAY_NAN_SCAN=sent): a NaN it received may have gone unseen.
  bool after_sampled_receive = false;
};

struct RankDigest {
  int32_t rank = -1;
  std::string dir;
  RankStatus status = RankStatus::kSalvaged;
  RankHeader header;
  uint64_t events = 0;
  uint64_t dropped = 0;
  uint64_t unrecorded = 0;  // made after its recording stopped, or with no room
  std::string header_problem;  // why its header could not be read; empty when it was
  std::vector<std::string> payload_damage;  // damaged regions of its payloads (received bytes)
  std::vector<uint64_t> payload_refs;        // the payloads its events name (level data), while it is read
  uint64_t missing = 0;
  uint64_t damaged = 0;  // events holding values no recorder writes, read in part
  int64_t first_ns = 0, last_ns = 0;  // rank-relative times of its first and last event

  std::vector<CollEntry> collectives;   // moved out when merged
  uint64_t blocking_done = 0;           // blocking collectives on shared communicators it finished
  std::vector<CommRecord> comms;
  std::vector<P2pChannel> channels;
  std::unordered_map<uint64_t, uint64_t> last_seq;  // comm -> highest seq entered
  std::vector<BlockedCall> blocked;     // one per thread inside a call
  std::optional<OpenCall> last_call;    // the last call it made
  bool last_call_returned = true;
  int fatal_signal = 0;
  uint64_t signal_address = 0;
  int64_t signal_ns = 0;
  std::vector<ErrorRecord> errors;
  bool aborted = false;
  bool mpi_init = false;      // it entered MPI_Init
  bool mpi_finalize = false;  // it entered MPI_Finalize
  std::optional<NanOrigin> nan_origin;
  // The first NaN/Inf it sent into each communicator's collectives and to
  // each peer, received or not before: what could have reached the others.
  std::vector<NanOrigin> nan_sent;
  // The first operation whose result held NaN/Inf while nothing it was given
  // had been fingerprinted (an in-place operation NCCL reported to its
  // profiler after it ran), before this rank received or sent any otherwise.
  std::optional<NanOrigin> nan_received;
  std::string last_mark;

  // Control flow: how often each pair of consecutive calls of one thread (by
  // call site and API) occurred, and the pairs among this rank's last calls.
  std::unordered_map<uint64_t, uint32_t> transitions;
  std::vector<uint64_t> recent_transitions;

  std::vector<std::pair<std::string, std::string>> info;  // mpi.* facts
  std::unordered_map<uint64_t, PythonSite> python_sites;  // by id (trace/python_sites.h)

  std::vector<CapturedColl> captured;   // collectives captured into CUDA graphs, in call order

  // Absolute wall-clock time of a rank-relative time.
  int64_t Abs(int64_t rank_ns) const { return header.start_realtime_ns + rank_ns; }
  // The API name of index `api`.
  std::string Api(uint16_t api) const { return header.ApiName(api); }
  // It closed its trace at the end of its program (finalize or exit), not
  // killed, crashed, aborted or still running.
  bool FinishedCleanly() const {
    return status == RankStatus::kComplete && fatal_signal == 0 && !aborted &&
           (header.close_reason == CloseReason::kFinalize || header.close_reason == CloseReason::kExit);
  }
};

struct DigestOptions {
  int64_t now_realtime_ns = 0;  // the wall clock at the start of the check
  // A call in progress for less (until now, the rank's death or its trace's
  // close) is not stuck: a job stopped while healthy is not a hang.
  int64_t min_wait_ns = 0;
  ProgressTally* progress = nullptr;  // told of the events read, when set
  // When set, collectives the rank is done with are handed over as the walk
  // goes, kFlushCollectives or so at a time, instead of all kept to the end:
  // `check` merges them into its index at once, so a digest holds few of a
  // long rank's collectives. `flush` may take them (it is given a copy it owns).
  std::function<void(std::vector<CollEntry>&)> flush;
};
inline constexpr size_t kFlushCollectives = 1 << 16;

RankDigest DigestRank(const RankReader& reader, const DigestOptions& options);

}  // namespace replay::analysis
