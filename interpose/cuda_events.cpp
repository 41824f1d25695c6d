#include "cuda_events.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "dlsym_hook.h"
#include "record/fingerprint_device.h"

// The fingerprint kernel's fat binary (fingerprint_image.S); empty in a
// preload built without nvcc.
extern "C" const unsigned char replay_fingerprint_image[];
extern "C" const unsigned char replay_fingerprint_image_end[];

namespace replay::interpose::cuda {
namespace {

// The few driver entry points used here, with the driver's own types reduced
// to what we need (CUresult is an int; handles are pointers).
using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;          // CUDA_ERROR_INVALID_VALUE
constexpr CUresult kNotReady = 600;            // CUDA_ERROR_NOT_READY
constexpr CUresult kContextIsDestroyed = 709;  // CUDA_ERROR_CONTEXT_IS_DESTROYED
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
constexpr unsigned kEventDisableTiming = 2;     // CU_EVENT_DISABLE_TIMING

// The driver functions the recorder calls, once each:
// X(member, "exported symbol", return-type(parameters)). The first seven are
// required (Driver::ok); the others are null where the driver lacks them.
#define REPLAY_CUDA_CALLED(X)                                                                         \
  X(pointer_get_attribute, "cuPointerGetAttribute", CUresult(void*, int, uint64_t))                   \
  X(event_create, "cuEventCreate", CUresult(void**, unsigned))                                        \
  X(event_record, "cuEventRecord", CUresult(void*, void*))                                            \
  X(event_query, "cuEventQuery", CUresult(void*))                                                     \
  X(event_destroy, "cuEventDestroy_v2", CUresult(void*))                                              \
  X(ctx_set_current, "cuCtxSetCurrent", CUresult(void*))                                              \
  X(ctx_get_current, "cuCtxGetCurrent", CUresult(void**))                                             \
  X(stream_get_ctx, "cuStreamGetCtx", CUresult(void*, void**))                                        \
  X(ctx_get_device, "cuCtxGetDevice", CUresult(int*))                                                 \
  X(driver_get_version, "cuDriverGetVersion", CUresult(int*))                                         \
  /* Staging copies. */                                                                               \
  X(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", CUresult(void*, uint64_t, size_t, void*))              \
  X(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", CUresult(uint64_t, const void*, size_t, void*))        \
  X(stream_synchronize, "cuStreamSynchronize", CUresult(void*))                                       \
  X(stream_query, "cuStreamQuery", CUresult(void*))                                                   \
  X(mem_free_host, "cuMemFreeHost", CUresult(void*))                                                  \
  /* Graph capture (drivers before CUDA 10 have neither). */                                          \
  X(stream_is_capturing, "cuStreamIsCapturing", CUresult(void*, int*))                                \
  X(exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", CUresult(int*))                       \
  /* The fingerprint kernel. */                                                                       \
  X(module_load_data, "cuModuleLoadData", CUresult(void**, const void*))                              \
  X(module_get_function, "cuModuleGetFunction", CUresult(void**, void*, const char*))                 \
  X(launch_kernel, "cuLaunchKernel",                                                                  \
    CUresult(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**)) \
  X(mem_host_alloc, "cuMemHostAlloc", CUresult(void**, size_t, unsigned))                             \
  X(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", CUresult(uint64_t*, void*, unsigned)) \
  /* Whether a device's primary context is still active. */                                          \
  X(primary_ctx_get_state, "cuDevicePrimaryCtxGetState", CUresult(int, unsigned*, int*))

struct Driver {
  bool ok = false;
#define REPLAY_CUDA_MEMBER_(member, symbol, type) std::add_pointer_t<type> member = nullptr;
  REPLAY_CUDA_CALLED(REPLAY_CUDA_MEMBER_)
#undef REPLAY_CUDA_MEMBER_
};

Driver Load() {
  Driver x;
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return x;
#define REPLAY_CUDA_LOAD_(member, symbol, type) x.member = reinterpret_cast<std::add_pointer_t<type>>(RealDlsym(h, symbol));
  REPLAY_CUDA_CALLED(REPLAY_CUDA_LOAD_)
#undef REPLAY_CUDA_LOAD_
  x.ok = x.pointer_get_attribute && x.event_create && x.event_record && x.event_query && x.event_destroy &&
         x.ctx_set_current && x.ctx_get_current;
  return x;
}

// The number of objects the dynamic loader has added to the process so far.
// Cheap (the first object only), unlike asking the loader for libcuda by name,
// which searches the library path on every miss.
unsigned long long LoaderAdds() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<unsigned long long*>(data) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

// The driver, once the process has loaded it: CUDA programs often make their
// first NCCL call before the runtime loads libcuda, so a miss is not final; it
// is looked for again once the loader has added an object since.
const Driver& D() {
  static std::mutex mu;
  static Driver d;
  static const Driver none;
  static std::atomic<bool> loaded{false};
  static std::atomic<unsigned long long> missed_at{~0ull};
  if (__builtin_expect(loaded.load(std::memory_order_acquire), 1)) return d;
  const unsigned long long adds = LoaderAdds();
  if (adds == missed_at.load(std::memory_order_relaxed)) return none;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded.load(std::memory_order_relaxed)) {
    Driver x = Load();
    if (x.ok) {
      d = x;
      loaded.store(true, std::memory_order_release);
      return d;
    }
    missed_at.store(adds, std::memory_order_relaxed);
  }
  return loaded.load(std::memory_order_acquire) ? d : none;
}

// While the application captures a graph in the global mode, the driver
// refuses "unsafe" calls (page-locked allocations among them) from every
// thread that has not relaxed its own mode, and invalidates the capture. The
// recorder's own driver calls run in the relaxed mode.
constexpr int kCaptureModeRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const Driver& d) : d_(d) {
    if (d_.exchange_capture_mode != nullptr) ok_ = d_.exchange_capture_mode(&mode_) == kSuccess;
  }
  ~RelaxedCapture() {
    if (ok_) d_.exchange_capture_mode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const Driver& d_;
  int mode_ = kCaptureModeRelaxed;
  bool ok_ = false;
};

struct Watch {
  void* event;
  void* ctx;
  int device;  // of ctx; -1 when unknown
  void* stream;
  // The application synchronised the stream (or the context) after this was
  // enqueued, and the driver said success: the work is known to have run,
  // whatever the driver answers about the event later (a sticky error).
  bool reached = false;
  std::function<void(int error)> done;
};

// CUDA events the recorder placed and saw complete, kept for reuse: creating
// one costs several microseconds on every operation otherwise. Per context;
// forgotten, not destroyed, when a context is torn down (they went with it).
class EventPool {
 public:
  void* Take(const Driver& d, void* ctx) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if (it->first != ctx) continue;
        void* e = it->second;
        free_.erase(std::next(it).base());
        return e;
      }
    }
    void* e = nullptr;
    return d.event_create(&e, kEventDisableTiming) == kSuccess ? e : nullptr;
  }
  void Give(const Driver& d, void* ctx, void* event) {
    std::unique_lock<std::mutex> lock(mu_);
    if (free_.size() < kKeep) {
      free_.emplace_back(ctx, event);
      return;
    }
    lock.unlock();
    d.event_destroy(event);
  }
  void Forget() {
    std::lock_guard<std::mutex> lock(mu_);
    free_.clear();
  }

 private:
  static constexpr size_t kKeep = 256;
  std::mutex mu_;
  std::vector<std::pair<void*, void*>> free_;  // context, event
};

EventPool& TheEventPool() {
  static auto* p = new EventPool();
  return *p;
}

// Asks the driver about a watch's work (in its context): kNotReady while it
// runs, else what became of it. An error counts as success when `reached()`
// says the application saw the work complete first (the error came from work
// enqueued after it). A watch that is not pending any more is concluded:
// its event destroyed and `done` told.
template <typename Reached>
CUresult Query(const Driver& d, const Watch& w, Reached&& reached) {
  if (w.ctx != nullptr) d.ctx_set_current(w.ctx);
  CUresult r = d.event_query(w.event);
  return r != kSuccess && r != kNotReady && reached() ? kSuccess : r;
}
void Conclude(const Driver& d, Watch& w, CUresult r) {
  if (r == kSuccess) {
    TheEventPool().Give(d, w.ctx, w.event);
  } else {
    d.event_destroy(w.event);
  }
  w.done(r == kSuccess ? 0 : static_cast<int>(r));
}

// The poller runs one watch at a time under `run_mu`, which a teardown of a
// context (Teardown, below) holds across the driver's call: a result is never
// read from memory the driver is freeing. Lock order: run_mu, then mu_.
class Poller {
 public:
  void Add(Watch w) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(std::move(w));
      if (!started_) {
        started_ = true;
        std::thread([this] { Loop(); }).detach();
      }
      wake = idle_;  // a busy poller finds it at its next pass: no system call on the caller's thread
    }
    if (wake) cv_.notify_one();
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }

  // With run_mu held: takes the watches `affected` selects out of the queue,
  // in order.
  template <typename Affected>
  std::vector<Watch> Take(Affected&& affected) {
    std::vector<Watch> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (affected(*it)) {
        out.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  // Marks the pending watches `which` selects as reached.
  template <typename Which>
  void MarkReached(Which&& which) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Watch& w : pending_) {
      if (which(w)) w.reached = true;
    }
  }
  // With run_mu held: whether the oldest pending watch was reached.
  bool FrontReached() {
    std::lock_guard<std::mutex> lock(mu_);
    return !pending_.empty() && pending_.front().reached;
  }

  // With run_mu held: puts back watches taken out, ahead of newer ones.
  void PutBack(std::vector<Watch> watches) {
    if (watches.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.insert(pending_.begin(), std::make_move_iterator(watches.begin()),
                      std::make_move_iterator(watches.end()));
    }
    cv_.notify_one();
  }

  std::mutex run_mu;

 private:
  void Loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    pthread_setname_np(pthread_self(), "replay-cuda");
    const Driver& d = D();
    RelaxedCapture relaxed(d);  // for the thread's life
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      idle_ = true;
      cv_.wait(lock, [&] { return !pending_.empty(); });
      idle_ = false;
      // Oldest first: work on one stream completes in order.
      bool waiting = false;
      while (!pending_.empty() && !waiting) {
        void* event = pending_.front().event;
        lock.unlock();
        std::unique_lock<std::mutex> run(run_mu);
        lock.lock();
        // A teardown may have taken it meanwhile.
        if (pending_.empty() || pending_.front().event != event) continue;
        Watch w = pending_.front();
        lock.unlock();
        // Reached is read again: a synchronisation may have marked it since the copy.
        CUresult r = Query(d, w, [this] { return FrontReached(); });
        if (r == kNotReady) {
          waiting = true;
        } else {
          lock.lock();
          pending_.pop_front();
          lock.unlock();
          Conclude(d, w, r);
        }
        run.unlock();
        lock.lock();
      }
      if (!pending_.empty()) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        lock.lock();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Watch> pending_;
  bool started_ = false;
  bool idle_ = false;  // waiting for a watch (under mu_)
};

Poller& ThePoller() {
  static auto* p = new Poller();
  return *p;
}

// The device of each context seen, so that a device's teardown knows which
// watches it ends. Learnt while the context is current; -1 otherwise.
class Devices {
 public:
  int Of(const Driver& d, void* ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [c, device] : known_) {
      if (c == ctx) return device;
    }
    void* current = nullptr;
    int device = -1;
    if (ctx == nullptr || d.ctx_get_device == nullptr || d.ctx_get_current(&current) != kSuccess ||
        current != ctx || d.ctx_get_device(&device) != kSuccess) {
      return -1;
    }
    known_.emplace_back(ctx, device);
    return device;
  }
  void Forget() {
    std::lock_guard<std::mutex> lock(mu_);
    known_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, int>> known_;
};

Devices& TheDevices() {
  static auto* d = new Devices();
  return *d;
}

int DeviceOf(const Driver& d, void* ctx) { return TheDevices().Of(d, ctx); }

namespace fp = device_fingerprint;

constexpr unsigned kHostAllocPortable = 1;   // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kHostAllocDeviceMap = 2;  // CU_MEMHOSTALLOC_DEVICEMAP

// The kernel, loaded once per context, and the page-locked, device-mapped
// memory its results are written to, handed out slot by slot.
class Kernels {
 public:
  struct Slot {
    fp::Result* host = nullptr;
    uint64_t device = 0;
    uint64_t generation = 0;  // Kernels' generation when its memory was allocated
  };

  // The kernel in context `ctx` (current), loading it on first use; null if
  // it cannot be loaded there (then never tried again in that context).
  void* Function(const Driver& d, void* ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [c, f] : functions_) {
      if (c == ctx) return f;
    }
    void* f = nullptr;
    void* module = nullptr;
    if (d.module_load_data(&module, replay_fingerprint_image) != kSuccess ||
        d.module_get_function(&f, module, "replay_fingerprint") != kSuccess) {
      f = nullptr;
    }
    functions_.emplace_back(ctx, f);
    return f;
  }

  bool Take(const Driver& d, Slot* slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty() && !Grow(d)) return false;
    *slot = free_.back();
    free_.pop_back();
    return true;
  }

  void Give(const Slot& slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (slot.generation == generation_) free_.push_back(slot);
  }

  // A context was destroyed: its module and result memory are gone, and a new
  // context may come at the same address. What was loaded and allocated so far
  // is forgotten (memory in contexts still alive is left to the process).
  void Forget() {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    functions_.clear();
    free_.clear();
  }

 private:
  static constexpr size_t kSlotsPerSlab = 32;

  bool Grow(const Driver& d) {
    void* slab = nullptr;
    const size_t bytes = sizeof(fp::Result) * kSlotsPerSlab;
    if (d.mem_host_alloc(&slab, bytes, kHostAllocPortable | kHostAllocDeviceMap) != kSuccess || slab == nullptr) {
      return false;
    }
    uint64_t device = 0;
    if (d.mem_host_get_device_pointer(&device, slab, 0) != kSuccess) {
      d.mem_free_host(slab);
      return false;
    }
    for (size_t i = 0; i < kSlotsPerSlab; ++i) {
      free_.push_back(Slot{static_cast<fp::Result*>(slab) + i, device + i * sizeof(fp::Result), generation_});
    }
    return true;
  }

  std::mutex mu_;
  std::vector<std::pair<void*, void*>> functions_;
  std::vector<Slot> free_;
  uint64_t generation_ = 0;
};

Kernels& TheKernels() {
  static auto* k = new Kernels();
  return *k;
}

// Page-locked buffers for staging copies, kept for reuse: allocating and
// freeing page-locked memory costs far more than the copy (and freeing it may
// wait for the device), so a buffer goes back to the pool once its copy has
// been read. Sizes are rounded up to a power of two, at least 64 KiB; at most
// kKeepBytes stay in the pool.
class StagingPool {
 public:
  void* Take(const Driver& d, size_t bytes) {
    const size_t size = SizeClass(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        free_bytes_ -= size;
        return p;
      }
    }
    void* p = nullptr;
    if (d.mem_host_alloc(&p, size, kPortable) != kSuccess || p == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = size;
    return p;
  }

  void Give(const Driver& d, void* p) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;  // allocated in a context since destroyed: gone with it
    const size_t size = it->second;
    if (free_bytes_ + size <= kKeepBytes) {
      free_[size].push_back(p);
      free_bytes_ += size;
      return;
    }
    sizes_.erase(it);
    lock.unlock();
    d.mem_free_host(p);
  }

  // A context was destroyed: the buffers allocated in it went with it.
  void Forget() {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_.clear();
    free_.clear();
    free_bytes_ = 0;
  }

 private:
  static constexpr unsigned kPortable = 1;  // CU_MEMHOSTALLOC_PORTABLE: usable from every context
  static constexpr size_t kMinBytes = size_t{64} << 10;
  // Enough for a few operations of a large model's gradient buckets in
  // flight at level data: allocating page-locked memory takes longer than
  // copying into it.
  static constexpr size_t kKeepBytes = size_t{1} << 30;

  static size_t SizeClass(size_t bytes) {
    size_t size = kMinBytes;
    while (size < bytes) size <<= 1;
    return size;
  }

  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;   // every buffer handed out or kept -> its size
  std::map<size_t, std::vector<void*>> free_;  // size -> buffers kept
  size_t free_bytes_ = 0;
};

StagingPool& TheStagingPool() {
  static auto* p = new StagingPool();
  return *p;
}

bool HaveImage() {
  return reinterpret_cast<uintptr_t>(replay_fingerprint_image_end) > reinterpret_cast<uintptr_t>(replay_fingerprint_image);
}

}  // namespace

struct DeviceFingerprint {
  fp::Job job;
  Kernels::Slot slot;
};

bool DriverLoaded() { return D().ok; }

int DriverVersion() {
  static std::atomic<int> version{0};
  int v = version.load(std::memory_order_relaxed);
  if (v != 0) return v;
  const Driver& d = D();
  if (d.driver_get_version == nullptr || d.driver_get_version(&v) != kSuccess) return 0;
  version.store(v, std::memory_order_relaxed);
  return v;
}

int CurrentDevice() {
  const Driver& d = D();
  int device = -1;
  if (d.ctx_get_device == nullptr || d.ctx_get_device(&device) != kSuccess) return -1;
  return device;
}

bool IsDevicePointer(const void* ptr) { return MemoryOf(ptr) == Memory::kDevice; }

Memory MemoryOf(const void* ptr) {
  const Driver& d = D();
  if (!d.ok || ptr == nullptr) return Memory::kHost;
  unsigned type = 0;
  CUresult r = d.pointer_get_attribute(&type, kPointerAttributeMemoryType, reinterpret_cast<uint64_t>(ptr));
  if (r == kInvalidValue) return Memory::kHost;  // memory the driver does not know
  if (r != kSuccess) return Memory::kUnknown;
  return type == kMemoryTypeDevice ? Memory::kDevice : Memory::kHost;
}

bool IsCapturing(void* stream) {
  const Driver& d = D();
  if (!d.ok || d.stream_is_capturing == nullptr) return false;
  int status = 0;
  // An error (a stream of another context, a destroyed one) is no capture we can see.
  return d.stream_is_capturing(stream, &status) == kSuccess && status != 0;
}

bool WatchStream(void* stream, std::function<void(int error)> done) {
  const Driver& d = D();
  if (!d.ok || IsCapturing(stream)) return false;
  RelaxedCapture relaxed(d);
  void* ctx = nullptr;
  if (d.stream_get_ctx == nullptr || stream == nullptr || d.stream_get_ctx(stream, &ctx) != kSuccess) {
    d.ctx_get_current(&ctx);
  }
  void* event = TheEventPool().Take(d, ctx);
  if (event == nullptr) return false;
  if (d.event_record(event, stream) != kSuccess) {
    d.event_destroy(event);
    return false;
  }
  ThePoller().Add(Watch{event, ctx, DeviceOf(d, ctx), stream, false, std::move(done)});
  return true;
}

void StreamReached(void* stream) {
  ThePoller().MarkReached([stream](const Watch& w) { return w.stream == stream; });
}

void ContextReached(void* ctx) {
  const Driver& d = D();
  if (ctx == nullptr && (!d.ok || d.ctx_get_current(&ctx) != kSuccess || ctx == nullptr)) return;
  ThePoller().MarkReached([ctx](const Watch& w) { return w.ctx == ctx; });
}

int StreamError(void* stream) {
  const Driver& d = D();
  if (!d.ok || d.stream_query == nullptr) return 0;
  CUresult r = d.stream_query(stream);
  return r == kSuccess || r == kNotReady ? 0 : static_cast<int>(r);
}

void* StageFromDevice(const void* device, size_t bytes, void* stream) {
  const Driver& d = D();
  if (!d.ok || d.memcpy_dtoh_async == nullptr || d.mem_host_alloc == nullptr || d.mem_free_host == nullptr ||
      device == nullptr || bytes == 0 || IsCapturing(stream)) {
    return nullptr;
  }
  RelaxedCapture relaxed(d);
  void* host = TheStagingPool().Take(d, bytes);
  if (host == nullptr) return nullptr;
  if (d.memcpy_dtoh_async(host, reinterpret_cast<uint64_t>(device), bytes, stream) != kSuccess) {
    TheStagingPool().Give(d, host);
    return nullptr;
  }
  return host;
}

void FreeStaging(void* staging) {
  const Driver& d = D();
  if (staging == nullptr || d.mem_free_host == nullptr) return;
  RelaxedCapture relaxed(d);
  TheStagingPool().Give(d, staging);
}

DeviceFingerprint* FingerprintOnDevice(const void* data, size_t bytes, DataType type,
                                       const FingerprintPolicy& policy, void* stream) {
  if (!policy.device_kernel || data == nullptr || bytes == 0 || !HaveImage()) return nullptr;
  const Driver& d = D();
  if (!d.ok || d.module_load_data == nullptr || d.module_get_function == nullptr || d.launch_kernel == nullptr ||
      d.mem_host_alloc == nullptr || d.mem_host_get_device_pointer == nullptr || d.mem_free_host == nullptr ||
      IsCapturing(stream)) {
    return nullptr;
  }
  RelaxedCapture relaxed(d);
  void* ctx = nullptr;
  if (d.ctx_get_current(&ctx) != kSuccess || ctx == nullptr) return nullptr;
  void* stream_ctx = nullptr;
  if (d.stream_get_ctx != nullptr && d.stream_get_ctx(stream, &stream_ctx) == kSuccess && stream_ctx != ctx) {
    return nullptr;
  }
  Kernels& kernels = TheKernels();
  void* function = kernels.Function(d, ctx);
  Kernels::Slot slot;
  if (function == nullptr || !kernels.Take(d, &slot)) return nullptr;
  auto* f = new DeviceFingerprint{fp::MakeJob(reinterpret_cast<uint64_t>(data), bytes, type, policy, slot.device),
                                  slot};
  void* params[] = {&f->job};
  if (d.launch_kernel(function, f->job.blocks, 1, 1, fp::kThreads, 1, 1, 0, stream, params, nullptr) != kSuccess) {
    kernels.Give(slot);
    delete f;
    return nullptr;
  }
  return f;
}

Fingerprint TakeFingerprint(DeviceFingerprint* f) {
  Fingerprint result = fp::Read(f->job, *f->slot.host);
  TheKernels().Give(f->slot);
  delete f;
  return result;
}

void AbandonFingerprint(DeviceFingerprint* f) { delete f; }

bool SyncStream(void* stream) {
  const Driver& d = D();
  return d.stream_synchronize != nullptr && d.stream_synchronize(stream) == kSuccess;
}

bool CopyToDeviceAndWait(void* device, const void* host, size_t bytes, void* stream) {
  const Driver& d = D();
  if (d.memcpy_htod_async == nullptr) return false;
  if (d.memcpy_htod_async(reinterpret_cast<uint64_t>(device), host, bytes, stream) != kSuccess) return false;
  // The host bytes must live until the copy ran.
  return SyncStream(stream);
}

size_t PendingWatches() { return ThePoller().size(); }

namespace {
thread_local bool t_in_teardown = false;  // a teardown the driver makes inside one is part of it
}  // namespace

Teardown::Teardown(void* ctx, int device, bool release) noexcept : ctx_(ctx), device_(device), release_(release) {
  const Driver& d = D();
  if (!d.ok || t_in_teardown) return;
  Poller& poller = ThePoller();
  poller.run_mu.lock();
  active_ = true;
  t_in_teardown = true;
  // What completed is recorded now, while its results are still readable.
  std::vector<Watch> mine = poller.Take([this](const Watch& w) { return Affects(w.ctx, w.device); });
  if (mine.empty()) return;
  void* current = nullptr;
  bool restore = d.ctx_get_current(&current) == kSuccess;
  std::vector<Watch> rest;
  for (Watch& w : mine) {
    CUresult r = Query(d, w, [&w] { return w.reached; });
    if (r == kNotReady) {
      rest.push_back(std::move(w));
    } else {
      Conclude(d, w, r);
    }
  }
  if (restore) d.ctx_set_current(current);
  poller.PutBack(std::move(rest));
}

bool Teardown::Affects(void* ctx, int device) const {
  if (ctx_ != nullptr) return ctx == ctx_;
  return device < 0 || device == device_;
}

void Teardown::Finish(int rc) noexcept {
  if (!active_ || rc != kSuccess) return;
  const Driver& d = D();
  if (release_ && d.primary_ctx_get_state != nullptr) {
    unsigned flags = 0;
    int still_active = 0;
    // Released but still retained elsewhere: nothing was destroyed.
    if (d.primary_ctx_get_state(device_, &flags, &still_active) == kSuccess && still_active != 0) return;
  }
  // The context is gone, and with it the events and the memory of what had
  // not completed: those operations did not complete.
  for (Watch& w : ThePoller().Take([this](const Watch& w) { return Affects(w.ctx, w.device); })) {
    w.done(kContextIsDestroyed);
  }
  TheKernels().Forget();
  TheStagingPool().Forget();
  TheEventPool().Forget();
  TheDevices().Forget();
}

Teardown::~Teardown() {
  if (!active_) return;
  t_in_teardown = false;
  ThePoller().run_mu.unlock();
}

}  // namespace replay::interpose::cuda
