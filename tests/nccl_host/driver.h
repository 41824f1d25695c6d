// driver.h: the CUDA driver as NCCL 2.28 reaches it, for the host NCCL
// stand-in. NCCL links the CUDA runtime, which opens libcuda.so.1, finds
// cuGetProcAddress_v2 there with dlsym, asks it for the driver's own
// cuGetProcAddress, and answers NCCL's cudaGetDriverEntryPointByVersion with
// that; NCCL loads some forty driver functions so at initialisation, each at
// the CUDA version it was written for, with the default-stream flag of a
// runtime built for the legacy default stream, and fails if one of the few it
// requires is missing. The stand-in does all of that, in a process that has
// loaded a driver (the host driver stand-in, cuda_host.cpp), then launches its
// "kernel" for device buffers through cuLaunchKernelEx on the operation's
// stream, as NCCL launches its own: what a preload that answers dlsym and
// cuGetProcAddress must keep working, and what it sees of NCCL's launches.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>

namespace nccl_host::driver {

// Whether the process has a driver and the stand-in found in it every
// function NCCL requires. Resolved on first use, never again.
bool Loaded();

// Whether `p` is device memory (false without a driver).
bool IsDevice(const void* p);

// Whether `stream` is capturing a CUDA graph (false without a driver).
bool Capturing(void* stream);

// Launches NCCL's kernel for one plan on `stream`; it does nothing on the
// stand-in driver. False without a driver or when the launch failed.
bool LaunchKernel(void* stream);

}  // namespace nccl_host::driver
