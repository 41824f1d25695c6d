// cuda_events.h: knowing when GPU work is done, without waiting for it.
//
// The recorder places a CUDA event on an operation's stream right after it is
// enqueued; a poller thread (started on first use) queries the pending events
// and calls back when each completes, so the application thread never
// synchronises. Everything goes through the CUDA driver API, looked up at run
// time in the libcuda the process already loaded (through the C library's own
// dlsym: the preload's CUDA calls are never the application's, never recorded):
// a process without CUDA pays nothing and gets `false` from every function here.
//
// Thread safety: all functions may be called from any thread; callbacks run on
// the poller thread, one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "record/fingerprint.h"

namespace replay::interpose::cuda {

// Whether the CUDA driver is loaded in this process.
bool DriverLoaded();

// The driver's version (cuDriverGetVersion), 0 when unknown.
int DriverVersion();

// The device of the calling thread's current context, -1 when there is none.
int CurrentDevice();

// Whether `ptr` points to device memory (false for host memory, for unknown
// pointers and without a driver).
bool IsDevicePointer(const void* ptr);

// What `ptr` points to: host memory (also any the driver does not know, and
// all memory without a driver), device memory, or unknown when the driver
// would not say (asked from a CUDA host callback, where no CUDA call is
// allowed): then it must not be read, on the host or the device.
enum class Memory { kHost, kDevice, kUnknown };
Memory MemoryOf(const void* ptr);

// Whether `stream` is capturing a CUDA graph: work "enqueued" on it then runs
// at each launch of the graph, and anything the recorder enqueued there would
// become part of the application's graph. WatchStream and StageFromDevice
// refuse such a stream.
bool IsCapturing(void* stream);

// Calls `done(0)` (from the poller thread) once the work enqueued on `stream`
// so far has completed, or `done(error)` with the driver's error when the
// stream or its context failed first (an earlier kernel faulted, the context
// was destroyed): then what kernels and copies were to write is unknown and
// may be gone with the context, so it must not be read. False when that
// cannot be watched (no driver, not a stream, an error); the caller then
// decides completion itself.
bool WatchStream(void* stream, std::function<void(int error)> done);

// The error `stream` is in (its context's sticky error, say), 0 if none or
// when it cannot be asked.
int StreamError(void* stream);

// The application synchronised `stream` (cuStreamSynchronize), or the context
// `ctx` (cuCtxSynchronize; null: the calling thread's), and the driver said
// success: the work watched there so far has run, and is reported as
// completed even if the driver answers its event with an error later (a
// kernel enqueued after it faulted).
void StreamReached(void* stream);
void ContextReached(void* ctx);

// Enqueues on `stream` a copy of `bytes` bytes of device memory at `device`
// into a page-locked host buffer (kept for reuse once released, so that page-
// locked memory is not allocated and freed per operation), and returns that
// buffer: its contents
// are valid once the work enqueued so far completes (WatchStream). Null when
// the driver cannot do it. Release with FreeStaging after completion.
void* StageFromDevice(const void* device, size_t bytes, void* stream);
void FreeStaging(void* staging);

// A fingerprint being computed by a kernel on a stream.
struct DeviceFingerprint;

// Enqueues on `stream` a kernel that fingerprints `bytes` bytes of device
// memory at `data` exactly as FingerprintBuffer(type, policy) would on the
// host, and returns it without waiting: its result is valid once the work
// enqueued so far on `stream` completed (WatchStream). Null when no kernel can
// do it (policy.device_kernel off, a preload built without one, no image for
// this GPU, a capturing stream, a stream of another context): the caller then
// stages the bytes instead.
DeviceFingerprint* FingerprintOnDevice(const void* data, size_t bytes, DataType type,
                                       const FingerprintPolicy& policy, void* stream);
// The result, once the kernel ran; releases `f`.
Fingerprint TakeFingerprint(DeviceFingerprint* f);
// Releases `f` without reading it, when it is unknown whether its kernel ran:
// its result memory is never reused.
void AbandonFingerprint(DeviceFingerprint* f);

// Copies `bytes` host bytes at `host` to device memory at `device` on
// `stream` and waits for the stream (re-runs only: they may wait). False
// without a driver or on an error.
bool CopyToDeviceAndWait(void* device, const void* host, size_t bytes, void* stream);

// Waits for `stream` (re-runs only). False without a driver or on an error.
bool SyncStream(void* stream);

// Pending watches, for tests and shutdown.
size_t PendingWatches();

// Around an application call that destroys a context: cuCtxDestroy (`ctx`),
// or cuDevicePrimaryCtxReset or cuDevicePrimaryCtxRelease (`device`;
// `release`: only when it leaves the primary context inactive). Constructed
// before the call: the watches in that context whose work has completed are
// run while their results are still readable, and no other watch runs until
// destruction. Finish(rc) after the call: if it succeeded, the watches left in
// that context get done(CUDA_ERROR_CONTEXT_IS_DESTROYED), and the fingerprint
// kernel and its result memory are loaded and allocated afresh, since a new
// context may come at the same address.
class Teardown {
 public:
  Teardown(void* ctx, int device, bool release) noexcept;
  ~Teardown();
  Teardown(const Teardown&) = delete;
  Teardown& operator=(const Teardown&) = delete;
  void Finish(int rc) noexcept;

 private:
  bool Affects(void* ctx, int device) const;

  void* ctx_;
  int device_;
  bool release_;
  bool active_ = false;
};

}  // namespace replay::interpose::cuda
