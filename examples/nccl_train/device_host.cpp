// device.h on the host, for runs against the host NCCL stand-in: "device" memory
// is host memory, copies happen at once, and a stream is a distinct non-null
// pointer that nothing is ever queued on (the stand-in runs each NCCL call when
// it is made). Never calls CUDA.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "device.h"

namespace nccl_train::device {
namespace {

// What a stream handle points to; its only use is being distinct.
struct HostStream {
  int unused;
};

void* Check(void* ptr, size_t bytes) {
  if (ptr == nullptr) {
    std::fprintf(stderr, "nccl_train: out of host memory for %zu bytes\n", bytes);
    std::exit(1);
  }
  return ptr;
}

}  // namespace

const char* Kind() { return "host"; }

int Count() { return 1 << 10; }

// The stand-in has no CUDA to ask for the current device; it reads
// NCCL_HOST_DEVICE when a communicator is created.
void Select(int device) { setenv("NCCL_HOST_DEVICE", std::to_string(device).c_str(), 1); }

Stream CreateStream() { return reinterpret_cast<Stream>(new HostStream{}); }

void DestroyStream(Stream stream) { delete reinterpret_cast<HostStream*>(stream); }

void Synchronize(Stream) {}

void* Alloc(size_t bytes) { return Check(std::calloc(1, bytes), bytes); }

void Free(void* ptr) { std::free(ptr); }

void CopyToDevice(void* dst, const void* src, size_t bytes, Stream) { std::memcpy(dst, src, bytes); }

void CopyToHost(void* dst, const void* src, size_t bytes, Stream) { std::memcpy(dst, src, bytes); }

}  // namespace nccl_train::device
