// cuda_driver.h: the CUDA driver API's types, as the preload sees them.
//
// The preload is built without cuda.h: it never links the driver and must load
// into processes that have none. Handles are opaque pointers, CUresult and the
// driver's enumerations are ints, device pointers are 64-bit integers, which is
// what the driver's ABI makes of them on 64-bit Linux. Where a toolkit is
// installed, cuda_api_check.cpp compares every wrapped signature of
// cuda_api.def, and the values below, with cuda.h and cudaTypedefs.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace replay::interpose::cuda {

using CUresult = int;
using CUstream = void*;
using CUevent = void*;
using CUgraph = void*;
using CUgraphExec = void*;
using CUgraphNode = void*;
using CUcontext = void*;
using CUfunction = void*;
using CUdeviceptr = unsigned long long;
using CUdevice = int;
using cuuint64_t = uint64_t;

constexpr CUresult kSuccess = 0;            // CUDA_SUCCESS
constexpr CUresult kNotReady = 600;         // CUDA_ERROR_NOT_READY
constexpr uintptr_t kStreamLegacy = 1;      // CU_STREAM_LEGACY
constexpr uintptr_t kStreamPerThread = 2;   // CU_STREAM_PER_THREAD
constexpr cuuint64_t kProcPerThread = 1 << 1;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

// CUlaunchConfig, up to the stream: all cuLaunchKernelEx is read for.
struct LaunchConfig {
  unsigned int grid[3];
  unsigned int block[3];
  unsigned int shared_mem_bytes;
  CUstream stream;
};

// CUDA_GRAPH_INSTANTIATE_PARAMS, read for its flags.
struct GraphInstantiateParams {
  cuuint64_t flags;
};

}  // namespace replay::interpose::cuda
