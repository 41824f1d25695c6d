// cuda_host.cpp: libcuda.so.1 for tests, the handful of CUDA driver entry
// points replay's preload uses (interpose/cuda_events.h, the NCCL re-run),
// over host memory. A TEST BACKEND, like the NCCL stand-in beside it: it lets
// the preload's device path (device pointers, events polled off the
// application's thread, stream-ordered staging copies, bytes served into
// device buffers) run on machines without a GPU.
//
// Model: "device memory" is host memory handed out by cuMemAlloc_v2 and
// remembered, so cuPointerGetAttribute can tell it from other memory. Work on
// a stream runs when it is enqueued (copies are memcpy). An event reports
// CUDA_ERROR_NOT_READY to its first kPendingQueries queries after being
// recorded, then success, so whoever waits for it really polls.
//
// Thread safety: every entry point may be called from any thread.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotReady = 600;
constexpr int kPointerAttributeMemoryType = 2;
constexpr unsigned kMemoryTypeHost = 1;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr int kPendingQueries = 2;

struct Event {
  int pending = 0;
};

std::mutex g_mu;
std::map<uintptr_t, size_t>& Allocations() {  // start -> size
  static auto* m = new std::map<uintptr_t, size_t>();
  return *m;
}
int g_context = 1;  // the one context; its address is the handle

bool IsDevice(uintptr_t p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& a = Allocations();
  auto it = a.upper_bound(p);
  if (it == a.begin()) return false;
  --it;
  return p >= it->first && p < it->first + it->second;
}

}  // namespace

#define CUDA_HOST_API extern "C" __attribute__((visibility("default")))

CUDA_HOST_API CUresult cuInit(unsigned) { return kSuccess; }

CUDA_HOST_API CUresult cuMemAlloc_v2(uint64_t* dptr, size_t bytes) {
  if (dptr == nullptr || bytes == 0) return kInvalidValue;
  void* p = std::malloc(bytes);
  if (p == nullptr) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  std::lock_guard<std::mutex> lock(g_mu);
  Allocations()[reinterpret_cast<uintptr_t>(p)] = bytes;
  *dptr = reinterpret_cast<uint64_t>(p);
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemFree_v2(uint64_t dptr) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (Allocations().erase(static_cast<uintptr_t>(dptr)) == 0) return kInvalidValue;
  std::free(reinterpret_cast<void*>(dptr));
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  if (p == nullptr) return kInvalidValue;
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return *p != nullptr ? kSuccess : 2;
}

CUDA_HOST_API CUresult cuMemFreeHost(void* p) {
  std::free(p);
  return kSuccess;
}

CUDA_HOST_API CUresult cuPointerGetAttribute(void* data, int attribute, uint64_t ptr) {
  if (data == nullptr || attribute != kPointerAttributeMemoryType) return kInvalidValue;
  if (!IsDevice(static_cast<uintptr_t>(ptr))) {
    // Like CUDA for memory it did not allocate: not a pointer it knows.
    *static_cast<unsigned*>(data) = kMemoryTypeHost;
    return kInvalidValue;
  }
  *static_cast<unsigned*>(data) = kMemoryTypeDevice;
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t bytes, void*) {
  if (!IsDevice(static_cast<uintptr_t>(dst))) return kInvalidValue;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t bytes, void*) {
  if (!IsDevice(static_cast<uintptr_t>(src))) return kInvalidValue;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t bytes) {
  return cuMemcpyHtoDAsync_v2(dst, src, bytes, nullptr);
}

CUDA_HOST_API CUresult cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t bytes) {
  return cuMemcpyDtoHAsync_v2(dst, src, bytes, nullptr);
}

CUDA_HOST_API CUresult cuStreamSynchronize(void*) { return kSuccess; }

CUDA_HOST_API CUresult cuStreamGetCtx(void*, void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &g_context;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxGetCurrent(void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &g_context;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxSetCurrent(void*) { return kSuccess; }

CUDA_HOST_API CUresult cuEventCreate(void** event, unsigned) {
  if (event == nullptr) return kInvalidValue;
  *event = new Event();
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventRecord(void* event, void*) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  static_cast<Event*>(event)->pending = kPendingQueries;
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventQuery(void* event) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  Event* e = static_cast<Event*>(event);
  if (e->pending > 0) {
    --e->pending;
    return kNotReady;
  }
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventDestroy_v2(void* event) {
  delete static_cast<Event*>(event);
  return kSuccess;
}
