#include "cuda_record.h"

#include <atomic>
#include <cstdint>

#include "cuda_events.h"
#include "log.h"
#include "replay/session.h"

namespace replay::interpose::cuda {
namespace {

uint64_t Handle(const void* h) { return reinterpret_cast<uint64_t>(h); }

// What the recorder remembers of one stream or event, found by handle in a
// fixed table without locks (the launch path takes no lock). Entries are
// never removed: a destroyed handle's entry is reset, and the driver hands
// the same handle values out again.
// Zero-initialised, so that the tables cost no space in the library's file.
struct HandleState {
  std::atomic<uint64_t> key{0};           // handle + 1; 0: free
  std::atomic<uint64_t> kernels{0};       // streams: launches not yet written
  std::atomic<uint64_t> quiet_polls{0};   // "not ready" answers left out since the last query written
  std::atomic<bool> not_ready{false};     // the last query written answered "not ready"
  std::atomic<int32_t> device_plus_1{0};  // streams: the device it was created on, plus one; 0 unknown
};

class HandleTable {
 public:
  // The entry of `handle`, made if `insert`; null when absent, or when the
  // table is too full to take it (the caller then does without).
  HandleState* Find(uint64_t handle, bool insert) {
    const uint64_t key = handle + 1;
    size_t i = static_cast<size_t>((handle >> 4) * 0x9E3779B97F4A7C15ull >> (64 - kBits));
    for (int probe = 0; probe < kProbes; ++probe, i = (i + 1) & (kSize - 1)) {
      HandleState& e = entries_[i];
      uint64_t k = e.key.load(std::memory_order_acquire);
      if (k == key) return &e;
      if (k != 0) continue;
      if (!insert) return nullptr;
      if (e.key.compare_exchange_strong(k, key, std::memory_order_acq_rel) || k == key) return &e;
    }
    return nullptr;
  }
  template <typename F>
  void ForEach(F f) {
    for (HandleState& e : entries_) {
      uint64_t k = e.key.load(std::memory_order_acquire);
      if (k != 0) f(k - 1, e);
    }
  }

 private:
  static constexpr int kBits = 12;
  static constexpr size_t kSize = size_t{1} << kBits;
  static constexpr int kProbes = 64;
  HandleState entries_[kSize];
};

HandleTable g_streams;
HandleTable g_events;

// Whether REPLAY_CUDA_KERNELS asks for every launch: -1 not read yet.
std::atomic<int> g_each_launch{-1};

bool EachLaunch(const Recorder* rec) {
  int v = g_each_launch.load(std::memory_order_relaxed);
  if (__builtin_expect(v < 0, 0)) {
    v = rec->settings().cuda_kernels == "1" ? 1 : 0;
    g_each_launch.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

// The context this thread last set through cuCtxSetCurrent, plus one (0: none yet).
thread_local uint64_t t_context __attribute__((tls_model("initial-exec"))) = 0;

bool OnStream(CudaOp op) {
  switch (op) {
    case CudaOp::kStreamCreate:
    case CudaOp::kStreamDestroy:
    case CudaOp::kEventRecord:
    case CudaOp::kStreamWaitEvent:
    case CudaOp::kStreamSynchronize:
    case CudaOp::kStreamQuery:
    case CudaOp::kCaptureBegin:
    case CudaOp::kCaptureEnd:
    case CudaOp::kGraphLaunch:
    case CudaOp::kMemcpyAsync:
    case CudaOp::kMemsetAsync:
    case CudaOp::kMemcpy:
    case CudaOp::kKernels:
      return true;
    default:
      return false;
  }
}

// Writes the launches counted on `stream` and not yet written; on the
// stream's device when it is known, else on `device`.
void WriteKernels(Recorder* rec, uint64_t stream, HandleState* s, int32_t device) {
  if (s == nullptr) return;
  uint64_t n = s->kernels.exchange(0, std::memory_order_acq_rel);
  if (n == 0) return;
  CudaEvent k{};
  k.op = CudaOp::kKernels;
  int32_t own = s->device_plus_1.load(std::memory_order_relaxed);
  k.device = own > 0 ? own - 1 : device;
  k.stream = stream;
  k.count = n;
  rec->Append(EventKind::kCuda, k, 0);
}

}  // namespace

bool Call::Begin() noexcept {
  // Kernel launches are counted wherever they are made: inside an NCCL call
  // they are the operation's own kernels, on its stream.
  if (rerun::Active() || (op_ != CudaOp::kKernels && (!guard_.outermost() || t_nccl_launch != nullptr))) {
    return false;
  }
  rec_ = Recorder::ForCall();
  return rec_ != nullptr;
}

void Call::Leave(CUresult rc) noexcept {
  if (rec_ == nullptr) return;
  try {
    DoLeave(rc);
  } catch (...) {
    WarnOnce("cuda-record", "recording a CUDA call failed; CUDA calls may be missing from the trace");
  }
}

void Call::DoLeave(CUresult rc) {
  CudaEvent e{};
  e.op = op_;
  e.rc = rc;
  e.device = -1;
  e.other = other;
  e.count = count;
  // Streams by the one the work is ordered on: 0 the legacy default stream,
  // 2 the per-thread one.
  uint64_t s = stream_out != nullptr ? (rc == kSuccess ? Handle(*stream_out) : 0) : Handle(stream);
  if (s == kStreamLegacy) s = kCudaLegacyStream;
  if (s == 0 && per_thread_ && OnStream(op_)) s = kCudaPerThreadStream;
  if (OnStream(op_)) e.stream = s;
  e.event = event_out != nullptr ? (rc == kSuccess ? Handle(*event_out) : 0) : Handle(event);
  if (graph_out != nullptr) {
    e.graph = rc == kSuccess ? Handle(*graph_out) : 0;
    e.other = Handle(graph);
  } else {
    e.graph = Handle(graph);
  }
  if (context != nullptr) e.other = Handle(context);

  switch (op_) {
    case CudaOp::kKernels: {
      if (rc == kSuccess && !EachLaunch(rec_)) {
        if (HandleState* st = g_streams.Find(s, true)) {
          st->kernels.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
      e.count = 1;
      break;
    }
    case CudaOp::kEventQuery:
    case CudaOp::kStreamQuery: {
      HandleTable& table = op_ == CudaOp::kEventQuery ? g_events : g_streams;
      HandleState* st = table.Find(op_ == CudaOp::kEventQuery ? e.event : s, true);
      if (st == nullptr) break;
      if (rc == kNotReady && st->not_ready.load(std::memory_order_relaxed)) {
        st->quiet_polls.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      st->not_ready.store(rc == kNotReady, std::memory_order_relaxed);
      e.count = st->quiet_polls.exchange(0, std::memory_order_relaxed);
      break;
    }
    case CudaOp::kSetDevice: {
      uint64_t ctx = Handle(context) + 1;
      if (rc == kSuccess && t_context == ctx) return;
      if (rc == kSuccess) t_context = ctx;
      break;
    }
    default:
      break;
  }

  e.device = CurrentDevice();
  if (op_ == CudaOp::kStreamCreate && rc == kSuccess) {
    if (HandleState* st = g_streams.Find(s, true)) {
      st->device_plus_1.store(e.device + 1, std::memory_order_relaxed);
      st->not_ready.store(false, std::memory_order_relaxed);
    }
  } else if (OnStream(op_)) {
    // Launches counted on the stream come before the operation that follows
    // them; new work makes the stream's next query worth writing.
    HandleState* st = g_streams.Find(s, false);
    WriteKernels(rec_, s, st, e.device);
    if (st != nullptr && op_ != CudaOp::kStreamQuery) st->not_ready.store(false, std::memory_order_relaxed);
  }
  if (op_ == CudaOp::kCtxSynchronize) FlushKernels(rec_);
  if (rc == kSuccess && op_ == CudaOp::kCtxSynchronize) ContextReached(context);
  // A null stream of a per-thread variant is the thread's own default stream,
  // which NCCL calls do not name that way.
  if (rc == kSuccess && op_ == CudaOp::kStreamSynchronize && (stream != nullptr || !per_thread_)) {
    StreamReached(stream);
  }
  if (op_ == CudaOp::kEventRecord || op_ == CudaOp::kEventDestroy) {
    if (HandleState* st = g_events.Find(e.event, false)) st->not_ready.store(false, std::memory_order_relaxed);
  }
  rec_->Append(EventKind::kCuda, e, call_site_);
}

void FlushKernels(Recorder* rec) {
  int32_t device = -1;
  g_streams.ForEach([&](uint64_t stream, HandleState& s) {
    if (s.kernels.load(std::memory_order_relaxed) == 0) return;
    if (device < 0) device = CurrentDevice();
    WriteKernels(rec, stream, &s, device);
  });
}

}  // namespace replay::interpose::cuda
