// Collectives, point-to-point calls and groups of the host NCCL stand-in.
//
// Every call is checked when it is made (the errors NCCL's argument checks
// return), then becomes a Call. Outside a group it runs at once; inside one it
// waits for the outermost ncclGroupEnd. Running a list of calls posts each as one
// non-blocking MPI operation on its communicator, in call order, then waits for
// all of them: send/recv pairs cannot deadlock and collectives on several
// communicators progress together. Buffers are read when the call runs, as NCCL
// reads them when the operation executes on its stream.

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "driver.h"
#include "nccl_host.h"
#include "profiler.h"
#include "reduce.h"
#include "replay/op_shape.h"

namespace nccl_host {
namespace {

constexpr int kP2pTag = 0;

// The operations, in the trace's terms: what each sends and receives is
// replay/op_shape.h's.
using Kind = replay::OpKind;

struct Call {
  Kind kind = Kind::kAllreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements; per rank for ReduceScatter, AllGather, AlltoAll, Gather, Scatter
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;  // reductions only
  int root = 0;              // the root, or the peer of a send or receive
  ncclComm* comm = nullptr;
  const char* name = "";
  // Filled when posted.
  Reduction reduction;
  std::vector<unsigned char> scratch;
  // The stream it is enqueued on, and its NCCL profiler API events (one per
  // task: AlltoAll, Gather and Scatter are a send or receive per peer).
  cudaStream_t stream = nullptr;
  std::vector<void*> api_events;
};

// The calling thread's group: nesting depth, calls waiting for the outermost
// ncclGroupEnd, and the first error a call inside it returned.
struct Group {
  int depth = 0;
  std::vector<Call> calls;
  ncclResult_t error = ncclSuccess;
};

Group& ThreadGroup() {
  thread_local Group group;
  return group;
}

bool Reduces(Kind k) {
  return k == Kind::kAllreduce || k == Kind::kReduce || k == Kind::kReduceScatterBlock;
}
bool Rooted(Kind k) { return replay::ShapeOf(k).rooted; }

// How many `count`-element blocks the largest buffer of a call holds.
size_t Blocks(const Call& c) { return static_cast<size_t>(replay::MaxBlocks(c.kind, c.comm->size)); }

// This rank's side of a call; the root of a broadcast receives into a buffer
// of its own.
replay::OpArgs Args(const Call& c) {
  replay::OpArgs a;
  a.kind = c.kind;
  a.size = a.peers = c.comm->size;
  a.rank = c.comm->rank;
  a.is_root = Rooted(c.kind) && c.comm->rank == c.root;
  a.root_copies = true;
  a.send_count = a.recv_count = static_cast<int64_t>(c.count);
  return a;
}

bool SendRead(const Call& c) { return replay::Sends(replay::ShapeOf(c.kind), Args(c)); }
bool RecvWritten(const Call& c) { return replay::Receives(replay::ShapeOf(c.kind), Args(c)); }

ncclResult_t Check(const Call& c) {
  if (ncclResult_t r = CheckComm(c.comm, c.name); r != ncclSuccess) return r;
  if (c.comm->revoked) return Fail(ncclInvalidUsage, "%s: communicator is revoked", c.name);
  if (c.comm->finalized) return Fail(ncclInvalidUsage, "%s: communicator is finalized", c.name);
  const size_t size = TypeSize(c.type);
  if (size == 0) return Fail(ncclInvalidArgument, "%s: invalid datatype %d", c.name, static_cast<int>(c.type));
  if (Reduces(c.kind)) {
    if (ncclResult_t r = CheckRedOp(c.comm, c.type, c.op, c.name); r != ncclSuccess) return r;
  }
  if (c.root < 0 || c.root >= c.comm->size) {
    if (Rooted(c.kind)) return Fail(ncclInvalidArgument, "%s: invalid root %d (nranks %d)", c.name, c.root, c.comm->size);
    if (c.kind == Kind::kSend || c.kind == Kind::kRecv) {
      return Fail(ncclInvalidArgument, "%s: invalid peer %d (nranks %d)", c.name, c.root, c.comm->size);
    }
  }
  // MPI counts are ints: the stand-in's limit, not NCCL's.
  if (c.count > static_cast<size_t>(INT_MAX) / size / Blocks(c)) {
    return Fail(ncclInvalidArgument, "%s: count %zu is too large (the host stand-in moves at most %d bytes per buffer)",
                c.name, c.count, INT_MAX);
  }
  if (c.count > 0 && ((SendRead(c) && c.send == nullptr) || (RecvWritten(c) && c.recv == nullptr))) {
    return Fail(ncclInvalidArgument, "%s: a buffer argument is NULL", c.name);
  }
  return ncclSuccess;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

const void* CopyToScratch(Call& c, const void* data, size_t bytes) {
  c.scratch.assign(static_cast<const unsigned char*>(data), static_cast<const unsigned char*>(data) + bytes);
  return c.scratch.data();
}

// The input of a reduction over `elements` elements: the send buffer, MPI_IN_PLACE
// when NCCL's in-place form allows, or a scratch copy (premultiplied, or because
// the buffers overlap otherwise).
const void* ReductionInput(Call& c, size_t elements, bool in_place_allowed, size_t out_bytes) {
  const size_t bytes = elements * TypeSize(c.type);
  if (c.reduction.premultiply) {
    CopyToScratch(c, c.send, bytes);
    Premultiply(c.scratch.data(), elements, c.type, c.reduction.scalar);
    return c.scratch.data();
  }
  if (in_place_allowed && c.send == c.recv) return MPI_IN_PLACE;
  if (Overlap(c.send, bytes, c.recv, out_bytes)) return CopyToScratch(c, c.send, bytes);
  return c.send;
}

int Post(Call& c, MPI_Request* request) {
  const size_t es = TypeSize(c.type);
  const int n = c.comm->size;
  const int me = c.comm->rank;
  const size_t block = c.count * es;  // bytes per rank's block
  const int bytes = static_cast<int>(block);
  const int count = static_cast<int>(c.count);
  auto* recv = static_cast<unsigned char*>(c.recv);
  MPI_Comm mpi = c.comm->mpi;
  if (Reduces(c.kind)) c.reduction = Resolve(c.comm, c.type, c.op);
  const Reduction& red = c.reduction;

  switch (c.kind) {
    case Kind::kSend:
      return PMPI_Isend(c.send, bytes, MPI_BYTE, c.root, kP2pTag, mpi, request);
    case Kind::kRecv:
      return PMPI_Irecv(c.recv, bytes, MPI_BYTE, c.root, kP2pTag, mpi, request);
    case Kind::kBcast:
      if (me == c.root && c.send != c.recv && block > 0) std::memmove(c.recv, c.send, block);
      return PMPI_Ibcast(c.recv, bytes, MPI_BYTE, c.root, mpi, request);
    case Kind::kAllgather: {
      const void* in = c.send;
      if (c.send == recv + static_cast<size_t>(me) * block) {
        in = MPI_IN_PLACE;
      } else if (Overlap(c.send, block, recv, block * static_cast<size_t>(n))) {
        in = CopyToScratch(c, c.send, block);
      }
      return PMPI_Iallgather(in, bytes, MPI_BYTE, c.recv, bytes, MPI_BYTE, mpi, request);
    }
    case Kind::kAlltoall: {
      const size_t total = block * static_cast<size_t>(n);
      const void* in = Overlap(c.send, total, c.recv, total) ? CopyToScratch(c, c.send, total) : c.send;
      return PMPI_Ialltoall(in, bytes, MPI_BYTE, c.recv, bytes, MPI_BYTE, mpi, request);
    }
    case Kind::kGather: {
      const void* in = c.send;
      if (me == c.root) {
        if (c.send == recv + static_cast<size_t>(c.root) * block) {
          in = MPI_IN_PLACE;
        } else if (Overlap(c.send, block, recv, block * static_cast<size_t>(n))) {
          in = CopyToScratch(c, c.send, block);
        }
      }
      return PMPI_Igather(in, bytes, MPI_BYTE, c.recv, bytes, MPI_BYTE, c.root, mpi, request);
    }
    case Kind::kScatter: {
      const void* in = c.send;
      void* out = c.recv;
      if (me == c.root) {
        const auto* send = static_cast<const unsigned char*>(c.send);
        if (c.recv == send + static_cast<size_t>(c.root) * block) {
          out = MPI_IN_PLACE;
        } else if (Overlap(c.send, block * static_cast<size_t>(n), c.recv, block)) {
          in = CopyToScratch(c, c.send, block * static_cast<size_t>(n));
        }
      }
      return PMPI_Iscatter(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, c.root, mpi, request);
    }
    case Kind::kAllreduce: {
      const void* in = ReductionInput(c, c.count, true, block);
      return PMPI_Iallreduce(in, c.recv, count, red.type, red.op, mpi, request);
    }
    case Kind::kReduce: {
      const void* in = ReductionInput(c, c.count, me == c.root, me == c.root ? block : 0);
      return PMPI_Ireduce(in, c.recv, count, red.type, red.op, c.root, mpi, request);
    }
    case Kind::kReduceScatterBlock: {
      const void* in = ReductionInput(c, c.count * static_cast<size_t>(n), false, block);
      return PMPI_Ireduce_scatter_block(in, c.recv, count, red.type, red.op, mpi, request);
    }
    default:
      break;
  }
  return MPI_ERR_OTHER;
}

void Finish(Call& c) {
  if (Reduces(c.kind) && c.reduction.divide_by > 1 && RecvWritten(c)) {
    Divide(c.recv, c.count, c.type, c.reduction.divide_by);
  }
  c.scratch = {};
}

// NCCL's name of the function a task runs, and its index among them.
struct Function {
  Kind kind;
  const char* name;
};
constexpr Function kFunctions[] = {
    {Kind::kAllreduce, "AllReduce"}, {Kind::kReduce, "Reduce"},   {Kind::kBcast, "Broadcast"},
    {Kind::kReduceScatterBlock, "ReduceScatter"}, {Kind::kAllgather, "AllGather"}, {Kind::kAlltoall, "AlltoAll"},
    {Kind::kGather, "Gather"},       {Kind::kScatter, "Scatter"}, {Kind::kSend, "Send"},
    {Kind::kRecv, "Recv"},
};
static_assert(sizeof(kFunctions) / sizeof(kFunctions[0]) <= sizeof(ncclComm::seq) / sizeof(ncclComm::seq[0]));

// NCCL's index of the function a task runs.
size_t FunctionIndex(Kind k) {
  for (size_t i = 0; i < sizeof(kFunctions) / sizeof(kFunctions[0]); ++i) {
    if (kFunctions[i].kind == k) return i;
  }
  return 0;
}
const char* FunctionName(Kind k) { return kFunctions[FunctionIndex(k)].name; }

// The sends and receives NCCL makes of a call (one for ncclSend and ncclRecv;
// per peer for AlltoAll, Gather and Scatter), none for other collectives.
struct P2pTask {
  bool send;
  int peer;
  void* buff;
};
std::vector<P2pTask> P2pTasks(const Call& c) {
  const int n = c.comm->size;
  const size_t block = c.count * TypeSize(c.type);
  auto at = [&](const void* base, int r) {
    return static_cast<unsigned char*>(const_cast<void*>(base)) + static_cast<size_t>(r) * block;
  };
  std::vector<P2pTask> tasks;
  switch (c.kind) {
    case Kind::kSend: tasks.push_back({true, c.root, const_cast<void*>(c.send)}); break;
    case Kind::kRecv: tasks.push_back({false, c.root, c.recv}); break;
    case Kind::kAlltoall:
      for (int r = 0; r < n; ++r) {
        tasks.push_back({true, r, at(c.send, r)});
        tasks.push_back({false, r, at(c.recv, r)});
      }
      break;
    case Kind::kGather:
      tasks.push_back({true, c.root, const_cast<void*>(c.send)});
      if (c.comm->rank == c.root) {
        for (int r = 0; r < n; ++r) tasks.push_back({false, r, at(c.recv, r)});
      }
      break;
    case Kind::kScatter:
      if (c.comm->rank == c.root) {
        for (int r = 0; r < n; ++r) tasks.push_back({true, r, at(c.send, r)});
      }
      tasks.push_back({false, c.root, c.recv});
      break;
    default: break;
  }
  return tasks;
}

// Whether NCCL makes tasks (and events) of a call: not of a collective on a
// one-rank communicator, which it runs locally.
bool HasTasks(const Call& c) {
  return c.comm->size > 1 || c.kind == Kind::kSend || c.kind == Kind::kRecv;
}

// The application call's part of NCCL's work: its tasks' API events.
void Append(Call& c, int depth) {
  if (!HasTasks(c)) return;
  std::vector<P2pTask> p2p = P2pTasks(c);
  if (p2p.empty()) {
    c.api_events.push_back(profiler::AppendTask(c.comm, FunctionName(c.kind), c.count, c.type, c.root, c.stream,
                                                false, depth));
    return;
  }
  for (const P2pTask& t : p2p) {
    c.api_events.push_back(profiler::AppendTask(c.comm, t.send ? "Send" : "Recv", c.count, c.type, t.peer, c.stream,
                                                true, depth));
  }
}

// What NCCL does when a group ends, before its kernels run: per
// communicator, one plan, whose kernel it launches on the first task's
// stream, then whose tasks it announces.
void Launch(std::vector<Call>& calls) {
  std::vector<ncclComm*> comms;
  for (const Call& c : calls) {
    if (HasTasks(c) && std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  }
  for (ncclComm* comm : comms) {
    const Call* first = nullptr;
    bool device = false;
    for (const Call& c : calls) {
      if (c.comm != comm || !HasTasks(c)) continue;
      if (first == nullptr) first = &c;
      device = device || driver::IsDevice(c.send) || driver::IsDevice(c.recv);
    }
    void* launch = profiler::KernelLaunchStart(comm, nullptr, first->stream);
    if (device) driver::LaunchKernel(first->stream);
    profiler::Stop(launch);
    void* plan = profiler::PlanStart(comm);
    for (Call& c : calls) {
      if (c.comm != comm || !HasTasks(c)) continue;
      std::vector<P2pTask> p2p = P2pTasks(c);
      if (p2p.empty()) {
        const bool bytes = c.kind == Kind::kAllgather || c.kind == Kind::kBcast;
        const size_t count = bytes ? c.count * TypeSize(c.type) : c.count;
        const uint64_t seq = comm->seq[FunctionIndex(c.kind)]++;
        profiler::Stop(profiler::CollStart(comm, c.api_events.empty() ? nullptr : c.api_events[0], plan, seq,
                                           FunctionName(c.kind), c.send, c.recv, count, c.root,
                                           bytes ? ncclInt8 : c.type));
        continue;
      }
      for (size_t i = 0; i < p2p.size(); ++i) {
        void* api = i < c.api_events.size() ? c.api_events[i] : nullptr;
        profiler::Stop(profiler::P2pStart(comm, api, plan, p2p[i].send ? "Send" : "Recv", p2p[i].buff, c.count,
                                          c.type, p2p[i].peer));
      }
    }
    profiler::Stop(plan);
  }
}

ncclResult_t Run(std::vector<Call>& calls) {
  Launch(calls);
  std::vector<MPI_Request> requests(calls.size(), MPI_REQUEST_NULL);
  ncclResult_t result = ncclSuccess;
  for (size_t i = 0; i < calls.size() && result == ncclSuccess; ++i) {
    if (Post(calls[i], &requests[i]) != MPI_SUCCESS) result = Fail(ncclSystemError, "%s: MPI failed", calls[i].name);
  }
  PMPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  for (Call& c : calls) Finish(c);
  return result;
}

ncclResult_t Submit(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                    int root, ncclComm* comm, const char* name, cudaStream_t stream) {
  Group& group = ThreadGroup();
  Call call;
  call.kind = kind;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.type = type;
  call.op = op;
  call.root = root;
  call.comm = comm;
  call.name = name;
  call.stream = stream;
  if (ncclResult_t r = Check(call); r != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess) group.error = r;
    return r;
  }
  Append(call, group.depth + 1);
  profiler::GroupEndStart();  // NCCL ends the implicit group each call opens
  if (group.depth > 0) {
    group.calls.push_back(std::move(call));
    return ncclSuccess;
  }
  std::vector<Call> one;
  one.push_back(std::move(call));
  ncclResult_t r = Run(one);
  profiler::GroupEndStop();
  return r;
}

// ncclGroupSimulateEnd's estimate: a fixed latency and bandwidth per call, a
// placeholder for NCCL's tuning model, in microseconds.
float Estimate(const std::vector<Call>& calls) {
  float us = 0.0f;
  for (const Call& c : calls) {
    us += 5.0f + static_cast<float>(c.count * TypeSize(c.type) * Blocks(c)) / 1.0e4f;
  }
  return us;
}

}  // namespace

ncclResult_t GroupStart() {
  ++ThreadGroup().depth;
  return ncclSuccess;
}

namespace {

ncclResult_t EndGroup(ncclSimInfo_t* sim_info, bool simulate) {
  Group& group = ThreadGroup();
  const char* name = simulate ? "ncclGroupSimulateEnd" : "ncclGroupEnd";
  if (group.depth == 0) return Fail(ncclInvalidUsage, "%s: not in a group call", name);
  profiler::GroupEndStart();
  if (--group.depth > 0) return ncclSuccess;
  std::vector<Call> calls = std::move(group.calls);
  group.calls.clear();
  const ncclResult_t error = group.error;
  group.error = ncclSuccess;
  if (error != ncclSuccess) return error;  // the group's calls are dropped, as NCCL drops them
  if (simulate) {
    constexpr unsigned kSimInfoMagic = 0x74685283;
    if (sim_info == nullptr || sim_info->magic != kSimInfoMagic) {
      return Fail(ncclInvalidArgument, "%s: simInfo is not initialised with NCCL_SIM_INFO_INITIALIZER", name);
    }
    sim_info->estimatedTime = Estimate(calls);
    return ncclSuccess;
  }
  return Run(calls);
}

}  // namespace

ncclResult_t GroupEnd(ncclSimInfo_t* sim_info, bool simulate) {
  ncclResult_t r = EndGroup(sim_info, simulate);
  profiler::GroupEndStop();  // NCCL stops the group's API event on every way out
  return r;
}

}  // namespace nccl_host

using nccl_host::Kind;
using nccl_host::Submit;

NCCL_HOST_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kAllreduce, sendbuff, recvbuff, count, datatype, op, 0, comm, "ncclAllReduce", stream);
}

NCCL_HOST_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, "ncclReduce", stream);
}

NCCL_HOST_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
              ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kBcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, "ncclBroadcast", stream);
}

NCCL_HOST_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream) {
  return Submit(Kind::kBcast, buff, buff, count, datatype, ncclSum, root, comm, "ncclBcast", stream);
}

NCCL_HOST_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kReduceScatterBlock, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, "ncclReduceScatter",
                stream);
}

NCCL_HOST_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
              ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kAllgather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, "ncclAllGather", stream);
}

NCCL_HOST_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kAlltoall, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, "ncclAlltoAll", stream);
}

NCCL_HOST_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kGather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, "ncclGather", stream);
}

NCCL_HOST_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kScatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, "ncclScatter", stream);
}

NCCL_HOST_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, "ncclSend", stream);
}

NCCL_HOST_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream) {
  return Submit(Kind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, "ncclRecv", stream);
}

NCCL_HOST_API(ncclResult_t, ncclGroupStart, void) { return nccl_host::GroupStart(); }

NCCL_HOST_API(ncclResult_t, ncclGroupEnd, void) { return nccl_host::GroupEnd(nullptr, false); }

NCCL_HOST_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return nccl_host::GroupEnd(simInfo, true);
}
