// cuda_host.cpp: libcuda.so.1 for tests, the handful of CUDA driver entry
// points replay's preload uses (interpose/cuda_events.h, the NCCL re-run) and
// wraps (interpose/cuda_api.def), over host memory. A TEST BACKEND, like the
// NCCL stand-in beside it: it lets the preload's device path (device pointers,
// events polled off the application's thread, stream-ordered staging copies,
// bytes served into device buffers) and its CUDA driver hook (dlsym,
// cuGetProcAddress, the wrapped calls) run on machines without a GPU.
//
// Model: "device memory" is host memory handed out by cuMemAlloc_v2 and
// remembered, so cuPointerGetAttribute can tell it from other memory. Work on
// a stream runs when it is enqueued (copies are memcpy, kernels do nothing,
// except replay's fingerprint kernel, loaded from any image with
// cuModuleLoadData: it runs its host reference, record/fingerprint_device.h).
// An event reports CUDA_ERROR_NOT_READY to its first kPendingQueries queries
// after being recorded, and a stream to its first kPendingQueries queries
// after work was enqueued on it, then success, so whoever waits for them
// really polls; synchronising makes them ready at once. Capturing a stream
// makes a graph of the kernels launched on it, which an executable graph
// instantiated from it "runs" when launched. There is one context and one
// device, 0.
//
// Failures, as a GPU has them: cuda_host_fault(code) puts the context in a
// sticky error (a kernel faulted): from then on work cannot be enqueued and
// every query and synchronisation answers `code`. Resetting the device
// (cuDevicePrimaryCtxReset, or cuCtxDestroy of the context) clears it and
// destroys what the context held: streams, events (queries answer
// CUDA_ERROR_CONTEXT_IS_DESTROYED), device memory, page-locked memory (unmapped,
// so a late read faults as it would on a GPU), modules and their functions (a
// launch answers CUDA_ERROR_INVALID_HANDLE); the next context comes at the same
// address. cuda_host_teardown_counters tells tests what was used after its
// context went away.
//
// Functions that take a stream come twice, as the driver exports them: the
// legacy default stream variant and the per-thread one (_ptsz, _ptds), and
// cuGetProcAddress resolves names by CUDA version and per-thread flag as the
// driver does, so that the preload meets several functions behind one name.
//
// Thread safety: every entry point may be called from any thread.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include "record/fingerprint_device.h"

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotFound = 500;
constexpr CUresult kNotReady = 600;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kCaptureInvalidated = 901;  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
constexpr CUresult kContextIsDestroyed = 709;  // CUDA_ERROR_CONTEXT_IS_DESTROYED
constexpr int kPointerAttributeMemoryType = 2;
constexpr unsigned kMemoryTypeHost = 1;
constexpr unsigned kMemoryTypeDevice = 2;
constexpr int kPendingQueries = 2;
constexpr int kDriverVersion = 13000;
constexpr uint64_t kProcPerThread = 1 << 1;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

struct Stream;

struct Event {
  int pending = 0;
  int generation = 0;  // of the context it was created in
  // Where it was last recorded, and how many synchronisations of that stream
  // and of the context there had been: one more makes it ready.
  const Stream* stream = nullptr;
  uint64_t stream_syncs = 0;
  uint64_t ctx_syncs = 0;
};

struct Stream {
  int pending = 0;
  uint64_t syncs = 0;  // cuStreamSynchronize calls
  bool capturing = false;
  int captured = 0;  // kernels launched while capturing
  int nodes = 0;     // copies and event records enqueued while capturing
};

struct Graph {
  int kernels = 0;
  int nodes = 0;  // what else was captured (cuda_host_graph_nodes)
};

struct GraphExec {
  int kernels = 0;
};

std::mutex g_mu;
int g_fingerprint_kernels = 0;       // replay's fingerprint kernel, launched (cuda_host_counters)
int g_device_to_host_copies = 0;     // cuMemcpyDtoH(Async), made
CUresult g_sticky = 0;               // the context's sticky error (cuda_host_fault), 0 if none
int g_generation = 0;                // contexts destroyed so far
uint64_t g_ctx_syncs = 0;            // cuCtxSynchronize calls
int g_stale_launches = 0;            // launches of a function of a destroyed context
int g_dead_queries = 0;              // queries of an event of a destroyed context
int g_page_locked_allocations = 0;   // cuMemAllocHost and cuMemHostAlloc calls that allocated
std::map<uintptr_t, size_t>& HostAllocations() {  // page-locked: start -> mapped size
  static auto* m = new std::map<uintptr_t, size_t>();
  return *m;
}
std::map<uintptr_t, size_t>& Allocations() {  // start -> size
  static auto* m = new std::map<uintptr_t, size_t>();
  return *m;
}
std::set<Stream*>& Streams() {
  static auto* s = new std::set<Stream*>();
  return *s;
}
int g_context = 1;  // the one context; its address is the handle
Stream g_legacy_stream;
thread_local Stream t_stream;  // this thread's per-thread default stream

bool IsDevice(uintptr_t p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& a = Allocations();
  auto it = a.upper_bound(p);
  if (it == a.begin()) return false;
  --it;
  return p >= it->first && p < it->first + it->second;
}

// The stream a handle names: 0 is the default stream (legacy, or this
// thread's for the per-thread variants), 1 the legacy one, 2 this thread's.
// Null for a handle that names no stream. Call with g_mu held.
Stream* StreamOf(void* handle, bool per_thread) {
  auto h = reinterpret_cast<uintptr_t>(handle);
  if (h == 0) return per_thread ? &t_stream : &g_legacy_stream;
  if (h == 1) return &g_legacy_stream;
  if (h == 2) return &t_stream;
  auto* s = static_cast<Stream*>(handle);
  return Streams().count(s) != 0 ? s : nullptr;
}

// Work enqueued on a stream: the sticky error, if any; invalid handle for a
// stream that does not exist.
CUresult Enqueue(void* handle, bool per_thread) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  Stream* s = StreamOf(handle, per_thread);
  if (s == nullptr) return kInvalidHandle;
  s->pending = kPendingQueries;
  if (s->capturing) ++s->nodes;
  return kSuccess;
}

// Page-locked memory, mapped on its own so that unmapping it at a reset makes a
// late access fault.
void* MapHost(size_t bytes) {
  size_t size = (bytes == 0 ? 1 : bytes + 4095) & ~size_t{4095};
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  HostAllocations()[reinterpret_cast<uintptr_t>(p)] = size;
  ++g_page_locked_allocations;
  return p;
}

}  // namespace

#define CUDA_HOST_API extern "C" __attribute__((visibility("default")))
#define CUDA_HOST_UNPAREN(...) __VA_ARGS__

// Defines `name` and its per-thread default stream variant `name<suffix>`,
// both forwarding to Impl_<name>(per_thread, arguments...).
#define CUDA_HOST_STREAM_API(name, suffix, params, args)                                                   \
  CUDA_HOST_API CUresult name params { return Impl_##name(false, CUDA_HOST_UNPAREN args); }                 \
  CUDA_HOST_API CUresult name##suffix params { return Impl_##name(true, CUDA_HOST_UNPAREN args); }

// Versions and the context.

CUDA_HOST_API CUresult cuInit(unsigned) { return kSuccess; }

CUDA_HOST_API CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  *version = kDriverVersion;
  return kSuccess;
}

// Error names, and device attributes (every one 0): what NCCL's driver
// loader requires of a driver before it uses it.
CUDA_HOST_API CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return kInvalidValue;
  *text = error == kSuccess ? "no error" : "a cuda_host error";
  return kSuccess;
}

CUDA_HOST_API CUresult cuGetErrorName(CUresult error, const char** text) {
  if (text == nullptr) return kInvalidValue;
  *text = error == kSuccess ? "CUDA_SUCCESS" : "CUDA_ERROR_CUDA_HOST";
  return kSuccess;
}

CUDA_HOST_API CUresult cuDeviceGetAttribute(int* value, int, int device) {
  if (value == nullptr || device != 0) return kInvalidValue;
  *value = 0;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxGetCurrent(void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &g_context;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxSetCurrent(void* ctx) { return ctx == nullptr || ctx == &g_context ? kSuccess : kInvalidHandle; }

CUDA_HOST_API CUresult cuCtxGetDevice(int* device) {
  if (device == nullptr) return kInvalidValue;
  *device = 0;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxSynchronize() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  ++g_ctx_syncs;
  for (Stream* s : Streams()) s->pending = 0;
  g_legacy_stream.pending = 0;
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxSynchronize_v2(void* ctx) {
  if (ctx != &g_context) return kInvalidHandle;
  return cuCtxSynchronize();
}

// Memory.

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
  *p = MapHost(bytes);
  return *p != nullptr ? kSuccess : 2;
}

CUDA_HOST_API CUresult cuMemFreeHost(void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = HostAllocations().find(reinterpret_cast<uintptr_t>(p));
  if (it == HostAllocations().end()) return kInvalidValue;  // not ours, or gone with its context
  munmap(p, it->second);
  HostAllocations().erase(it);
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

// Copies and sets: done at once, the stream then busy for a few queries.

namespace {

CUresult Copy(void* dst, const void* src, size_t bytes, bool dst_device, bool src_device, void* stream,
              bool per_thread) {
  if (dst_device && !IsDevice(reinterpret_cast<uintptr_t>(dst))) return kInvalidValue;
  if (src_device && !IsDevice(reinterpret_cast<uintptr_t>(src))) return kInvalidValue;
  if (CUresult rc = Enqueue(stream, per_thread); rc != kSuccess) return rc;
  std::memcpy(dst, src, bytes);
  return kSuccess;
}

CUresult Impl_cuMemcpyHtoDAsync_v2(bool per_thread, uint64_t dst, const void* src, size_t bytes, void* stream) {
  return Copy(reinterpret_cast<void*>(dst), src, bytes, true, false, stream, per_thread);
}
CUresult Impl_cuMemcpyDtoHAsync_v2(bool per_thread, void* dst, uint64_t src, size_t bytes, void* stream) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_device_to_host_copies;
  }
  return Copy(dst, reinterpret_cast<const void*>(src), bytes, false, true, stream, per_thread);
}
CUresult Impl_cuMemcpyDtoDAsync_v2(bool per_thread, uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  return Copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, true, true, stream, per_thread);
}
CUresult Impl_cuMemcpyAsync(bool per_thread, uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  return Copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, false, false, stream,
              per_thread);
}
CUresult Impl_cuMemcpyHtoD_v2(bool per_thread, uint64_t dst, const void* src, size_t bytes) {
  return Impl_cuMemcpyHtoDAsync_v2(per_thread, dst, src, bytes, nullptr);
}
CUresult Impl_cuMemcpyDtoH_v2(bool per_thread, void* dst, uint64_t src, size_t bytes) {
  return Impl_cuMemcpyDtoHAsync_v2(per_thread, dst, src, bytes, nullptr);
}
CUresult Impl_cuMemcpyDtoD_v2(bool per_thread, uint64_t dst, uint64_t src, size_t bytes) {
  return Impl_cuMemcpyDtoDAsync_v2(per_thread, dst, src, bytes, nullptr);
}
CUresult Impl_cuMemcpy(bool per_thread, uint64_t dst, uint64_t src, size_t bytes) {
  return Impl_cuMemcpyAsync(per_thread, dst, src, bytes, nullptr);
}

template <typename T>
CUresult Set(uint64_t dst, T value, size_t n, void* stream, bool per_thread) {
  if (n == 0) return Enqueue(stream, per_thread);
  if (!IsDevice(static_cast<uintptr_t>(dst)) || !IsDevice(static_cast<uintptr_t>(dst + n * sizeof(T) - 1))) {
    return kInvalidValue;
  }
  if (CUresult rc = Enqueue(stream, per_thread); rc != kSuccess) return rc;
  T* p = reinterpret_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = value;
  return kSuccess;
}

CUresult Impl_cuMemsetD8Async(bool per_thread, uint64_t dst, unsigned char v, size_t n, void* stream) {
  return Set<unsigned char>(dst, v, n, stream, per_thread);
}
CUresult Impl_cuMemsetD16Async(bool per_thread, uint64_t dst, unsigned short v, size_t n, void* stream) {
  return Set<unsigned short>(dst, v, n, stream, per_thread);
}
CUresult Impl_cuMemsetD32Async(bool per_thread, uint64_t dst, unsigned int v, size_t n, void* stream) {
  return Set<unsigned int>(dst, v, n, stream, per_thread);
}

}  // namespace

CUDA_HOST_STREAM_API(cuMemcpyHtoDAsync_v2, _ptsz, (uint64_t dst, const void* src, size_t bytes, void* stream),
                     (dst, src, bytes, stream))
CUDA_HOST_STREAM_API(cuMemcpyDtoHAsync_v2, _ptsz, (void* dst, uint64_t src, size_t bytes, void* stream),
                     (dst, src, bytes, stream))
CUDA_HOST_STREAM_API(cuMemcpyDtoDAsync_v2, _ptsz, (uint64_t dst, uint64_t src, size_t bytes, void* stream),
                     (dst, src, bytes, stream))
CUDA_HOST_STREAM_API(cuMemcpyAsync, _ptsz, (uint64_t dst, uint64_t src, size_t bytes, void* stream),
                     (dst, src, bytes, stream))
CUDA_HOST_STREAM_API(cuMemcpyHtoD_v2, _ptds, (uint64_t dst, const void* src, size_t bytes), (dst, src, bytes))
CUDA_HOST_STREAM_API(cuMemcpyDtoH_v2, _ptds, (void* dst, uint64_t src, size_t bytes), (dst, src, bytes))
CUDA_HOST_STREAM_API(cuMemcpyDtoD_v2, _ptds, (uint64_t dst, uint64_t src, size_t bytes), (dst, src, bytes))
CUDA_HOST_STREAM_API(cuMemcpy, _ptds, (uint64_t dst, uint64_t src, size_t bytes), (dst, src, bytes))
CUDA_HOST_STREAM_API(cuMemsetD8Async, _ptsz, (uint64_t dst, unsigned char v, size_t n, void* stream),
                     (dst, v, n, stream))
CUDA_HOST_STREAM_API(cuMemsetD16Async, _ptsz, (uint64_t dst, unsigned short v, size_t n, void* stream),
                     (dst, v, n, stream))
CUDA_HOST_STREAM_API(cuMemsetD32Async, _ptsz, (uint64_t dst, unsigned int v, size_t n, void* stream),
                     (dst, v, n, stream))

// Streams.

CUDA_HOST_API CUresult cuStreamCreateWithPriority(void** stream, unsigned, int) {
  if (stream == nullptr) return kInvalidValue;
  auto* s = new Stream();
  std::lock_guard<std::mutex> lock(g_mu);
  Streams().insert(s);
  *stream = s;
  return kSuccess;
}

CUDA_HOST_API CUresult cuStreamCreate(void** stream, unsigned flags) { return cuStreamCreateWithPriority(stream, flags, 0); }

CUDA_HOST_API CUresult cuStreamDestroy_v2(void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* s = static_cast<Stream*>(stream);
  if (Streams().erase(s) == 0) return kInvalidHandle;
  delete s;
  return kSuccess;
}

CUDA_HOST_API CUresult cuStreamDestroy(void* stream) { return cuStreamDestroy_v2(stream); }

CUDA_HOST_API CUresult cuStreamGetCtx(void*, void** ctx) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &g_context;
  return kSuccess;
}

namespace {

CUresult Impl_cuStreamSynchronize(bool per_thread, void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr) return kInvalidHandle;
  s->pending = 0;
  ++s->syncs;
  return kSuccess;
}

CUresult Impl_cuStreamQuery(bool per_thread, void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr) return kInvalidHandle;
  if (s->pending > 0) {
    --s->pending;
    return kNotReady;
  }
  return kSuccess;
}

CUresult Impl_cuStreamWaitEvent(bool per_thread, void* stream, void* event, unsigned) {
  if (event == nullptr) return kInvalidHandle;
  return Enqueue(stream, per_thread);
}

}  // namespace

CUDA_HOST_STREAM_API(cuStreamSynchronize, _ptsz, (void* stream), (stream))
CUDA_HOST_STREAM_API(cuStreamQuery, _ptsz, (void* stream), (stream))
CUDA_HOST_STREAM_API(cuStreamWaitEvent, _ptsz, (void* stream, void* event, unsigned flags), (stream, event, flags))

// Events.

CUDA_HOST_API CUresult cuEventCreate(void** event, unsigned) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  *event = new Event{0, g_generation};
  return kSuccess;
}

namespace {

CUresult Impl_cuEventRecordWithFlags(bool per_thread, void* event, void* stream, unsigned) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  if (static_cast<Event*>(event)->generation != g_generation) return kContextIsDestroyed;
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr) return kInvalidHandle;
  if (s->capturing) ++s->nodes;
  auto* e = static_cast<Event*>(event);
  e->pending = kPendingQueries;
  e->stream = s;
  e->stream_syncs = s->syncs;
  e->ctx_syncs = g_ctx_syncs;
  return kSuccess;
}

CUresult Impl_cuEventRecord(bool per_thread, void* event, void* stream) {
  return Impl_cuEventRecordWithFlags(per_thread, event, stream, 0);
}

}  // namespace

CUDA_HOST_STREAM_API(cuEventRecord, _ptsz, (void* event, void* stream), (event, stream))
CUDA_HOST_STREAM_API(cuEventRecordWithFlags, _ptsz, (void* event, void* stream, unsigned flags),
                     (event, stream, flags))

CUDA_HOST_API CUresult cuEventQuery(void* event) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  Event* e = static_cast<Event*>(event);
  if (e->generation != g_generation) {
    ++g_dead_queries;
    return kContextIsDestroyed;
  }
  if (g_sticky != kSuccess) return g_sticky;
  const bool synchronised =
      g_ctx_syncs > e->ctx_syncs ||
      ((e->stream == &g_legacy_stream || Streams().count(const_cast<Stream*>(e->stream)) != 0) &&
       e->stream->syncs > e->stream_syncs);
  if (e->pending > 0 && !synchronised) {
    --e->pending;
    return kNotReady;
  }
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventSynchronize(void* event) {
  if (event == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  if (static_cast<Event*>(event)->generation != g_generation) {
    ++g_dead_queries;
    return kContextIsDestroyed;
  }
  if (g_sticky != kSuccess) return g_sticky;
  static_cast<Event*>(event)->pending = 0;
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventDestroy_v2(void* event) {
  delete static_cast<Event*>(event);
  return kSuccess;
}

CUDA_HOST_API CUresult cuEventDestroy(void* event) { return cuEventDestroy_v2(event); }

// Modules: any image holds replay's fingerprint kernel, and only that.

namespace {
// A module or function handle: the generation of the context it was made in.
// Never freed, so that a stale handle can be told from a live one.
struct Handle {
  int generation;
};
std::set<const Handle*>& Modules() {
  static auto* s = new std::set<const Handle*>();
  return *s;
}
std::set<const Handle*>& Functions() {  // replay's fingerprint kernel, each time it was looked up
  static auto* s = new std::set<const Handle*>();
  return *s;
}
}  // namespace

CUDA_HOST_API CUresult cuModuleLoadData(void** module, const void* image) {
  if (module == nullptr || image == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  auto* m = new Handle{g_generation};
  Modules().insert(m);
  *module = const_cast<Handle*>(m);
  return kSuccess;
}

CUDA_HOST_API CUresult cuModuleGetFunction(void** f, void* module, const char* name) {
  if (f == nullptr || name == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  const auto* m = static_cast<const Handle*>(module);
  if (Modules().count(m) == 0) return kInvalidValue;
  if (m->generation != g_generation) return kContextIsDestroyed;
  if (std::string_view(name) != "replay_fingerprint") return kNotFound;
  auto* fn = new Handle{g_generation};
  Functions().insert(fn);
  *f = const_cast<Handle*>(fn);
  return kSuccess;
}

CUDA_HOST_API CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  if (p == nullptr) return kInvalidValue;
  *p = MapHost(bytes);
  return *p != nullptr ? kSuccess : 2;
}

CUDA_HOST_API CUresult cuMemHostGetDevicePointer_v2(uint64_t* dptr, void* p, unsigned flags) {
  if (dptr == nullptr || p == nullptr || flags != 0) return kInvalidValue;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto& h = HostAllocations();
    auto it = h.upper_bound(reinterpret_cast<uintptr_t>(p));
    if (it == h.begin() || reinterpret_cast<uintptr_t>(p) >= std::prev(it)->first + std::prev(it)->second) {
      return kInvalidValue;
    }
  }
  *dptr = reinterpret_cast<uint64_t>(p);
  return kSuccess;
}

// Puts the context in the sticky error `code`, as a faulting kernel would.
CUDA_HOST_API void cuda_host_fault(int code) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sticky = code;
}

// What was used after its context was destroyed: launches of its functions,
// queries and synchronisations of its events.
CUDA_HOST_API void cuda_host_teardown_counters(int* stale_launches, int* dead_queries) {
  std::lock_guard<std::mutex> lock(g_mu);
  *stale_launches = g_stale_launches;
  *dead_queries = g_dead_queries;
}

// Page-locked allocations made so far.
CUDA_HOST_API int cuda_host_page_locked_allocations() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_page_locked_allocations;
}

// What the stand-in counted, for tests: fingerprint kernels launched and
// device-to-host copies made.
CUDA_HOST_API void cuda_host_counters(int* fingerprint_kernels, int* device_to_host_copies) {
  std::lock_guard<std::mutex> lock(g_mu);
  *fingerprint_kernels = g_fingerprint_kernels;
  *device_to_host_copies = g_device_to_host_copies;
}

// Kernels: launched on a stream, or captured into its graph.

namespace {

CUresult Launch(void* f, void* stream, bool per_thread, void** params = nullptr) {
  if (f == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_sticky != kSuccess) return g_sticky;
  const auto* fn = static_cast<const Handle*>(f);
  const bool fingerprint = Functions().count(fn) != 0;
  if (fingerprint && fn->generation != g_generation) {
    ++g_stale_launches;
    return kInvalidHandle;
  }
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr) return kInvalidHandle;
  if (s->capturing) {
    ++s->captured;
  } else {
    s->pending = kPendingQueries;
    if (fingerprint) {
      if (params == nullptr || params[0] == nullptr) return kInvalidValue;
      namespace fp = replay::device_fingerprint;
      const auto& job = *static_cast<const fp::Job*>(params[0]);
      if (job.blocks == 0 || job.blocks > fp::kMaxBlocks) return kInvalidValue;
      fp::Reference(job, reinterpret_cast<fp::Result*>(job.result));
      ++g_fingerprint_kernels;
    }
  }
  return kSuccess;
}

CUresult Impl_cuLaunchKernel(bool per_thread, void* f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void* stream, void** params, void**) {
  return Launch(f, stream, per_thread, params);
}

CUresult Impl_cuLaunchCooperativeKernel(bool per_thread, void* f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, void* stream, void**) {
  return Launch(f, stream, per_thread);
}

// CUlaunchConfig up to its stream.
struct LaunchConfig {
  unsigned int grid[3];
  unsigned int block[3];
  unsigned int shared_mem_bytes;
  void* stream;
};

CUresult Impl_cuLaunchKernelEx(bool per_thread, const LaunchConfig* config, void* f, void**, void**) {
  if (config == nullptr) return kInvalidValue;
  return Launch(f, config->stream, per_thread);
}

}  // namespace

CUDA_HOST_STREAM_API(cuLaunchKernel, _ptsz,
                     (void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, void* stream, void** params, void** extra),
                     (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra))
CUDA_HOST_STREAM_API(cuLaunchCooperativeKernel, _ptsz,
                     (void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, void* stream, void** params),
                     (f, gx, gy, gz, bx, by, bz, shared, stream, params))
CUDA_HOST_STREAM_API(cuLaunchKernelEx, _ptsz, (const LaunchConfig* config, void* f, void** params, void** extra),
                     (config, f, params, extra))

// Graphs.

namespace {

CUresult Impl_cuStreamBeginCapture_v2(bool per_thread, void* stream, int mode) {
  if (mode < 0 || mode > 2) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  Stream* s = StreamOf(stream, per_thread);
  // The legacy default stream cannot be captured.
  if (s == nullptr || s == &g_legacy_stream || s->capturing) return kInvalidValue;
  s->capturing = true;
  s->captured = 0;
  s->nodes = 0;
  return kSuccess;
}

CUresult Impl_cuStreamBeginCapture(bool per_thread, void* stream) {
  return Impl_cuStreamBeginCapture_v2(per_thread, stream, 0);
}

CUresult Impl_cuStreamEndCapture(bool per_thread, void* stream, void** graph) {
  if (graph == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr || !s->capturing) return kCaptureInvalidated;
  s->capturing = false;
  *graph = new Graph{s->captured, s->nodes};
  return kSuccess;
}

CUresult Impl_cuStreamIsCapturing(bool per_thread, void* stream, int* status) {
  if (status == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  Stream* s = StreamOf(stream, per_thread);
  if (s == nullptr) return kInvalidHandle;
  *status = s->capturing ? 1 : 0;  // CU_STREAM_CAPTURE_STATUS_ACTIVE / _NONE
  return kSuccess;
}

CUresult Impl_cuGraphLaunch(bool per_thread, void* exec, void* stream) {
  if (exec == nullptr) return kInvalidValue;
  return Enqueue(stream, per_thread);
}

CUresult Instantiate(void** exec, void* graph) {
  if (exec == nullptr || graph == nullptr) return kInvalidValue;
  *exec = new GraphExec{static_cast<Graph*>(graph)->kernels};
  return kSuccess;
}

CUresult Impl_cuGraphInstantiateWithParams(bool, void** exec, void* graph, void*) { return Instantiate(exec, graph); }

}  // namespace

CUDA_HOST_STREAM_API(cuStreamBeginCapture, _ptsz, (void* stream), (stream))
CUDA_HOST_STREAM_API(cuStreamBeginCapture_v2, _ptsz, (void* stream, int mode), (stream, mode))
CUDA_HOST_STREAM_API(cuStreamEndCapture, _ptsz, (void* stream, void** graph), (stream, graph))
CUDA_HOST_STREAM_API(cuStreamIsCapturing, _ptsz, (void* stream, int* status), (stream, status))

// Per-thread capture interaction mode (CU_STREAM_CAPTURE_MODE_*; 0 global).
CUDA_HOST_API CUresult cuThreadExchangeStreamCaptureMode(int* mode) {
  thread_local int current = 0;
  if (mode == nullptr || *mode < 0 || *mode > 2) return kInvalidValue;
  int old = current;
  current = *mode;
  *mode = old;
  return kSuccess;
}

// The stand-in's own: copies and event records a graph captured besides its
// kernels, for tests that check what the preload adds to a capture (nothing).
CUDA_HOST_API int cuda_host_graph_nodes(void* graph) { return graph != nullptr ? static_cast<Graph*>(graph)->nodes : -1; }
CUDA_HOST_STREAM_API(cuGraphLaunch, _ptsz, (void* exec, void* stream), (exec, stream))
CUDA_HOST_STREAM_API(cuGraphInstantiateWithParams, _ptsz, (void** exec, void* graph, void* params),
                     (exec, graph, params))

CUDA_HOST_API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  return Instantiate(exec, graph);
}

CUDA_HOST_API CUresult cuGraphInstantiate_v2(void** exec, void* graph, void** error_node, char* log, size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return Instantiate(exec, graph);
}

CUDA_HOST_API CUresult cuGraphInstantiate(void** exec, void* graph, void** error_node, char* log, size_t log_size) {
  return cuGraphInstantiate_v2(exec, graph, error_node, log, log_size);
}

// cuGetProcAddress: a function by the name it is documented under, the CUDA
// version the caller was built for and the per-thread default stream flag.

namespace {

struct Proc {
  std::string_view name;
  int since;
  int until;  // exclusive; 0: still current
  void* legacy;
  void* per_thread;  // null: the same function either way
};

template <typename F>
void* Fn(F* f) {
  return reinterpret_cast<void*>(f);
}

extern "C" CUresult cuCtxDestroy_v2(void* ctx);
extern "C" CUresult cuDeviceGet(int* device, int ordinal);
extern "C" CUresult cuDevicePrimaryCtxReset_v2(int device);
extern "C" CUresult cuDevicePrimaryCtxRelease_v2(int device);
extern "C" CUresult cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active);

const Proc* Procs(size_t* n) {
  static const Proc kProcs[] = {
      {"cuInit", 2000, 0, Fn(&cuInit), nullptr},
      {"cuDriverGetVersion", 2020, 0, Fn(&cuDriverGetVersion), nullptr},
      {"cuGetErrorString", 6000, 0, Fn(&cuGetErrorString), nullptr},
      {"cuGetErrorName", 6000, 0, Fn(&cuGetErrorName), nullptr},
      {"cuDeviceGet", 2000, 0, Fn(&cuDeviceGet), nullptr},
      {"cuDeviceGetAttribute", 2000, 0, Fn(&cuDeviceGetAttribute), nullptr},
      {"cuGetProcAddress", 11030, 12000, nullptr, nullptr},  // filled below: v1
      {"cuGetProcAddress", 12000, 0, nullptr, nullptr},      // v2
      {"cuCtxGetCurrent", 4000, 0, Fn(&cuCtxGetCurrent), nullptr},
      {"cuCtxSetCurrent", 4000, 0, Fn(&cuCtxSetCurrent), nullptr},
      {"cuCtxGetDevice", 2000, 0, Fn(&cuCtxGetDevice), nullptr},
      {"cuCtxDestroy", 4000, 0, Fn(&cuCtxDestroy_v2), nullptr},
      {"cuDevicePrimaryCtxReset", 11000, 0, Fn(&cuDevicePrimaryCtxReset_v2), nullptr},
      {"cuDevicePrimaryCtxRelease", 11000, 0, Fn(&cuDevicePrimaryCtxRelease_v2), nullptr},
      {"cuDevicePrimaryCtxGetState", 7000, 0, Fn(&cuDevicePrimaryCtxGetState), nullptr},
      {"cuCtxSynchronize", 2000, 13000, Fn(&cuCtxSynchronize), nullptr},
      {"cuCtxSynchronize", 13000, 0, Fn(&cuCtxSynchronize_v2), nullptr},
      {"cuMemAlloc", 3020, 0, Fn(&cuMemAlloc_v2), nullptr},
      {"cuMemFree", 3020, 0, Fn(&cuMemFree_v2), nullptr},
      {"cuStreamCreate", 2000, 0, Fn(&cuStreamCreate), nullptr},
      {"cuStreamCreateWithPriority", 5050, 0, Fn(&cuStreamCreateWithPriority), nullptr},
      {"cuStreamDestroy", 4000, 0, Fn(&cuStreamDestroy_v2), nullptr},
      {"cuStreamSynchronize", 2000, 0, Fn(&cuStreamSynchronize), Fn(&cuStreamSynchronize_ptsz)},
      {"cuStreamQuery", 2000, 0, Fn(&cuStreamQuery), Fn(&cuStreamQuery_ptsz)},
      {"cuStreamWaitEvent", 3020, 0, Fn(&cuStreamWaitEvent), Fn(&cuStreamWaitEvent_ptsz)},
      {"cuEventCreate", 2000, 0, Fn(&cuEventCreate), nullptr},
      {"cuEventDestroy", 4000, 0, Fn(&cuEventDestroy_v2), nullptr},
      {"cuEventRecord", 2000, 0, Fn(&cuEventRecord), Fn(&cuEventRecord_ptsz)},
      {"cuEventRecordWithFlags", 11010, 0, Fn(&cuEventRecordWithFlags), Fn(&cuEventRecordWithFlags_ptsz)},
      {"cuEventSynchronize", 2000, 0, Fn(&cuEventSynchronize), nullptr},
      {"cuEventQuery", 2000, 0, Fn(&cuEventQuery), nullptr},
      {"cuStreamBeginCapture", 10000, 10010, Fn(&cuStreamBeginCapture), Fn(&cuStreamBeginCapture_ptsz)},
      {"cuStreamBeginCapture", 10010, 0, Fn(&cuStreamBeginCapture_v2), Fn(&cuStreamBeginCapture_v2_ptsz)},
      {"cuStreamEndCapture", 10000, 0, Fn(&cuStreamEndCapture), Fn(&cuStreamEndCapture_ptsz)},
      {"cuStreamIsCapturing", 10000, 0, Fn(&cuStreamIsCapturing), Fn(&cuStreamIsCapturing_ptsz)},
      {"cuGraphInstantiate", 10000, 12000, Fn(&cuGraphInstantiate_v2), nullptr},
      {"cuGraphInstantiate", 12000, 0, Fn(&cuGraphInstantiateWithFlags), nullptr},
      {"cuGraphInstantiateWithFlags", 11040, 0, Fn(&cuGraphInstantiateWithFlags), nullptr},
      {"cuGraphInstantiateWithParams", 12000, 0, Fn(&cuGraphInstantiateWithParams),
       Fn(&cuGraphInstantiateWithParams_ptsz)},
      {"cuGraphLaunch", 10000, 0, Fn(&cuGraphLaunch), Fn(&cuGraphLaunch_ptsz)},
      {"cuMemcpy", 4000, 0, Fn(&cuMemcpy), Fn(&cuMemcpy_ptds)},
      {"cuMemcpyAsync", 4000, 0, Fn(&cuMemcpyAsync), Fn(&cuMemcpyAsync_ptsz)},
      {"cuMemcpyHtoD", 3020, 0, Fn(&cuMemcpyHtoD_v2), Fn(&cuMemcpyHtoD_v2_ptds)},
      {"cuMemcpyDtoH", 3020, 0, Fn(&cuMemcpyDtoH_v2), Fn(&cuMemcpyDtoH_v2_ptds)},
      {"cuMemcpyDtoD", 3020, 0, Fn(&cuMemcpyDtoD_v2), Fn(&cuMemcpyDtoD_v2_ptds)},
      {"cuMemcpyHtoDAsync", 3020, 0, Fn(&cuMemcpyHtoDAsync_v2), Fn(&cuMemcpyHtoDAsync_v2_ptsz)},
      {"cuMemcpyDtoHAsync", 3020, 0, Fn(&cuMemcpyDtoHAsync_v2), Fn(&cuMemcpyDtoHAsync_v2_ptsz)},
      {"cuMemcpyDtoDAsync", 3020, 0, Fn(&cuMemcpyDtoDAsync_v2), Fn(&cuMemcpyDtoDAsync_v2_ptsz)},
      {"cuMemsetD8Async", 3020, 0, Fn(&cuMemsetD8Async), Fn(&cuMemsetD8Async_ptsz)},
      {"cuMemsetD16Async", 3020, 0, Fn(&cuMemsetD16Async), Fn(&cuMemsetD16Async_ptsz)},
      {"cuMemsetD32Async", 3020, 0, Fn(&cuMemsetD32Async), Fn(&cuMemsetD32Async_ptsz)},
      {"cuLaunchKernel", 4000, 0, Fn(&cuLaunchKernel), Fn(&cuLaunchKernel_ptsz)},
      {"cuLaunchKernelEx", 11060, 0, Fn(&cuLaunchKernelEx), Fn(&cuLaunchKernelEx_ptsz)},
      {"cuLaunchCooperativeKernel", 9000, 0, Fn(&cuLaunchCooperativeKernel), Fn(&cuLaunchCooperativeKernel_ptsz)},
      {"cuPointerGetAttribute", 4000, 0, Fn(&cuPointerGetAttribute), nullptr},
      {"cuModuleLoadData", 2000, 0, Fn(&cuModuleLoadData), nullptr},
      {"cuModuleGetFunction", 2000, 0, Fn(&cuModuleGetFunction), nullptr},
      {"cuMemHostAlloc", 2020, 0, Fn(&cuMemHostAlloc), nullptr},
      {"cuMemHostGetDevicePointer", 3020, 0, Fn(&cuMemHostGetDevicePointer_v2), nullptr},
  };
  *n = sizeof(kProcs) / sizeof(kProcs[0]);
  return kProcs;
}

constexpr int kProcFound = 0;             // CU_GET_PROC_ADDRESS_SUCCESS
constexpr int kProcNotFound = 1;          // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
constexpr int kProcVersionTooLow = 2;     // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT

}  // namespace

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status);
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags);

CUDA_HOST_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
  if (symbol == nullptr || pfn == nullptr) return kInvalidValue;
  *pfn = nullptr;
  // A caller built for a newer CUDA than this driver gets this driver's newest.
  if (version > kDriverVersion) version = kDriverVersion;
  size_t n = 0;
  const Proc* procs = Procs(&n);
  int result = kProcNotFound;
  for (size_t i = 0; i < n; ++i) {
    const Proc& p = procs[i];
    if (p.name != symbol) continue;
    if (version < p.since) {
      result = kProcVersionTooLow;
      continue;
    }
    if (p.until != 0 && version >= p.until) continue;
    void* f = p.legacy;
    if (p.name == "cuGetProcAddress") f = p.until != 0 ? Fn(&cuGetProcAddress) : Fn(&cuGetProcAddress_v2);
    if ((flags & kProcPerThread) != 0 && p.per_thread != nullptr) f = p.per_thread;
    *pfn = f;
    result = kProcFound;
    break;
  }
  if (status != nullptr) *status = result;
  return result == kProcFound ? kSuccess : kNotFound;
}

CUDA_HOST_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

// ---------------------------------------------------------------------------
// Devices and primary contexts, for `replay drive --backend nccl`
// (tools/drive/nccl_backend.cpp), which picks a device by local rank and makes
// its primary context current. The one device, 0, has the one context.

CUDA_HOST_API CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return kInvalidValue;
  *count = 1;
  return kSuccess;
}

CUDA_HOST_API CUresult cuDeviceGet(int* device, int ordinal) {
  if (device == nullptr || ordinal != 0) return kInvalidValue;
  *device = 0;
  return kSuccess;
}

CUDA_HOST_API CUresult cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (ctx == nullptr || device != 0) return kInvalidValue;
  *ctx = &g_context;
  return kSuccess;
}

// Released, the primary context stays active: the stand-in holds it retained.
CUDA_HOST_API CUresult cuDevicePrimaryCtxRelease_v2(int device) { return device == 0 ? kSuccess : kInvalidValue; }

CUDA_HOST_API CUresult cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  if (device != 0 || flags == nullptr || active == nullptr) return kInvalidValue;
  *flags = 0;
  *active = 1;
  return kSuccess;
}

// Destroys the context and everything it held (see the top); the next one
// comes at the same address, with no error.
CUDA_HOST_API CUresult cuDevicePrimaryCtxReset_v2(int device) {
  if (device != 0) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_generation;
  g_sticky = kSuccess;
  for (Stream* s : Streams()) delete s;
  Streams().clear();
  g_legacy_stream = Stream();
  for (const auto& [p, bytes] : Allocations()) std::free(reinterpret_cast<void*>(p));
  Allocations().clear();
  for (const auto& [p, size] : HostAllocations()) munmap(reinterpret_cast<void*>(p), size);
  HostAllocations().clear();
  return kSuccess;
}

CUDA_HOST_API CUresult cuCtxDestroy_v2(void* ctx) {
  if (ctx != &g_context) return kInvalidHandle;
  return cuDevicePrimaryCtxReset_v2(0);
}
