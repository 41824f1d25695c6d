// cuda_hook_api.h: the driver functions tests/nccl_host/cuda_hook_program
// calls, each by the name libcuda exports it under, with the program's own
// types for CUDA's (only the symbol names and the calling convention matter
// to the stand-in driver). cuda_hook_program looks them up by these names;
// cuda_linked_module links against them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuda_test {

using CUresult = int;
using Handle = void*;

struct LaunchConfig {  // CUlaunchConfig
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem_bytes;
  Handle stream;
  void* attrs;
  unsigned num_attrs;
};

// X(field of Api, exported symbol, (parameters))
#define REPLAY_TEST_DRIVER_API(X)                                                                      \
  X(init, cuInit, (unsigned))                                                                          \
  X(ctx_get_current, cuCtxGetCurrent, (cuda_test::Handle*))                                            \
  X(ctx_set_current, cuCtxSetCurrent, (cuda_test::Handle))                                             \
  X(ctx_synchronize, cuCtxSynchronize, ())                                                             \
  X(ctx_synchronize_v2, cuCtxSynchronize_v2, (cuda_test::Handle))                                      \
  X(mem_alloc, cuMemAlloc_v2, (uint64_t*, size_t))                                    \
  X(mem_free, cuMemFree_v2, (uint64_t))                                                      \
  X(stream_create, cuStreamCreate, (cuda_test::Handle*, unsigned))                                     \
  X(stream_create_with_priority, cuStreamCreateWithPriority, (cuda_test::Handle*, unsigned, int))      \
  X(stream_destroy, cuStreamDestroy_v2, (cuda_test::Handle))                                           \
  X(stream_synchronize, cuStreamSynchronize, (cuda_test::Handle))                                      \
  X(stream_synchronize_per_thread, cuStreamSynchronize_ptsz, (cuda_test::Handle))                      \
  X(stream_query, cuStreamQuery, (cuda_test::Handle))                                                  \
  X(stream_wait_event, cuStreamWaitEvent, (cuda_test::Handle, cuda_test::Handle, unsigned))            \
  X(event_create, cuEventCreate, (cuda_test::Handle*, unsigned))                                       \
  X(event_destroy, cuEventDestroy_v2, (cuda_test::Handle))                                             \
  X(event_record, cuEventRecord, (cuda_test::Handle, cuda_test::Handle))                               \
  X(event_synchronize, cuEventSynchronize, (cuda_test::Handle))                                        \
  X(event_query, cuEventQuery, (cuda_test::Handle))                                                    \
  X(begin_capture, cuStreamBeginCapture_v2, (cuda_test::Handle, int))                                  \
  X(end_capture, cuStreamEndCapture, (cuda_test::Handle, cuda_test::Handle*))                          \
  X(graph_instantiate, cuGraphInstantiateWithFlags,                                                    \
    (cuda_test::Handle*, cuda_test::Handle, unsigned long long))                                       \
  X(graph_launch, cuGraphLaunch, (cuda_test::Handle, cuda_test::Handle))                               \
  X(memcpy_htod_async, cuMemcpyHtoDAsync_v2,                                                           \
    (uint64_t, const void*, size_t, cuda_test::Handle))                               \
  X(memcpy_dtoh, cuMemcpyDtoH_v2, (void*, uint64_t, size_t))                          \
  X(memset_d32_async, cuMemsetD32Async, (uint64_t, unsigned, size_t, cuda_test::Handle)) \
  X(launch_kernel, cuLaunchKernel,                                                                     \
    (cuda_test::Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,          \
     cuda_test::Handle, void**, void**))                                                               \
  X(launch_kernel_ex, cuLaunchKernelEx,                                                                \
    (const cuda_test::LaunchConfig*, cuda_test::Handle, void**, void**))                               \
  X(launch_cooperative_kernel, cuLaunchCooperativeKernel,                                              \
    (cuda_test::Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,          \
     cuda_test::Handle, void**))

struct Api {
#define REPLAY_TEST_API_FIELD(field, symbol, params) CUresult(*field) params;
  REPLAY_TEST_DRIVER_API(REPLAY_TEST_API_FIELD)
#undef REPLAY_TEST_API_FIELD
};

}  // namespace cuda_test

// cuda_linked_module: fills `api` with the addresses of the driver functions
// it links against (its GOT entries), except launch_kernel, which calls
// cuLaunchKernel through its PLT.
extern "C" void replay_test_linked_api(cuda_test::Api* api);
