// nccl_backend.h: replay-drive's real-NCCL backend (`replay drive --backend nccl`).
//
// Re-issues one rank's recorded NCCL communicators and operations with NCCL on
// a GPU: one device per process (the launcher's local rank modulo the number
// of devices) with its primary context current, a stream per communicator,
// and device buffers sized like each recorded operation, filled with synthetic
// bytes or with the bytes a message carried in the recording.
//
// libnccl.so.2 and libcuda.so.1 are loaded at run time; nothing links CUDA or
// NCCL, and a build without nccl.h has a backend that only says it is missing.
// NCCL's functions are looked up in the process's global scope, so a preloaded
// recorder sees every re-issued call as it sees an application's: the drive's
// own trace holds real NCCL calls. The backend's own housekeeping (aborting
// after an error, destroying what the recording left alive) bypasses it.
//
// Completion: Wait() polls the streams of everything enqueued since the last
// wait, and each of their communicators' asynchronous error, until a deadline,
// so a hang ends in an answer instead of a process blocked for ever.
//
// Thread safety: none. One thread drives a backend.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"

namespace replay::drive {

// One recorded NCCL collective or point-to-point operation, as re-issued.
struct NcclOp {
  std::string api;  // the recorded function, e.g. "ncclAllReduce"
  OpKind kind = OpKind::kOther;
  int64_t count = 0;  // as passed: per rank for gathers, per peer for all-to-all
  DataType dtype = DataType::kUnknown;
  uint32_t dtype_size = 1;
  RedOp redop = RedOp::kSum;
  int root = -1;
  int peer = -1;
  uint64_t seq = 0;  // the recorded sequence number, for messages
  // A send's bytes (--payload recorded); empty: synthetic.
  std::vector<char> payload;
};

enum class WaitResult { kDone, kFailed, kTimedOut };

class NcclBackend {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~NcclBackend() = default;

  // Loads NCCL and the CUDA driver and makes device `local_rank` modulo the
  // device count current. A Status saying what is missing when a library, a
  // function or a device is, or when this build has no NCCL backend.
  static Result<std::unique_ptr<NcclBackend>> Open(int local_rank);

  // Whether an operation of `kind` is an NCCL collective or message this
  // backend re-issues.
  static bool Reissues(OpKind kind);

  // "NCCL 2.28.9, N CUDA devices": for the drive's first line.
  virtual std::string Describe() const = 0;

  // Whether the communicator with this recorded identity exists here.
  virtual bool Has(uint64_t comm) const = 0;

  // Creates communicator `comm` over the processes of `members`, in their rank
  // order: the lowest makes a unique id and broadcasts it. Collective over
  // `members`.
  virtual Status InitFromUniqueId(uint64_t comm, MPI_Comm members) = 0;

  // ncclCommSplit of `parent` with the recorded colour and key; `comm` is the
  // recorded identity of the result (0 with NCCL_SPLIT_NOCOLOR), `members` the
  // MPI communicator of its processes (MPI_COMM_NULL with no colour). When the
  // split does not give each member its recorded rank among the recorded
  // members, the members make the communicator from a fresh unique id instead.
  // Collective over the parent.
  virtual Status Split(uint64_t parent, int color, int key, uint64_t comm, MPI_Comm members) = 0;

  // The recorded ncclCommFinalize, ncclCommDestroy or ncclCommAbort (`api`).
  virtual Status Free(uint64_t comm, const std::string& api) = 0;

  // Enqueues `op` on the stream of `comm`. Inside a group it is launched at
  // the outermost GroupEnd.
  virtual Status Issue(uint64_t comm, const NcclOp& op) = 0;
  virtual Status GroupStart() = 0;
  // `simulate`: the recording's ncclGroupSimulateEnd.
  virtual Status GroupEnd(bool simulate) = 0;
  virtual int GroupDepth() const = 0;

  // Waits until everything enqueued since the last wait completed, an error
  // shows (a CUDA error, a communicator's asynchronous error), or `deadline`
  // passes. `*what` says which operation failed or is still running.
  virtual WaitResult Wait(Clock::time_point deadline, std::string* what) = 0;

  // Aborts every communicator (after an NCCL error: nothing more can run on
  // them). Not recorded.
  virtual void Abort() = 0;

  // Destroys the communicators the recording left alive and releases device
  // memory and streams. Call before MPI_Finalize (an NCCL may use MPI).
  virtual void Close() = 0;
};

}  // namespace replay::drive
