// mpi_record.h: what recording an MPI call means, by the shape of the call.
//
// Every wrapper (mpi_wrappers.cpp) fills an mpi::Call with the roles its
// arguments play, then calls Enter() before the real function and Leave(rc)
// after it. The shape decides what is recorded: an op event on entry (so a rank
// that blocks inside shows where), a ret event on return, completions for
// requests, test outcomes, communicator creation with its identity.
//
// Thread safety: a Call lives on one thread's stack; the shared state it
// touches (communicators, requests, caches) is safe for concurrent callers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "api.h"
#include "guard.h"
#include "mpi_abi.h"
#include "record/recorder.h"
#include "replay/op_shape.h"
#include "replay/oracle.h"
#include "replay/topology.h"

namespace replay::rerun {
class Session;
}  // namespace replay::rerun

namespace replay::interpose::mpi {

// A side of a call: the pieces of memory (buffer, count, datatype) it covers.
struct Piece {
  const void* buf;
  int64_t count;
  MPI_Datatype type;
};

struct Region {
  Piece one{};             // the common case, without allocation
  std::vector<Piece> many;
  bool empty() const { return one.buf == nullptr && many.empty(); }
  void Add(const void* buf, int64_t count, MPI_Datatype type) {
    if (count <= 0 || buf == nullptr) return;
    if (one.buf == nullptr && many.empty()) {
      one = Piece{buf, count, type};
      return;
    }
    if (many.empty()) many.push_back(one);
    many.push_back(Piece{buf, count, type});
  }
  template <typename F>
  void ForEach(F&& f) const {
    if (many.empty()) {
      if (one.buf != nullptr) f(one);
      return;
    }
    for (const Piece& p : many) f(p);
  }
};

// Where a call's bookkeeping lives and where its events go: the recorder's
// when recording; the re-run session's (replay/session.h) when a recording is
// being served (then events are captured, to be compared with the recorded
// ones, not written).
struct CallContext {
  CommTable* comms = nullptr;
  RequestTable* requests = nullptr;
  Level level = Level::kHash;
  const FingerprintPolicy* policy = nullptr;           // of what a call sends
  const FingerprintPolicy* received_policy = nullptr;  // of what it receives
  TraceWriter* writer = nullptr;        // null: payloads are not stored
  std::vector<Event>* capture = nullptr;  // re-run: where emitted events go
};

enum class Mode {
  kPass,    // forward only (nested call, recording off)
  kRecord,  // record around the real call
  kRerun,   // answer from the recording (replay rerun --rank)
  kForce,   // really communicate, forced to the recorded choices (replay rerun --all)
};

enum class Shape {
  kInit, kFinalize, kAbort,
  kCommNew, kCommGroup, kCommInter, kCommFree,
  kSend, kIsend, kPersistentInit, kRecv, kIrecv, kSendrecv,
  kProbe, kMrecv, kStart, kCancel,
  kComplete, kRequestFree,
  kColl,
  kTypeFree, kRma,
  kQuery,  // rank and size queries: forwarded when recording, answered when re-running
  kTopo,   // virtual topology queries: forwarded when recording, answered when a rank re-runs alone
  kGroup,  // group operations: forwarded when recording, answered when a rank re-runs alone
};

// A rank re-run alone: the neighbour counts (in, out) of a stand-in
// communicator's virtual topology; false when it has none (mpi_rerun.cpp).
bool VirtualNeighborCounts(MPI_Comm comm, int rank, int* in, int* out);

// One-sided communication. What one rank sees of it is its window's memory
// and the origin buffers of its reads, both valid once a synchronisation call
// returns: that is where they are recorded (at level data, the bytes), and
// where a rank re-run alone writes them back. Request-based reads (MPI_Rget)
// complete at a wait and are not covered.
// For a synchronisation call on `win` (fence, lock, unlock, flush, lock_all,
// unlock_all, post, start, complete, wait): the window's memory, then the
// origin buffers of the reads it completes, which are forgotten now. False
// for other calls and unknown windows.
bool WindowSync(ApiId api, MPI_Win win, Region* r);

// Calls answered within the process and never recorded: forwarded when
// recording and in a whole-job re-run, answered when a rank re-runs alone.
inline bool Unrecorded(Shape s) { return s == Shape::kQuery || s == Shape::kTopo || s == Shape::kGroup; }

class Call {
 public:
  Call(ApiId api, OpKind kind, Shape shape, uint64_t call_site)
      : api_(api), kind_(kind), shape_(shape), call_site_(call_site) {}
  // A call that ends without a return event (or whose Leave did not record)
  // closes its record as the op alone.
  ~Call() {
    if (open_) rec_->AbandonCall();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // What to do with this call: forward (nested, or recording off), record
  // (outermost on its thread, recording on, Open MPI present), or re-run.
  Mode Begin() noexcept;
  // Re-run: answers the call from the recording (mpi_rerun.cpp); returns what
  // the recorded call returned. Stops the program at a divergence.
  int Serve() noexcept;
  // Whole-job re-run: for calls whose outcome MPI chooses (wildcard receives,
  // probes, tests, wait-any/some), makes the real call forced to the recorded
  // choice and returns true (ForcedResult() has its result); false for the
  // others, which the wrapper makes as they are, between Enter and Leave.
  bool Forced() noexcept;
  int ForcedResult() const { return forced_rc_; }
  void Enter() noexcept;
  void Leave(int rc) noexcept;

  // Redirects an ignored status to one of ours so the matched source is known.
  MPI_Status* Status(MPI_Status* status) {
    status_ = status == MPI_STATUS_IGNORE ? &local_status_ : status;
    return status_;
  }
  MPI_Status* Statuses(MPI_Status* statuses, int n);

  // Roles (see mpi_api.def).
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  int scount = 0;
  int rcount = 0;
  MPI_Datatype stype = nullptr;
  MPI_Datatype rtype = nullptr;
  const int* scounts = nullptr;
  const int* sdispls = nullptr;
  const int* rcounts = nullptr;
  const int* rdispls = nullptr;
  const MPI_Aint* sdispls_aint = nullptr;
  const MPI_Aint* rdispls_aint = nullptr;
  const MPI_Datatype* stypes = nullptr;
  const MPI_Datatype* rtypes = nullptr;
  bool byte_displs = false;  // alltoallw: displacements in bytes
  MPI_Op op = nullptr;
  int root = -1;
  int peer = kNoPeer;        // dest, or source of a receive
  int tag = 0;
  int source = kNoPeer;      // sendrecv: the source asked for
  int rtag = 0;
  uint16_t flags = 0;
  MPI_Comm comm = nullptr;
  MPI_Comm* newcomm = nullptr;
  MPI_Comm* freecomm = nullptr;
  MPI_Group group = nullptr;
  MPI_Group group2 = nullptr;      // the second group of a group operation
  MPI_Group* group_out = nullptr;  // the group made (or freed)
  int color = 0;
  int key = 0;
  bool topology = false;
  MPI_Request* req = nullptr;
  MPI_Request* reqs = nullptr;
  int nreq = 0;
  int* index = nullptr;
  int* outcount = nullptr;
  int* indices = nullptr;
  int* flag = nullptr;
  MPI_Message* message = nullptr;
  int* argc = nullptr;
  char*** argv = nullptr;
  int* int_out = nullptr;   // rank and size queries
  // Virtual topologies: the numbers and arrays that create one or ask about
  // it, in the order of the MPI function's parameters (mpi_api.def).
  int topo_n = 0;
  int topo_m = 0;
  const int* topo_a = nullptr;
  const int* topo_b = nullptr;
  int* topo_out[4] = {};
  int required = 0;
  int* provided = nullptr;
  int errorcode = 0;
  MPI_Datatype* type_ptr = nullptr;
  // One-sided communication: the window, and what creates one.
  MPI_Win win = nullptr;
  MPI_Win* win_out = nullptr;
  void* win_base = nullptr;
  void* win_baseptr = nullptr;  // MPI_Win_allocate: where the base it allocates is written
  MPI_Aint win_size = 0;
  int disp_unit = 1;
  MPI_Info info = nullptr;

 private:
  Mode RecordWith();  // Begin, recording with rec_
  void DoEnter();
  void DoLeave(int rc);
  // A receive that matched a message (status_ says which): its source, tag,
  // count and fingerprint into ret_; numbered among the source's messages
  // when it asked for any source.
  void NoteReceived(bool wildcard);
  [[gnu::noinline]] void EnterByShape();  // DoEnter's calls other than collectives
  void EnterCollective();
  [[gnu::noinline, gnu::cold]] void EnterAbort();
  [[gnu::noinline]] void LayListed(const OpShape& shape, const SideArgs& sides, Region& send, Region& recv,
                                   int64_t* sent, bool* sent_from_recv);
  void LayCollective(const OpArgs& a, const OpShape& shape, Region& send, Region& recv, int64_t* sent,
                     bool* sent_from_recv);
  [[gnu::noinline]] void LeaveByShape(int rc);  // DoLeave's calls other than collectives
  void LeaveCollective(int rc);
  void LeaveCommCreate(int rc);
  void LeaveComplete(int rc);
  void LeaveInit(int rc);
  void LeaveRma(int rc);
  // One-sided calls: registers the window a creating call made, forgets a
  // freed one, and notes the origin buffer of a read.
  void NoteRma(int rc);
  int ServeRma(int rc, const Event& recorded_op, const Event& recorded_return);
  PendingOp RmaRequest(uint64_t request_id) const;
  template <typename Body>
  void Emit(EventKind kind, const Body& body, uint64_t site, std::span<const int64_t> list = {},
            std::string_view text = {}) {
    if (rec_ != nullptr) {
      rec_->Append(kind, body, site, list, text);
    } else if (ctx_.capture != nullptr) {
      Capture(body, site, list, text);
    }
  }
  // Out of line: an Event on the stack would widen the frame of every
  // recording step that may emit one, and spread a recorded call's stack over
  // more cache lines.
  template <typename Body>
  [[gnu::noinline, gnu::cold]] void Capture(const Body& body, uint64_t site, std::span<const int64_t> list,
                                            std::string_view text) {
    Event e = Event::Make(body);
    e.call_site = site;
    e.list.assign(list.begin(), list.end());
    e.text.assign(text);
    ctx_.capture->push_back(std::move(e));
  }
  int ServeOp();
  void Prepare();          // --all: find the recorded call, check the entry
  void Finish(int rc);     // --all: check what the call returned
  int ForceCall();
  int ServeComplete();
  int ServeProbe();
  int ServeQuery();
  int ServeTopology();
  int ServeGroup();
  // A matched probe's message, for the matched receive that takes it (in a
  // rank re-run alone every message is MPI_MESSAGE_NO_PROC, taken at once).
  void NoteMatchedMessage(MPI_Message handle, int matched_source, int matched_tag);
  // The topology a created communicator has in a rank re-run alone: from the
  // call's arguments, or for a distributed graph what the recording holds.
  void NoteTopology(MPI_Comm created, const ServedCall& served);
  void NoteDistGraph(MPI_Comm created);
  int ForwardTopology();
  void AppendOp();
  void AppendReturn(int rc);
  void AppendError(int rc);
  bool BlockingWait() const;

  ApiId api_;
  OpKind kind_;
  Shape shape_;
  uint64_t call_site_;
  Guard guard_;
  Recorder* rec_ = nullptr;            // null when re-running
  rerun::Session* session_ = nullptr;  // when re-running
  CallContext ctx_;
  bool recording_ = false;
  bool open_ = false;                  // the op is in a record the return completes (Recorder::AppendCall)
  bool listed_ = false;                // the op's list is in the thread's t_list (AppendOp)
  std::vector<Event> emitted_;         // re-run: what recording this call would have written
  Mode mode_ = Mode::kPass;
  // Held apart, so that a call recorded does not spend cache lines on what
  // only some calls use (bench/README.md "The wrapper with its caches emptied").
  std::unique_ptr<ServedCall> served_;  // --all: the recorded call this one is held to
  int forced_rc_ = 0;
  CommState* cs_ = nullptr;
  OpEvent op_{};
  ReturnEvent ret_{};
  MPI_Status local_status_{};
  MPI_Status* status_ = nullptr;      // where the matched status lands (ours or the app's)
  MPI_Status* statuses_ = nullptr;
  MPI_Request saved_req_ = nullptr;   // the request handle before a completion call
  MPI_Comm saved_comm_ = nullptr;     // the communicator a free call names
  Region recv_region_;                // blocking collectives: what Leave fingerprints
  std::unique_ptr<PendingOp> pending_;  // non-blocking collectives: filed at Leave
};

}  // namespace replay::interpose::mpi
