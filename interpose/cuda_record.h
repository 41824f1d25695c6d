// cuda_record.h: what recording a CUDA driver call means.
//
// Each wrapped call (cuda_api.def) the application makes is recorded when it
// returns, as one `cuda` event with its result: the stream, event and graph
// handles it acted on or created, and bytes for copies and sets. The stream
// is the one the work was ordered on: the legacy default stream is 0 however
// it was named, the per-thread default stream 2.
//
// Three kinds of call are not written one by one:
// - kernel launches are counted per stream, and the count is written as a
//   `kernels` event on that stream just before the next recorded operation on
//   it (for cuCtxSynchronize: on every stream), and when the trace closes;
//   REPLAY_CUDA_KERNELS=1 writes each launch instead. A launch that fails is
//   written at once, with its result.
// - a query (cuEventQuery, cuStreamQuery) that answers "not ready" is written
//   once per handle until the answer changes or the event is recorded again
//   (the stream gets new work); the next query written carries the number of
//   answers left out.
// - cuCtxSetCurrent is written when it changes the thread's context.
//
// Calls made inside another intercepted call (by NCCL inside an NCCL call),
// by NCCL while it launches a group's work (a statically linked NCCL, seen
// through its profiler events), and calls of a process that is re-run or not
// recorded pass straight through, except kernel launches, which are counted on their stream wherever
// they are made: NCCL's own kernels are how a stream's NCCL work shows. The
// recorder's own driver calls never reach the wrappers.
//
// Thread safety: a Call lives on one thread's stack; the per-stream and
// per-event state it updates is lock-free and shared by all threads.
#pragma once

#include <cstdint>

#include "cuda_driver.h"
#include "guard.h"
#include "record/recorder.h"

namespace replay::interpose::cuda {

class Call {
 public:
  // `per_thread`: the function is the per-thread default stream variant
  // (_ptsz, _ptds), for which stream 0 means the calling thread's own stream.
  Call(CudaOp op, bool per_thread, uint64_t call_site) noexcept
      : op_(op), per_thread_(per_thread), call_site_(call_site) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Whether the call is recorded; when not, the wrapper only forwards.
  bool Begin() noexcept;
  // After the real call: records it (or counts it) with its result.
  void Leave(CUresult rc) noexcept;

  // Roles (see cuda_api.def).
  CUstream stream = nullptr;
  CUevent event = nullptr;
  void* graph = nullptr;  // a graph, or the executable graph a launch runs
  CUcontext context = nullptr;
  CUstream* stream_out = nullptr;
  CUevent* event_out = nullptr;
  void** graph_out = nullptr;  // the graph a capture made, or the executable one instantiated
  uint64_t other = 0;
  uint64_t count = 0;

 private:
  void DoLeave(CUresult rc);

  CudaOp op_;
  bool per_thread_;
  uint64_t call_site_;
  Guard guard_;
  Recorder* rec_ = nullptr;
};

// cuGetProcAddress: after the real call, replaces a wrapped function it
// resolved by its wrapper (cuda_hook.h).
struct Resolution {
  const char* symbol = nullptr;
  void** pfn = nullptr;
  int version = 0;
  cuuint64_t flags = 0;
  Guard guard;
};

// Writes the kernel launches counted and not yet written (when the trace closes).
void FlushKernels(Recorder* rec);

}  // namespace replay::interpose::cuda
