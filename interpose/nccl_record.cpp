#include "nccl_record.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda_events.h"
#include "log.h"
#include "nccl_profiler.h"
#include "record/fingerprint.h"
#include "replay/event_format.h"
#include "replay/op_shape.h"
#include "replay/session.h"
#include "util/hash.h"

namespace replay::interpose::nccl {
namespace {

// Whether device data of `bytes` bytes is copied to the host to be
// fingerprinted (and, at level data, stored): always at level data, up to the
// hash limit at level hash. Beyond it an operation carries no fingerprint.
bool StageDeviceData(const Recorder* rec, size_t bytes) {
  if (bytes == 0 || rec->level() == Level::kMeta) return false;
  return rec->level() == Level::kData || bytes <= rec->fingerprints().hash_limit;
}
// Per thread, as NCCL's own group state: nesting depth and the id of the
// outermost group, and the operations waiting for its end to be enqueued.
thread_local int t_group_depth = 0;
thread_local uint32_t t_group_id = 0;
thread_local std::vector<Pending> t_group_ops;
std::atomic<uint32_t> g_next_group{0};
std::atomic<uint64_t> g_next_request{1u << 30};  // apart from MPI's request ids

// Last asynchronous error seen per communicator, so a polling loop records a change once.
std::mutex g_async_mu;
std::map<uint64_t, ncclResult_t>& LastAsync() {
  static auto* m = new std::map<uint64_t, ncclResult_t>();
  return *m;
}

uint64_t Handle(ncclComm_t c) { return reinterpret_cast<uint64_t>(c); }

std::string ErrorString(ncclResult_t rc) {
  using Fn = const char* (*)(ncclResult_t);
  static Fn f = reinterpret_cast<Fn>(NcclFunction("ncclGetErrorString"));
  const char* s = f != nullptr ? f(rc) : nullptr;
  return s != nullptr ? s : ("NCCL error " + std::to_string(static_cast<int>(rc)));
}

int CommQuery(const char* fn, ncclComm_t comm, int fallback) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  Fn f = reinterpret_cast<Fn>(NcclFunction(fn));
  int v = fallback;
  if (f == nullptr || f(comm, &v) != ncclSuccess) return fallback;
  return v;
}

// The version of the NCCL the calls go to, in the header ("nccl": "2.28.9"),
// once per process.
void NoteNcclVersion(Recorder* rec) {
  static std::atomic<bool> noted{false};
  if (noted.exchange(true)) return;
  using Fn = ncclResult_t (*)(int*);
  Fn f = reinterpret_cast<Fn>(NcclFunction("ncclGetVersion"));
  int code = 0;
  if (f == nullptr || f(&code) != ncclSuccess || code <= 0) return;
  // NCCL codes versions as major*10000 + minor*100 + patch since 2.9, and
  // major*1000 + minor*100 + patch before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  rec->SetVersion("nccl", std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100));
}

}  // namespace

void Complete(Recorder* rec, const Pending& p) {
  // A captured operation has nothing to complete now, and nothing may be
  // enqueued after it: it would become part of the application's graph.
  if (p.captured) return;
  // The received bytes of a device operation, fingerprinted by a kernel after
  // it on its stream (its NaN/Inf scan of every element is what costs the
  // host most) and, at level data, copied there to page-locked memory, which
  // the host then only hashes whole to store it. Without the kernel the copy
  // is fingerprinted on the host.
  void* recv_stage = nullptr;
  cuda::DeviceFingerprint* recv_fp = nullptr;
  const bool data = rec->level() == Level::kData;
  // What was received is counted whole where nothing fingerprinted what was
  // sent into it (an in-place operation seen only by NCCL's profiler).
  const FingerprintPolicy* recv_policy =
      p.input_fingerprinted ? &rec->received_fingerprints() : &rec->fingerprints();
  if (p.device && p.recv != nullptr && p.bytes > 0 && rec->level() != Level::kMeta) {
    recv_fp = cuda::FingerprintOnDevice(p.recv, p.bytes, p.dtype, *recv_policy, p.stream);
  }
  if (p.device && p.recv != nullptr && (recv_fp == nullptr || data) && StageDeviceData(rec, p.bytes)) {
    recv_stage = cuda::StageFromDevice(p.recv, p.bytes, p.stream);
  }
  auto finish = [rec, p, recv_stage, recv_fp, recv_policy](int error) {
    if (error != 0) {
      // The stream failed before it reached the end of the operation: it did
      // not complete, and what the kernels and copies were to write is
      // unknown (their memory may have gone with the context), so none of it
      // is read or freed.
      if (p.send_fp != nullptr) cuda::AbandonFingerprint(p.send_fp);
      if (recv_fp != nullptr) cuda::AbandonFingerprint(recv_fp);
      if (Recorder::Peek() != rec) return;
      ErrorEvent e{ErrorSource::kCuda, error, p.comm};
      const std::string api = ApiName(static_cast<ApiId>(p.api));
      const bool p2p = api == "ncclSend" || api == "ncclRecv";
      rec->Append(EventKind::kError, e, 0, {},
                  api + (p2p ? " (peer seq " + std::to_string(p.peer_seq) : " (seq " + std::to_string(p.seq)) +
                      "): CUDA error " + std::to_string(error) +
                      " was reported on its stream before the operation was seen to complete on the GPU");
      return;
    }
    std::optional<Fingerprint> sent = p.sent, received_fp;
    if (p.send_fp != nullptr) sent = cuda::TakeFingerprint(p.send_fp);
    if (recv_fp != nullptr) received_fp = cuda::TakeFingerprint(recv_fp);
    struct Release {
      void* a;
      void* b;
      ~Release() {
        cuda::FreeStaging(a);
        cuda::FreeStaging(b);
      }
    } release{p.send_stage, recv_stage};
    if (Recorder::Peek() != rec) return;  // the trace closed meanwhile
    CompletionEvent c{};
    c.request = p.request;
    c.api = p.api;
    c.comm = p.comm;
    c.seq = p.seq;
    c.peer_seq = p.peer_seq;
    c.source = p.source;
    c.tag = 0;
    c.recv_count = p.received;
    c.flags = p.device ? op_flags::kDevice : 0;
    if (p.send_stage != nullptr) sent = FingerprintBuffer(p.send_stage, p.send_bytes, p.send_dtype, rec->fingerprints());
    if (sent) {
      const Fingerprint& f = *sent;
      c.send_hash = f.hash;
      c.send_nan = f.nan;
      c.send_inf = f.inf;
      c.flags |= op_flags::kHasSendHash;
    }
    const void* received = p.device ? recv_stage : p.recv;
    if (received_fp) {
      c.recv_hash = received_fp->hash;
      c.recv_nan = received_fp->nan;
      c.recv_inf = received_fp->inf;
      c.flags |= op_flags::kHasRecvHash;
      if (received_fp->counts_sampled) c.flags |= op_flags::kRecvSampled;
      if (rec->level() == Level::kData && received != nullptr) {
        uint64_t full = received_fp->sampled ? Hash64(received, p.bytes) : received_fp->hash;
        auto ref = rec->writer().StorePayload({static_cast<const uint8_t*>(received), p.bytes}, full);
        if (ref.ok()) {
          c.payload_hash = ref->hash;
          c.payload_size = ref->size;
        }
      }
    } else if (received != nullptr && p.bytes > 0 && rec->level() != Level::kMeta) {
      Fingerprint f = FingerprintBuffer(received, p.bytes, p.dtype, *recv_policy);
      c.recv_hash = f.hash;
      c.recv_nan = f.nan;
      c.recv_inf = f.inf;
      c.flags |= op_flags::kHasRecvHash;
      if (f.counts_sampled) c.flags |= op_flags::kRecvSampled;
      if (rec->level() == Level::kData) {
        uint64_t full = f.sampled ? Hash64(received, p.bytes) : f.hash;
        auto ref = rec->writer().StorePayload({static_cast<const uint8_t*>(received), p.bytes}, full);
        if (ref.ok()) {
          c.payload_hash = ref->hash;
          c.payload_size = ref->size;
        }
      }
    }
    rec->Append(EventKind::kCompletion, c, 0);
  };
  if (p.device && cuda::WatchStream(p.stream, finish)) return;
  if (p.device) {
    // Not watched because the stream has failed: the operation will not complete.
    if (int error = cuda::StreamError(p.stream); error != 0) {
      finish(error);
      return;
    }
  }
  if (p.device && (p.send_stage != nullptr || recv_stage != nullptr || p.send_fp != nullptr || recv_fp != nullptr)) {
    // Nothing tells when the copies and kernels are done: record the
    // completion without them, and leave the staging buffers and results to
    // the process rather than free memory they may still be writing.
    if (p.send_fp != nullptr) cuda::AbandonFingerprint(p.send_fp);
    if (recv_fp != nullptr) cuda::AbandonFingerprint(recv_fp);
    Pending bare = p;
    bare.send_stage = nullptr;
    bare.send_fp = nullptr;
    bare.recv = nullptr;
    Complete(rec, bare);
    return;
  }
  finish(0);
}

void Discard(const Pending& p) {
  void* stage = p.send_stage;
  cuda::DeviceFingerprint* fp = p.send_fp;
  if (stage == nullptr && fp == nullptr) return;
  if (!cuda::WatchStream(p.stream, [stage, fp](int error) {
        if (error != 0) {
          if (fp != nullptr) cuda::AbandonFingerprint(fp);
          return;
        }
        cuda::FreeStaging(stage);
        if (fp != nullptr) cuda::TakeFingerprint(fp);
      })) {
    // Left to the process: a copy or kernel may still be writing them.
    if (fp != nullptr) cuda::AbandonFingerprint(fp);
  }
}

SendSide TakeSendSide(Recorder* rec, const void* send, size_t bytes, DataType dtype, bool device,
                      cudaStream_t stream) {
  SendSide side;
  if (send == nullptr || bytes == 0 || rec->level() == Level::kMeta) return side;
  if (!device) {
    side.host = FingerprintBuffer(send, bytes, dtype, rec->fingerprints());
    return side;
  }
  side.fp = cuda::FingerprintOnDevice(send, bytes, dtype, rec->fingerprints(), stream);
  if (side.fp == nullptr && StageDeviceData(rec, bytes)) {
    side.stage = cuda::StageFromDevice(send, bytes, stream);
    if (side.stage != nullptr) side.stage_bytes = bytes;
  }
  return side;
}

OpArgs ArgsOf(OpKind kind, size_t count, int nranks, int rank, int root) {
  OpArgs a;
  a.kind = kind;
  a.size = a.peers = nranks;
  a.rank = rank;
  a.is_root = ShapeOf(kind).rooted && rank >= 0 && rank == root;
  a.root_copies = true;  // NCCL's root has a receive buffer of its own
  a.send_count = a.recv_count = static_cast<int64_t>(count);
  return a;
}

uint64_t NextRequest() { return g_next_request.fetch_add(1, std::memory_order_relaxed); }

void* NcclFunction(const char* name) {
  std::string alias = std::string("p") + name;
  void* f = dlsym(RTLD_DEFAULT, alias.c_str());
  return f != nullptr ? f : dlsym(RTLD_NEXT, name);
}

DataType TypeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return DataType::kInt8;
    case ncclUint8: return DataType::kUint8;
    case ncclInt32: return DataType::kInt32;
    case ncclUint32: return DataType::kUint32;
    case ncclInt64: return DataType::kInt64;
    case ncclUint64: return DataType::kUint64;
    case ncclFloat16: return DataType::kFloat16;
    case ncclFloat32: return DataType::kFloat32;
    case ncclFloat64: return DataType::kFloat64;
    case ncclBfloat16: return DataType::kBfloat16;
    case ncclFloat8e4m3: return DataType::kFp8E4M3;
    case ncclFloat8e5m2: return DataType::kFp8E5M2;
    default: return DataType::kUnknown;
  }
}

size_t SizeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

RedOp RedOpOf(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return RedOp::kSum;
    case ncclProd: return RedOp::kProd;
    case ncclMax: return RedOp::kMax;
    case ncclMin: return RedOp::kMin;
    case ncclAvg: return RedOp::kAvg;
    default: return RedOp::kCustom;
  }
}

uint64_t UniqueIdCommId(const ncclUniqueId* ids, int n) {
  return Hash64(ids, sizeof(ncclUniqueId) * static_cast<size_t>(std::max(n, 0)), 0x6e63636cull);
}

void CheckForStaticNccl(bool at_exit) {
  if (dlsym(RTLD_DEFAULT, "ncclGetVersion") != nullptr) return;
  // No NCCL symbol at all, yet a module that ships NCCL inside it.
  std::string culprit;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (std::strstr(name, "libtorch_cuda") != nullptr || std::strstr(name, "libnccl_static") != nullptr) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &culprit);
  if (culprit.empty() || nccl_profiler::Loaded()) return;
  // NCCL linked in reaches the recorder through its profiler plugin interface
  // when NCCL_PROFILER_PLUGIN names it (replay record sets it): only when it
  // has not by the end is anything lost.
  const char* plugin = std::getenv("NCCL_PROFILER_PLUGIN");
  if (plugin != nullptr && *plugin != '\0' && !at_exit) return;
  WarnOnce("static-nccl", "NCCL is linked into " + culprit +
                              " and did not load the recorder as its profiler plugin: its calls were not "
                              "recorded. Record with `replay record` (which sets NCCL_PROFILER_PLUGIN) and an "
                              "NCCL with profiler plugin v5 or later, or a build that loads libnccl.so.2.");
}

Mode Call::Begin() noexcept {
  if (!guard_.outermost()) return Mode::kPass;
  NoteProgramThread();
  if (rerun::Active() && !rerun::AllRanks()) {
    session_ = rerun::Get();
    if (session_ == nullptr) return Mode::kPass;
    return mode_ = Mode::kRerun;
  }
  if (shape_ == Shape::kQuery) return Mode::kPass;
  rec_ = Recorder::ForCall();
  if (rec_ == nullptr) return Mode::kPass;
  return mode_ = Mode::kRecord;
}

void Call::Enter() noexcept {
  if (mode_ != Mode::kRecord) return;
  try {
    DoEnter();
  } catch (...) {
    mode_ = Mode::kPass;
  }
}

void Call::Leave(ncclResult_t rc) noexcept {
  if (mode_ != Mode::kRecord) return;
  try {
    DoLeave(rc);
  } catch (...) {
  }
}

void Call::DoEnter() {
  op_.api = api_;
  op_.kind = kind_;
  op_.root = -1;
  op_.peer = kNoPeer;
  op_.recv_peer = kNoPeer;
  if (comm != nullptr) {
    cs_ = rec_->comms().Find(Handle(comm));
    if (cs_ != nullptr) op_.comm = cs_->id;
  }
  const size_t esize = SizeOf(datatype);
  switch (shape_) {
    case Shape::kGroup: {
      GroupEvent g{};
      g.api = api_;
      if (!group_end) {
        if (t_group_depth++ == 0) t_group_id = g_next_group.fetch_add(1) + 1;
        g.depth = static_cast<uint32_t>(t_group_depth);
      } else {
        g.is_end = true;
        g.depth = static_cast<uint32_t>(t_group_depth);
      }
      g.id = t_group_id;
      rec_->Append(EventKind::kGroup, g, call_site_);
      return;
    }
    case Shape::kColl:
    case Shape::kP2p: {
      op_.flags = op_flags::kNonBlocking;
      op_.request = NextRequest();
      op_.dtype = TypeOf(datatype);
      op_.dtype_size = static_cast<uint32_t>(esize);
      op_.count = static_cast<int64_t>(count);
      op_.stream = reinterpret_cast<uint64_t>(stream);
      op_.send_buf = reinterpret_cast<uint64_t>(sendbuff);
      op_.recv_buf = reinterpret_cast<uint64_t>(recvbuff);
      if (t_group_depth > 0) {
        op_.flags |= op_flags::kInGroup;
        op_.group = t_group_id;
      }
      const void* probe = sendbuff != nullptr ? sendbuff : recvbuff;
      device_ = cuda::IsDevicePointer(probe);
      if (device_) op_.flags |= op_flags::kDevice;
      captured_ = device_ && cuda::IsCapturing(stream);
      if (captured_) op_.flags |= op_flags::kGraphCaptured;
      if (shape_ == Shape::kColl) {
        if (cs_ != nullptr) op_.seq = cs_->NextCollective();
        op_.root = root;
        if (kind_ == OpKind::kAllreduce || kind_ == OpKind::kReduce || kind_ == OpKind::kReduceScatterBlock) {
          op_.redop = RedOpOf(op);
        }
      } else {
        op_.peer = peer;
        if (cs_ != nullptr) op_.peer_seq = kind_ == OpKind::kSend ? cs_->NextSend(peer) : cs_->NextRecv(peer);
      }
      // What this rank sends: the collective's input.
      op_.bytes = static_cast<uint64_t>(Totals(Args()).send) * esize;
      // Device data: a kernel that fingerprints the bytes it will send, or a
      // copy of them, enqueued ahead of the operation on its stream.
      SendSide side = TakeSendSide(rec_, sendbuff, op_.bytes, op_.dtype, device_, stream);
      send_fp_ = side.fp;
      send_stage_ = side.stage;
      send_stage_bytes_ = side.stage_bytes;
      if (side.host) {
        op_.send_hash = side.host->hash;
        op_.send_nan = side.host->nan;
        op_.send_inf = side.host->inf;
        op_.flags |= op_flags::kHasSendHash;
      }
      open_ = rec_->AppendCall(op_, call_site_, {});
      return;
    }
    case Shape::kSplit:
      if (cs_ != nullptr) op_.seq = parent_seq_ = cs_->NextCollective();
      op_.tag = color;
      rec_->Append(EventKind::kOp, op_, call_site_);
      return;
    case Shape::kFree:
      saved_comm_ = comm;
      if (cs_ != nullptr) op_.seq = cs_->NextCollective();
      rec_->Append(EventKind::kOp, op_, call_site_);
      return;
    case Shape::kInitRank:
    case Shape::kInitScalable:
    case Shape::kInitAll:
      op_.count = nranks;
      op_.root = rank;
      rec_->Append(EventKind::kOp, op_, call_site_);
      return;
    case Shape::kUniqueId:
    case Shape::kCall:
      op_.count = static_cast<int64_t>(count);
      rec_->Append(EventKind::kOp, op_, call_site_);
      return;
    case Shape::kQuery:
    case Shape::kAsyncError:
      return;
  }
}

void Call::AppendReturn(ncclResult_t rc) {
  ReturnEvent r{};
  r.api = api_;
  r.rc = rc;
  r.comm = op_.comm;
  r.seq = op_.seq;
  r.peer_seq = op_.peer_seq;
  r.request = op_.request;
  r.source = kNoPeer;
  r.recv_count = -1;
  if (open_) {
    open_ = false;
    rec_->AppendCallReturn(r, call_site_);
  } else {
    rec_->Append(EventKind::kReturn, r, call_site_);
  }
  if (rc != ncclSuccess && rc != ncclInProgress) AppendError(rc, op_.comm);
}

void Call::AppendError(ncclResult_t rc, uint64_t comm_id) {
  ErrorEvent e{ErrorSource::kNccl, static_cast<int32_t>(rc), comm_id};
  rec_->Append(EventKind::kError, e, call_site_, {}, std::string(ApiName(api_)) + ": " + ErrorString(rc));
}

OpArgs Call::Args() const {
  return ArgsOf(kind_, count, cs_ != nullptr ? cs_->size : 1, cs_ != nullptr ? cs_->rank : -1, root);
}

void Call::Enqueued() {
  const bool recv = kind_ == OpKind::kRecv;
  Pending p;
  p.request = op_.request;
  p.api = api_;
  p.comm = op_.comm;
  p.seq = op_.seq;
  p.peer_seq = op_.peer_seq;
  p.recv = recvbuff;
  p.bytes = static_cast<size_t>(Totals(Args()).recv) * SizeOf(datatype);
  p.dtype = TypeOf(datatype);
  p.stream = stream;
  p.device = device_;
  p.source = recv ? peer : kNoPeer;
  p.received = recv ? static_cast<int64_t>(count) : -1;
  p.send_stage = send_stage_;
  p.send_bytes = send_stage_bytes_;
  p.send_dtype = TypeOf(datatype);
  p.send_fp = send_fp_;
  p.input_fingerprinted = true;
  p.captured = captured_;
  send_stage_ = nullptr;
  send_fp_ = nullptr;
  if (t_group_depth > 0) {
    t_group_ops.push_back(p);
  } else {
    Complete(rec_, p);
  }
}

void Call::LeaveGroup(ncclResult_t rc) {
  if (!group_end) return;
  if (t_group_depth > 0) --t_group_depth;
  AppendReturn(rc);
  if (t_group_depth == 0) {
    // The outermost end enqueues everything the group held.
    std::vector<Pending> ops;
    ops.swap(t_group_ops);
    if (!simulate && (rc == ncclSuccess || rc == ncclInProgress)) {
      for (const Pending& p : ops) Complete(rec_, p);
    } else {
      for (const Pending& p : ops) Discard(p);
    }
  }
}

void Call::LeaveCreate(ncclResult_t rc) {
  AppendReturn(rc);
  if ((rc != ncclSuccess && rc != ncclInProgress) || newcomm == nullptr) return;
  auto announce = [&](ncclComm_t c, uint64_t id, uint64_t parent, int size, int my_rank, uint64_t uid) {
    if (c == nullptr) return;
    NoteNcclVersion(rec_);
    rec_->comms().Insert(Handle(c), id, size, my_rank, {});
    rec_->NoteNcclCommunicator(my_rank, size);
    nccl_profiler::NoteApiPath();
    CommCreateEvent e{};
    e.comm = id;
    e.parent = parent;
    e.api = api_;
    e.parent_seq = parent_seq_;
    e.color = color;
    e.key = key;
    e.size = size;
    e.rank = my_rank;
    e.handle = Handle(c);
    e.flags = comm_flags::kNccl;
    e.unique_id = uid;
    e.device = CommQuery("ncclCommCuDevice", c, -1);
    rec_->Append(EventKind::kCommCreate, e, call_site_);
  };
  switch (shape_) {
    case Shape::kInitRank: {
      uint64_t id = UniqueIdCommId(&init_id, 1);
      announce(*newcomm, id, 0, nranks, rank, id);
      return;
    }
    case Shape::kInitScalable: {
      uint64_t id = UniqueIdCommId(ids, n_ids);
      announce(*newcomm, id, 0, nranks, rank, id);
      return;
    }
    case Shape::kInitAll: {
      // One process drives all the devices: its communicators form one job.
      uint64_t id = HashCombine(0x616c6cull, static_cast<uint64_t>(getpid()));
      for (int i = 0; i < nranks; ++i) announce(newcomm[i], id, 0, nranks, i, 0);
      return;
    }
    case Shape::kSplit: {
      if (*newcomm == nullptr) return;  // NCCL_SPLIT_NOCOLOR
      uint64_t parent = op_.comm;
      int size = CommQuery("ncclCommCount", *newcomm, -1);
      int my_rank = CommQuery("ncclCommUserRank", *newcomm, -1);
      uint64_t id = DerivedCommId(parent, parent_seq_, shrink ? -1 : color);
      announce(*newcomm, id, parent, size, my_rank, 0);
      return;
    }
    default:
      return;
  }
}

void Call::DoLeave(ncclResult_t rc) {
  switch (shape_) {
    case Shape::kGroup:
      LeaveGroup(rc);
      return;
    case Shape::kColl:
    case Shape::kP2p:
      AppendReturn(rc);
      if (rc == ncclSuccess || rc == ncclInProgress) {
        Enqueued();
      } else {
        Pending p{};
        p.stream = stream;
        p.send_stage = send_stage_;
        p.send_fp = send_fp_;
        send_stage_ = nullptr;
        send_fp_ = nullptr;
        Discard(p);
      }
      return;
    case Shape::kInitRank:
    case Shape::kInitScalable:
    case Shape::kInitAll:
    case Shape::kSplit:
      LeaveCreate(rc);
      return;
    case Shape::kFree: {
      AppendReturn(rc);
      if (cs_ != nullptr) {
        CommFreeEvent f{cs_->id, api_, rc};
        rec_->Append(EventKind::kCommFree, f, call_site_);
        if (forget) rec_->comms().Remove(Handle(saved_comm_));
      }
      return;
    }
    case Shape::kUniqueId:
      AppendReturn(rc);
      if (rc == ncclSuccess && unique_id != nullptr) {
        // The id itself: a re-run of this rank hands the same bytes out again.
        static const char kHex[] = "0123456789abcdef";
        std::string hex;
        const auto* b = reinterpret_cast<const unsigned char*>(unique_id->internal);
        for (size_t i = 0; i < sizeof(unique_id->internal); ++i) {
          hex += kHex[b[i] >> 4];
          hex += kHex[b[i] & 15];
        }
        rec_->AppendInfo("nccl.unique_id", hex);
      }
      return;
    case Shape::kCall:
      AppendReturn(rc);
      return;
    case Shape::kAsyncError: {
      if (async_error == nullptr || rc != ncclSuccess) return;
      ncclResult_t now = *async_error;
      uint64_t id = op_.comm;
      std::lock_guard<std::mutex> lock(g_async_mu);
      auto [it, fresh] = LastAsync().emplace(id, ncclSuccess);
      if (it->second == now) return;
      it->second = now;
      if (now != ncclSuccess && now != ncclInProgress) AppendError(now, id);
      return;
    }
    case Shape::kQuery:
      return;
  }
}

}  // namespace replay::interpose::nccl
