#include "nccl_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>
#include <thread>
#include <utility>

#if REPLAY_DRIVE_NCCL
#include <nccl.h>
#endif

#include "replay/op_shape.h"

namespace replay::drive {

bool NcclBackend::Reissues(OpKind kind) {
  // The collectives and messages of the recorder's NCCL table.
#define REPLAY_NCCL(name, shape, op_kind, ...)                                                        \
  if ((std::string_view(#shape) == "Coll" || std::string_view(#shape) == "P2p") && kind == OpKind::k##op_kind) { \
    return true;                                                                                      \
  }
#include "nccl_api.def"
#undef REPLAY_NCCL
  return false;
}

#if !REPLAY_DRIVE_NCCL

Result<std::unique_ptr<NcclBackend>> NcclBackend::Open(int) {
  return Status::Unavailable(
      "this replay-drive was built without NCCL's headers (no nccl.h from a CUDA toolkit at build time), so it has "
      "no NCCL backend; use --backend host");
}

#else

namespace {

// The CUDA driver's ABI, as far as the backend uses it (no cuda.h needed).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaNotReady = 600;
constexpr unsigned kStreamNonBlocking = 1;

struct CudaDriver {
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*StreamCreate)(cudaStream_t*, unsigned) = nullptr;
  CUresult (*StreamQuery)(cudaStream_t) = nullptr;
  CUresult (*StreamSynchronize)(cudaStream_t) = nullptr;
  CUresult (*StreamDestroy)(cudaStream_t) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, cudaStream_t) = nullptr;
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, cudaStream_t) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;  // optional
};

// NCCL's functions, typed by nccl.h: every one the recorder records
// (nccl_api.def), so that whatever a recording holds can be made again, and
// three it does not. They are taken from the global scope (a recorder's
// wrapper if one is preloaded) and are null where this NCCL lacks them.
// QuietAbort and QuietDestroy come straight from the library, for housekeeping
// the recording should not see.
struct Nccl {
#define REPLAY_NCCL(name, ...) decltype(&::name) name = nullptr;
#include "nccl_api.def"
#undef REPLAY_NCCL
  decltype(&::ncclGetVersion) ncclGetVersion = nullptr;
  decltype(&::ncclGetErrorString) ncclGetErrorString = nullptr;
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr;
  decltype(&::ncclCommAbort) QuietAbort = nullptr;
  decltype(&::ncclCommDestroy) QuietDestroy = nullptr;
};

// The functions no drive can do without; the others are optional, looked at
// where they are used (ncclCommSplit, for one, has a fallback).
#define REPLAY_DRIVE_NEEDS(X)                                                                          \
  X(ncclGetVersion) X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommCount)        \
  X(ncclCommUserRank) X(ncclCommGetAsyncError) X(ncclCommDestroy) X(ncclCommAbort) X(ncclGroupStart)     \
  X(ncclGroupEnd) X(ncclAllReduce) X(ncclBroadcast) X(ncclBcast) X(ncclReduce) X(ncclAllGather)          \
  X(ncclReduceScatter) X(ncclSend) X(ncclRecv)

// Looks `name` up: present only if `library` defines it; then, for calls the
// recording should see, the global definition (a preloaded wrapper first).
template <typename F>
void Resolve(void* library, const char* name, bool global, bool required, F* out, std::string* missing) {
  void* own = dlsym(library, name);
  void* f = own != nullptr && global ? dlsym(RTLD_DEFAULT, name) : own;
  if (f == nullptr) f = own;
  *out = reinterpret_cast<F>(f);
  if (f == nullptr && required) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

struct NcclType {
  ncclDataType_t type;
  size_t size;
  int64_t scale;  // elements of `type` per recorded element
};

NcclType TypeOf(DataType t, uint32_t recorded_size) {
  switch (t) {
    case DataType::kInt8: return {ncclInt8, 1, 1};
    case DataType::kUint8: return {ncclUint8, 1, 1};
    case DataType::kInt32: return {ncclInt32, 4, 1};
    case DataType::kUint32: return {ncclUint32, 4, 1};
    case DataType::kInt64: return {ncclInt64, 8, 1};
    case DataType::kUint64: return {ncclUint64, 8, 1};
    case DataType::kFloat16: return {ncclFloat16, 2, 1};
    case DataType::kBfloat16: return {ncclBfloat16, 2, 1};
    case DataType::kFloat32: return {ncclFloat32, 4, 1};
    case DataType::kFloat64: return {ncclFloat64, 8, 1};
    case DataType::kFp8E4M3: return {ncclFloat8e4m3, 1, 1};
    case DataType::kFp8E5M2: return {ncclFloat8e5m2, 1, 1};
    default: return {ncclUint8, 1, std::max<int64_t>(recorded_size, 1)};  // as bytes
  }
}

ncclRedOp_t RedOpOf(RedOp op) {
  switch (op) {
    case RedOp::kProd: return ncclProd;
    case RedOp::kMax: return ncclMax;
    case RedOp::kMin: return ncclMin;
    case RedOp::kAvg: return ncclAvg;
    default: return ncclSum;  // sum, and custom reductions (premultiplied sums)
  }
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class GpuNccl final : public NcclBackend {
 public:
  GpuNccl(CudaDriver cuda, Nccl nccl, int device, int devices, unsigned char fill)
      : cuda_(cuda), nccl_(nccl), device_(device), devices_(devices), fill_(fill) {}
  ~GpuNccl() override { Close(); }

  std::string Describe() const override {
    int v = 0;
    nccl_.ncclGetVersion(&v);
    char buf[128];
    std::snprintf(buf, sizeof(buf), "NCCL %d.%d.%d, CUDA device %d of %d", v / 10000, (v / 100) % 100, v % 100, device_,
                  devices_);
    return buf;
  }

  bool Has(uint64_t comm) const override { return comms_.count(comm) != 0; }

  Status InitFromUniqueId(uint64_t comm, MPI_Comm members) override {
    int size = 0, rank = 0;
    MPI_Comm_size(members, &size);
    MPI_Comm_rank(members, &rank);
    ncclUniqueId id{};
    ncclResult_t rc = ncclSuccess;
    if (rank == 0) rc = nccl_.ncclGetUniqueId(&id);
    // The id's maker tells the others when it has none, so that none waits for ever.
    int ok = rc == ncclSuccess ? 1 : 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, members);
    if (!ok) return Status::Unavailable("ncclGetUniqueId failed on the communicator's first rank");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, members);
    ncclComm_t c = nullptr;
    rc = nccl_.ncclCommInitRank(&c, size, id, rank);
    if (rc != ncclSuccess) return Failure("ncclCommInitRank", rc, c);
    return Adopt(comm, c, size, rank);
  }

  Status Split(uint64_t parent, int color, int key, uint64_t comm, MPI_Comm members) override {
    auto it = comms_.find(parent);
    ncclComm_t c = nullptr;
    Status split;
    if (it != comms_.end() && nccl_.ncclCommSplit != nullptr) {
      ncclResult_t rc = nccl_.ncclCommSplit(it->second.comm, color, key, &c, nullptr);
      if (rc != ncclSuccess) {
        split = Failure("ncclCommSplit", rc, it->second.comm);
        c = nullptr;
      }
    }
    if (members == MPI_COMM_NULL) {
      if (c != nullptr) nccl_.QuietDestroy(c);
      return split;
    }
    int size = 0, rank = 0;
    MPI_Comm_size(members, &size);
    MPI_Comm_rank(members, &rank);
    int same = c != nullptr ? 1 : 0;
    if (c != nullptr) {
      int n = -1, r = -1;
      nccl_.ncclCommCount(c, &n);
      nccl_.ncclCommUserRank(c, &r);
      same = n == size && r == rank ? 1 : 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, members);
    if (same) return Adopt(comm, c, size, rank);
    if (c != nullptr) nccl_.QuietDestroy(c);
    return InitFromUniqueId(comm, members);
  }

  Status Free(uint64_t comm, const std::string& api) override {
    auto it = comms_.find(comm);
    if (it == comms_.end()) return Status::Ok();
    ncclResult_t rc = ncclSuccess;
    if (api == "ncclCommFinalize") {
      if (nccl_.ncclCommFinalize != nullptr) rc = nccl_.ncclCommFinalize(it->second.comm);
      return rc == ncclSuccess ? Status::Ok() : Failure(api, rc, it->second.comm);
    }
    if (api == "ncclCommAbort") {
      rc = nccl_.ncclCommAbort(it->second.comm);
    } else if (api == "ncclCommDestroy") {
      rc = nccl_.ncclCommDestroy(it->second.comm);
    } else {
      return Status::Ok();  // revoke: the communicator stays until destroyed
    }
    cuda_.StreamDestroy(it->second.stream);
    comms_.erase(it);
    return rc == ncclSuccess ? Status::Ok() : Failure(api, rc, nullptr);
  }

  Status GroupStart() override {
    ++depth_;
    ncclResult_t rc = nccl_.ncclGroupStart();
    return rc == ncclSuccess ? Status::Ok() : Failure("ncclGroupStart", rc, nullptr);
  }

  Status GroupEnd(bool simulate) override {
    if (depth_ > 0) --depth_;
    ncclResult_t rc = ncclSuccess;
    if (simulate && nccl_.ncclGroupSimulateEnd != nullptr) {
      ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
      rc = nccl_.ncclGroupSimulateEnd(&info);
    } else {
      rc = nccl_.ncclGroupEnd();
    }
    return rc == ncclSuccess ? Status::Ok() : Failure(simulate ? "ncclGroupSimulateEnd" : "ncclGroupEnd", rc, nullptr);
  }

  int GroupDepth() const override { return depth_; }

  Status Issue(uint64_t comm, const NcclOp& op) override;
  WaitResult Wait(Clock::time_point deadline, std::string* what) override;

  void Abort() override {
    for (auto& [id, c] : comms_) nccl_.QuietAbort(c.comm);
    comms_.clear();
    pending_.clear();
    // Buffers and streams stay: work the abort interrupted may still touch them.
    busy_.clear();
    staged_.clear();
    free_.clear();
  }

  void Close() override {
    for (auto& [id, c] : comms_) {
      cuda_.StreamSynchronize(c.stream);
      nccl_.QuietDestroy(c.comm);
      cuda_.StreamDestroy(c.stream);
    }
    comms_.clear();
    pending_.clear();
    for (const auto& [bytes, ptr] : free_) cuda_.MemFree(ptr);
    for (const auto& [ptr, bytes] : busy_) cuda_.MemFree(ptr);
    free_.clear();
    busy_.clear();
    staged_.clear();
  }

 private:
  struct Comm {
    ncclComm_t comm;
    cudaStream_t stream;
    int size;
    int rank;
  };
  struct Pending {
    uint64_t comm;
    std::string what;
  };

  Status Adopt(uint64_t id, ncclComm_t c, int size, int rank) {
    cudaStream_t stream = nullptr;
    CUresult cr = cuda_.StreamCreate(&stream, kStreamNonBlocking);
    if (cr != kCudaSuccess) {
      nccl_.QuietDestroy(c);
      return Status::Unavailable("cuStreamCreate failed: " + CudaError(cr));
    }
    comms_[id] = Comm{c, stream, size, rank};
    return Status::Ok();
  }

  std::string CudaError(CUresult rc) const {
    const char* s = nullptr;
    if (cuda_.GetErrorString != nullptr) cuda_.GetErrorString(rc, &s);
    return s != nullptr ? s : "CUDA error " + std::to_string(rc);
  }

  std::string NcclError(ncclResult_t rc, ncclComm_t comm) const {
    const char* s = nccl_.ncclGetErrorString(rc);
    std::string out = s != nullptr ? s : "NCCL error " + std::to_string(static_cast<int>(rc));
    const char* last = nccl_.ncclGetLastError != nullptr ? nccl_.ncclGetLastError(comm) : nullptr;
    if (last != nullptr && *last != '\0') out += " (" + std::string(last) + ")";
    return out;
  }

  Status Failure(const std::string& api, ncclResult_t rc, ncclComm_t comm) const {
    return Status::Unavailable(api + " failed: " + NcclError(rc, comm));
  }

  // Device memory of at least `bytes`, busy until the next completed Wait.
  Result<CUdeviceptr> Acquire(size_t bytes) {
    bytes = std::max<size_t>((bytes + 255) / 256 * 256, 256);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      CUdeviceptr p = it->second;
      busy_.emplace_back(p, it->first);
      free_.erase(it);
      return p;
    }
    CUdeviceptr p = 0;
    CUresult rc = cuda_.MemAlloc(&p, bytes);
    if (rc != kCudaSuccess && !free_.empty()) {
      for (const auto& [size, ptr] : free_) cuda_.MemFree(ptr);
      free_.clear();
      rc = cuda_.MemAlloc(&p, bytes);
    }
    if (rc != kCudaSuccess) {
      return Status::Unavailable("cuMemAlloc of " + std::to_string(bytes) + " bytes failed: " + CudaError(rc));
    }
    busy_.emplace_back(p, bytes);
    return p;
  }

  CudaDriver cuda_;
  Nccl nccl_;
  int device_;
  int devices_;
  unsigned char fill_;
  int depth_ = 0;
  std::map<uint64_t, Comm> comms_;
  std::vector<Pending> pending_;
  std::multimap<size_t, CUdeviceptr> free_;           // bytes -> buffer
  std::vector<std::pair<CUdeviceptr, size_t>> busy_;  // in use by enqueued work
  std::vector<std::vector<char>> staged_;             // host bytes being copied
};

Status GpuNccl::Issue(uint64_t comm, const NcclOp& op) {
  auto it = comms_.find(comm);
  if (it == comms_.end()) return Status::InvalidArgument(op.api + " on a communicator the drive does not have");
  const Comm& c = it->second;
  const NcclType t = TypeOf(op.dtype, op.dtype_size);
  const size_t count = static_cast<size_t>(std::max<int64_t>(op.count, 0) * t.scale);
  if (!Reissues(op.kind)) return Status::InvalidArgument(op.api + " is not an operation the NCCL backend re-issues");
  // Every rank gets buffers as large as the operation's largest (op_shape.h):
  // NCCL checks the arguments of every rank alike.
  const OpTotals largest = LargestTotals(op.kind, static_cast<int64_t>(count), c.size);
  const size_t send = static_cast<size_t>(largest.send), recv = static_cast<size_t>(largest.recv);  // elements
  CUdeviceptr sbuf = 0, rbuf = 0;
  if (send > 0 || op.kind == OpKind::kSend) {
    auto p = Acquire(send * t.size);
    if (!p.ok()) return p.status();
    sbuf = *p;
    CUresult cr = kCudaSuccess;
    if (!op.payload.empty()) {
      staged_.push_back(op.payload);
      staged_.back().resize(send * t.size);
      cr = cuda_.MemcpyHtoDAsync(sbuf, staged_.back().data(), send * t.size, c.stream);
    } else if (send > 0) {
      cr = cuda_.MemsetD8Async(sbuf, fill_, send * t.size, c.stream);
    }
    if (cr != kCudaSuccess) return Status::Unavailable("filling a send buffer failed: " + CudaError(cr));
  }
  if (recv > 0 || op.kind != OpKind::kSend) {
    auto p = Acquire(recv * t.size);
    if (!p.ok()) return p.status();
    rbuf = *p;
  }
  auto* s = reinterpret_cast<void*>(sbuf);
  auto* r = reinterpret_cast<void*>(rbuf);
  const ncclRedOp_t red = RedOpOf(op.redop);
  ncclResult_t rc = ncclSuccess;
  auto missing = [&] { return Status::Unavailable(op.api + " is not in this NCCL (" + Describe() + ")"); };
  switch (op.kind) {
    case OpKind::kAllreduce: rc = nccl_.ncclAllReduce(s, r, count, t.type, red, c.comm, c.stream); break;
    case OpKind::kBcast:
      rc = op.api == "ncclBcast" ? nccl_.ncclBcast(c.rank == op.root ? s : r, count, t.type, op.root, c.comm, c.stream)
                                 : nccl_.ncclBroadcast(s, r, count, t.type, op.root, c.comm, c.stream);
      break;
    case OpKind::kReduce: rc = nccl_.ncclReduce(s, r, count, t.type, red, op.root, c.comm, c.stream); break;
    case OpKind::kAllgather: rc = nccl_.ncclAllGather(s, r, count, t.type, c.comm, c.stream); break;
    case OpKind::kReduceScatterBlock: rc = nccl_.ncclReduceScatter(s, r, count, t.type, red, c.comm, c.stream); break;
    case OpKind::kAlltoall:
      if (nccl_.ncclAlltoAll == nullptr) return missing();
      rc = nccl_.ncclAlltoAll(s, r, count, t.type, c.comm, c.stream);
      break;
    case OpKind::kGather:
      if (nccl_.ncclGather == nullptr) return missing();
      rc = nccl_.ncclGather(s, r, count, t.type, op.root, c.comm, c.stream);
      break;
    case OpKind::kScatter:
      if (nccl_.ncclScatter == nullptr) return missing();
      rc = nccl_.ncclScatter(s, r, count, t.type, op.root, c.comm, c.stream);
      break;
    case OpKind::kSend: rc = nccl_.ncclSend(s, count, t.type, op.peer, c.comm, c.stream); break;
    case OpKind::kRecv: rc = nccl_.ncclRecv(r, count, t.type, op.peer, c.comm, c.stream); break;
    default: return Status::InvalidArgument(op.api + " is recorded but not re-issued by the NCCL backend");
  }
  if (rc != ncclSuccess && rc != ncclInProgress) return Failure(op.api, rc, c.comm);
  std::string what = op.api;
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    what += (op.kind == OpKind::kSend ? " to rank " : " from rank ") + std::to_string(op.peer);
  } else if (op.seq != 0) {
    what += " #" + std::to_string(op.seq);
  }
  what += " on NCCL communicator " + Hex(comm);
  pending_.push_back({comm, what});
  return Status::Ok();
}

WaitResult GpuNccl::Wait(Clock::time_point deadline, std::string* what) {
  auto backoff = std::chrono::microseconds(20);
  for (;;) {
    for (size_t i = 0; i < pending_.size();) {
      auto it = comms_.find(pending_[i].comm);
      if (it == comms_.end()) {
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      CUresult q = cuda_.StreamQuery(it->second.stream);
      if (q == kCudaSuccess) {
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (q != kCudaNotReady) {
        *what = pending_[i].what + ": " + CudaError(q);
        return WaitResult::kFailed;
      }
      ncclResult_t async = ncclSuccess;
      if (nccl_.ncclCommGetAsyncError(it->second.comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        *what = pending_[i].what + ": " + NcclError(async, it->second.comm);
        return WaitResult::kFailed;
      }
      ++i;
    }
    if (pending_.empty()) {
      for (const auto& [ptr, bytes] : busy_) free_.emplace(bytes, ptr);
      busy_.clear();
      staged_.clear();
      return WaitResult::kDone;
    }
    if (Clock::now() >= deadline) {
      *what = pending_.front().what;
      return WaitResult::kTimedOut;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min<std::chrono::microseconds>(backoff * 2, std::chrono::milliseconds(5));
  }
}

}  // namespace

Result<std::unique_ptr<NcclBackend>> NcclBackend::Open(int local_rank) {
  // The driver first, so that NCCL (and a recorder) find it loaded.
  void* cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (cuda_lib == nullptr) {
    return Status::Unavailable(std::string("cannot load the CUDA driver, libcuda.so.1 (") + dlerror() + ")");
  }
  void* nccl_lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (nccl_lib == nullptr) return Status::Unavailable(std::string("cannot load libnccl.so.2 (") + dlerror() + ")");

  std::string missing;
  CudaDriver cu;
  Resolve(cuda_lib, "cuInit", true, true, &cu.Init, &missing);
  Resolve(cuda_lib, "cuDeviceGetCount", true, true, &cu.DeviceGetCount, &missing);
  Resolve(cuda_lib, "cuDeviceGet", true, true, &cu.DeviceGet, &missing);
  Resolve(cuda_lib, "cuDevicePrimaryCtxRetain", true, true, &cu.DevicePrimaryCtxRetain, &missing);
  Resolve(cuda_lib, "cuCtxSetCurrent", true, true, &cu.CtxSetCurrent, &missing);
  Resolve(cuda_lib, "cuStreamCreate", true, true, &cu.StreamCreate, &missing);
  Resolve(cuda_lib, "cuStreamQuery", true, true, &cu.StreamQuery, &missing);
  Resolve(cuda_lib, "cuStreamSynchronize", true, true, &cu.StreamSynchronize, &missing);
  Resolve(cuda_lib, "cuStreamDestroy_v2", true, true, &cu.StreamDestroy, &missing);
  Resolve(cuda_lib, "cuMemAlloc_v2", true, true, &cu.MemAlloc, &missing);
  Resolve(cuda_lib, "cuMemFree_v2", true, true, &cu.MemFree, &missing);
  Resolve(cuda_lib, "cuMemsetD8Async", true, true, &cu.MemsetD8Async, &missing);
  Resolve(cuda_lib, "cuMemcpyHtoDAsync_v2", true, true, &cu.MemcpyHtoDAsync, &missing);
  Resolve(cuda_lib, "cuGetErrorString", true, false, &cu.GetErrorString, &missing);
  if (!missing.empty()) return Status::Unavailable("libcuda.so.1 lacks " + missing);

  Nccl nc;
#define REPLAY_NCCL(name, ...) Resolve(nccl_lib, #name, true, false, &nc.name, &missing);
#include "nccl_api.def"
#undef REPLAY_NCCL
  Resolve(nccl_lib, "ncclGetVersion", true, false, &nc.ncclGetVersion, &missing);
  Resolve(nccl_lib, "ncclGetErrorString", true, false, &nc.ncclGetErrorString, &missing);
  Resolve(nccl_lib, "ncclGetLastError", true, false, &nc.ncclGetLastError, &missing);
#define REPLAY_DRIVE_NEED_(name) \
  if (nc.name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name;
  REPLAY_DRIVE_NEEDS(REPLAY_DRIVE_NEED_)
#undef REPLAY_DRIVE_NEED_
  // Housekeeping: NCCL's profiling alias, else the library's own definition.
  Resolve(nccl_lib, "pncclCommAbort", false, false, &nc.QuietAbort, &missing);
  Resolve(nccl_lib, "pncclCommDestroy", false, false, &nc.QuietDestroy, &missing);
  if (nc.QuietAbort == nullptr) Resolve(nccl_lib, "ncclCommAbort", false, true, &nc.QuietAbort, &missing);
  if (nc.QuietDestroy == nullptr) Resolve(nccl_lib, "ncclCommDestroy", false, true, &nc.QuietDestroy, &missing);
  if (!missing.empty()) return Status::Unavailable("libnccl.so.2 lacks " + missing);

  CUresult rc = cu.Init(0);
  int devices = 0;
  if (rc == kCudaSuccess) rc = cu.DeviceGetCount(&devices);
  if (rc != kCudaSuccess || devices <= 0) {
    return Status::Unavailable(rc != kCudaSuccess ? "cuInit failed (CUDA error " + std::to_string(rc) + ")"
                                                  : std::string("no CUDA device"));
  }
  const int ordinal = std::max(local_rank, 0) % devices;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  rc = cu.DeviceGet(&device, ordinal);
  if (rc == kCudaSuccess) rc = cu.DevicePrimaryCtxRetain(&ctx, device);
  if (rc == kCudaSuccess) rc = cu.CtxSetCurrent(ctx);
  if (rc != kCudaSuccess) {
    return Status::Unavailable("cannot make CUDA device " + std::to_string(ordinal) + " current (CUDA error " +
                               std::to_string(rc) + ")");
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Synthetic bytes: never above 0x3f, so finite in every floating format.
  const auto fill = static_cast<unsigned char>(0x20 | (world_rank & 0x1f));
  return std::unique_ptr<NcclBackend>(std::make_unique<GpuNccl>(cu, nc, ordinal, devices, fill));
}

#endif  // REPLAY_DRIVE_NCCL

}  // namespace replay::drive
