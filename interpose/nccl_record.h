// nccl_record.h: what recording an NCCL call means, by the shape of the call.
//
// NCCL operations are asynchronous: a call enqueues work on a CUDA stream and
// returns. So every communication call gets three moments in the trace: `op`
// when it is called (inside a group: at the call, with the group id), `ret`
// when it returns (enqueued; for grouped calls the outermost ncclGroupEnd is
// the enqueue point), and `completion` when the work is done — observed on the
// GPU through a CUDA event the recorder places after it (cuda_events.h), or at
// once for host memory (the host test implementation of NCCL).
//
// Communicators get their job-wide identity from the unique id they were made
// from, or from their parent, the split's sequence number on it and the
// colour. NCCL does not say who the members are; each rank records its rank
// and the communicator's size, and the analysis puts the members together.
//
// Thread safety: a Call lives on one thread's stack. NCCL groups are per
// thread, as in NCCL.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "api.h"
#include "guard.h"
#include "record/fingerprint.h"
#include "record/recorder.h"
#include "replay/op_shape.h"
#include "replay/oracle.h"

namespace replay::interpose::cuda {
struct DeviceFingerprint;
}  // namespace replay::interpose::cuda

namespace replay::rerun {
class Session;
}  // namespace replay::rerun

namespace replay::interpose::nccl {

enum class Shape {
  kUniqueId, kInitRank, kInitScalable, kInitAll, kSplit, kFree,
  kQuery, kAsyncError, kCall, kColl, kP2p, kGroup,
};

enum class Mode { kPass, kRecord, kRerun };

class Call {
 public:
  Call(ApiId api, OpKind kind, Shape shape, uint64_t call_site)
      : api_(api), kind_(kind), shape_(shape), call_site_(call_site) {}
  // A call that ends without a return event closes its record as the op alone.
  ~Call() {
    if (open_) rec_->AbandonCall();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  Mode Begin() noexcept;
  void Enter() noexcept;
  void Leave(ncclResult_t rc) noexcept;
  // Re-run: answers the call from the recording (nccl_rerun.cpp).
  ncclResult_t Serve() noexcept;

  // Roles (see nccl_api.def).
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = -1;
  int peer = kNoPeer;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  ncclComm_t* newcomm = nullptr;
  int nranks = 0;
  ncclUniqueId init_id{};
  int rank = -1;
  int n_ids = 0;
  ncclUniqueId* ids = nullptr;
  ncclUniqueId* unique_id = nullptr;
  int color = 0;
  int key = 0;
  bool shrink = false;
  bool forget = false;
  int* int_out = nullptr;
  ncclResult_t* async_error = nullptr;
  bool group_end = false;
  bool simulate = false;

 private:
  void DoEnter();
  void DoLeave(ncclResult_t rc);
  void LeaveCreate(ncclResult_t rc);
  void LeaveGroup(ncclResult_t rc);
  void AppendReturn(ncclResult_t rc);
  void AppendError(ncclResult_t rc, uint64_t comm_id);
  // The recv side of the call, to fingerprint (and store) at completion.
  void Enqueued();
  // The call's arguments, for the elements it sends and receives (op_shape.h).
  OpArgs Args() const;

  ApiId api_;
  OpKind kind_;
  Shape shape_;
  uint64_t call_site_;
  Guard guard_;
  Recorder* rec_ = nullptr;
  bool open_ = false;  // the op is in a record the return completes (Recorder::AppendCall)
  rerun::Session* session_ = nullptr;  // when re-running
  Mode mode_ = Mode::kPass;
  CommState* cs_ = nullptr;
  OpEvent op_{};
  bool device_ = false;
  bool captured_ = false;  // enqueued on a stream capturing a CUDA graph
  uint64_t parent_seq_ = 0;
  ncclComm_t saved_comm_ = nullptr;
  void* send_stage_ = nullptr;  // device send data copied for its fingerprint
  size_t send_stage_bytes_ = 0;
  cuda::DeviceFingerprint* send_fp_ = nullptr;  // or its fingerprint, by a kernel
};

// An enqueued operation whose completion is yet to be recorded: on the GPU,
// when its stream reaches it; for host memory, at once.
struct Pending {
  uint64_t request = 0;
  uint16_t api = 0;
  uint64_t comm = 0;
  uint64_t seq = 0;
  uint64_t peer_seq = 0;
  void* recv = nullptr;
  size_t bytes = 0;  // received
  DataType dtype = DataType::kUnknown;
  cudaStream_t stream = nullptr;
  bool device = false;
  int32_t source = kNoPeer;  // ncclRecv: the peer it receives from
  int64_t received = -1;     // ncclRecv: elements received
  // What it sent, when not on the op event: device data copied to page-locked
  // memory on the stream (cuda::StageFromDevice) or fingerprinted there by a
  // kernel, both before the operation; or fingerprinted on the host.
  void* send_stage = nullptr;
  size_t send_bytes = 0;
  DataType send_dtype = DataType::kUnknown;
  cuda::DeviceFingerprint* send_fp = nullptr;
  std::optional<Fingerprint> sent;
  // What was sent into it is fingerprinted (by this rank or by its sender), so
  // what it received may be counted on its sample (REPLAY_NAN_SCAN=sent).
  bool input_fingerprinted = false;
  bool captured = false;  // into a CUDA graph: it runs at each launch of the graph, not now
};

// Records `p`'s completion with its fingerprints (and, at level data, the
// received bytes): device operations once their stream ran what the recorder
// enqueued after them on it (a kernel fingerprinting, or a copy of, what they
// received), host ones now. Takes over what `p` holds.
void Complete(Recorder* rec, const Pending& p);
// An operation that was not enqueued after all (its call or its group failed,
// or the group was only simulated): what the recorder enqueued for it is
// released once the stream has run it.
void Discard(const Pending& p);

// What the recorder does with `bytes` bytes of the device data of an
// operation: with a kernel on its stream (or, without one, a copy) before the
// operation for what it sends, after it for what it receives.
struct SendSide {
  cuda::DeviceFingerprint* fp = nullptr;
  void* stage = nullptr;
  size_t stage_bytes = 0;
  std::optional<Fingerprint> host;  // host memory: fingerprinted now
};
// The send side of an operation about to run on `stream` (nothing at level
// meta, or for no bytes).
SendSide TakeSendSide(Recorder* rec, const void* send, size_t bytes, DataType dtype, bool device,
                      cudaStream_t stream);

// An NCCL call's arguments, for the elements it sends and receives
// (op_shape.h): one `count` for both sides, on a communicator of `nranks`
// where this is `rank` (-1: unknown).
OpArgs ArgsOf(OpKind kind, size_t count, int nranks, int rank, int root);

// A request id for an NCCL operation, apart from MPI's.
uint64_t NextRequest();

// The NCCL function `name` the application would have called: NCCL's own
// profiling alias p<name> when the library has it, else the next <name>.
void* NcclFunction(const char* name);

// NCCL's data types and reductions in the trace's terms.
DataType TypeOf(ncclDataType_t t);
size_t SizeOf(ncclDataType_t t);
RedOp RedOpOf(ncclRedOp_t op);

// The communicator identity of one made from `ids`.
uint64_t UniqueIdCommId(const ncclUniqueId* ids, int n);

// Whether NCCL is in the process only statically, where only its profiler
// plugin interface can tell the recorder of its calls: warns once when NCCL
// has not loaded the recorder as its plugin (when recording starts if
// NCCL_PROFILER_PLUGIN is unset, else at exit).
void CheckForStaticNccl(bool at_exit);

}  // namespace replay::interpose::nccl
