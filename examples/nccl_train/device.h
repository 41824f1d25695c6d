// device.h: the few CUDA runtime calls nccl_train makes, behind one interface
// with two implementations, chosen when the program is built:
//
//   device_cuda.cpp  the CUDA runtime: nccl_train, one GPU per rank
//   device_host.cpp  host memory and streams that are only names: nccl_train_host,
//                    which runs against the host NCCL stand-in (tests/nccl_host)
//
// Only the types come from CUDA's headers (through nccl.h), so the host build
// needs the toolkit's headers but not its libraries or a GPU. Every function
// reports a failure on stderr and exits, as a trainer would; none returns an
// error. Not thread-safe: the trainer's main thread is the only caller.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace nccl_train::device {

using Stream = cudaStream_t;

// "cuda" or "host".
const char* Kind();

// Devices this process can see (the host build pretends each rank has its own).
int Count();

// Makes `device` the current device, for allocations and for NCCL to pick up.
void Select(int device);

Stream CreateStream();
void DestroyStream(Stream stream);
// Returns when everything queued on `stream` has run.
void Synchronize(Stream stream);

void* Alloc(size_t bytes);
void Free(void* ptr);

// Queued on `stream`: `src` must stay unchanged, and `dst` untouched, until
// Synchronize(stream) returns.
void CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream);
void CopyToHost(void* dst, const void* src, size_t bytes, Stream stream);

}  // namespace nccl_train::device
