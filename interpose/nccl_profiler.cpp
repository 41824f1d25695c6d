#include "nccl_profiler.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "api.h"
#include "cuda_events.h"
#include "guard.h"
#include "inert.h"
#include "log.h"
#include "replay/session.h"
#include "nccl_profiler_abi.h"
#include "nccl_record.h"
#include "record/recorder.h"
#include "util/hash.h"

namespace replay::interpose::nccl_profiler {
namespace {

namespace abi = replay::nccl_profiler;
using nccl::Complete;
using nccl::Pending;
using nccl::SendSide;
using nccl::TakeSendSide;

// The events the recorder asks NCCL for.
constexpr int kRecorded = abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch | abi::kColl | abi::kP2p;

// ---------------------------------------------------------------------------
// The plugin NCCL would have loaded, called in turn.

struct Chain {
  void* lib = nullptr;
  const abi::PluginV6* v6 = nullptr;
  const abi::PluginV5* v5 = nullptr;
  bool any() const { return v6 != nullptr || v5 != nullptr; }
  // Whether a communicator NCCL profiles at version 6 (`as_v6`) or 5 is
  // passed on at 6: the plugin's own newest, as NCCL would have chosen.
  bool AtV6(bool as_v6) const { return v6 != nullptr && (as_v6 || v5 == nullptr); }
  // Calls `f` with the plugin's interface at that version (all but start
  // take the same arguments at both).
  template <typename F>
  void Call(bool as_v6, F&& f) const {
    if (AtV6(as_v6)) {
      f(*v6);
    } else if (v5 != nullptr) {
      f(*v5);
    }
  }
};

const link_map* Self() {
  Dl_info info{};
  link_map* lm = nullptr;
  if (dladdr1(reinterpret_cast<const void*>(&Self), &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) == 0) {
    return nullptr;
  }
  return lm;
}

// NCCL's rules (its plugin_open.cc): NAME as given, then
// libnccl-profiler-NAME.so unless NAME is a path or a library name.
void* OpenPlugin(const std::string& name) {
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) return lib;
  dlerror();
  const bool library = name.starts_with("lib") && name.ends_with(".so");
  if (name.find('/') != std::string::npos || library) return nullptr;
  lib = dlopen(("libnccl-profiler-" + name + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) dlerror();
  return lib;
}

const Chain& TheChain() {
  static Chain chain;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* v = std::getenv(setting_names::nccl_profiler_plugin);
    std::string name = v != nullptr && *v != '\0' ? v : "libnccl-profiler.so";
    if (strcasecmp(name.c_str(), "none") == 0) return;
    void* lib = OpenPlugin(name);
    if (lib == nullptr) return;
    link_map* lm = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm == Self()) {  // the recorder itself
      dlclose(lib);
      return;
    }
    chain.lib = lib;
    chain.v6 = static_cast<const abi::PluginV6*>(dlsym(lib, abi::kSymbolV6));
    chain.v5 = static_cast<const abi::PluginV5*>(dlsym(lib, abi::kSymbolV5));
    if (!chain.any()) {
      WarnOnce("nccl-profiler-chain", "the NCCL profiler plugin " + name +
                                          " has neither ncclProfiler_v6 nor ncclProfiler_v5; NCCL's profiler calls "
                                          "are not passed on to it");
    }
  });
  return chain;
}

// Whether NCCL would have made an event of `type` for a plugin that asked
// for `mask` (an event is made when its type, or one of its descendants', is
// asked for): the chained plugin gets those only, as it would alone.
bool Wanted(uint64_t type, int mask) {
  constexpr uint64_t kBelowTask = abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;
  uint64_t makes = type;
  switch (type) {
    case abi::kGroupApi:
      makes = abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch | abi::kGroup | abi::kColl |
              abi::kP2p | kBelowTask;
      break;
    case abi::kCollApi: makes = abi::kCollApi | abi::kColl | kBelowTask; break;
    case abi::kP2pApi: makes = abi::kP2pApi | abi::kP2p | kBelowTask; break;
    case abi::kGroup: makes = abi::kGroup | abi::kColl | abi::kP2p | kBelowTask; break;
    case abi::kColl: makes = abi::kColl | kBelowTask; break;
    case abi::kP2p: makes = abi::kP2p | kBelowTask; break;
    case abi::kProxyOp: makes = abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin; break;
    case abi::kProxyStep: makes = abi::kProxyStep | abi::kNetPlugin; break;
    default: break;
  }
  return (makes & static_cast<uint64_t>(mask)) != 0;
}

// ---------------------------------------------------------------------------
// Communicators and events.

struct Context {
  Recorder* rec = nullptr;  // null: nothing of this communicator is recorded
  bool v6 = false;          // NCCL calls the v6 table
  void* chained = nullptr;  // the chained plugin's context
  int chained_mask = 0;     // the events it asked for
  uint64_t comm = 0;        // job-wide identity
  CommState* state = nullptr;
  int nranks = 0;
  int rank = -1;
};

// One event NCCL started. What an API event says is kept for the tasks made
// from it (which start after it stopped).
struct Ev {
  uint64_t type = 0;
  Context* ctx = nullptr;
  Ev* parent = nullptr;     // ours, or null
  void* chained = nullptr;  // the chained plugin's handle
  // API events.
  const char* func = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kUnknown;
  int root = -1;
  void* stream = nullptr;
  bool captured = false;
  // Group API events.
  uint32_t group = 0;  // the application's group id; 0 for NCCL's implicit group of one call
  uint64_t launch = 0;  // this group's id for its operations
  // Task events.
  uint64_t request = 0;
  // Kernel launch events: the launch window they interrupt.
  const void* outer_launch = nullptr;
};

// Events are never freed, and reused only after kQuarantine others were
// released since: NCCL hands a stopped event to its children as their parent.
class Pool {
 public:
  Ev* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() > kQuarantine) {
      Ev* e = free_.front();
      free_.pop_front();
      *e = Ev{};
      return e;
    }
    if (next_ == kChunk) {
      chunks_.push_back(std::make_unique<Ev[]>(kChunk));
      next_ = 0;
    }
    return &chunks_.back()[next_++];
  }
  void Give(Ev* e) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(e);
  }

 private:
  static constexpr size_t kQuarantine = 4096;
  static constexpr size_t kChunk = 256;
  std::mutex mu_;
  std::deque<Ev*> free_;
  std::vector<std::unique_ptr<Ev[]>> chunks_;
  size_t next_ = kChunk;
};

Pool& ThePool() {
  static auto* p = new Pool();
  return *p;
}

// An operation NCCL announced, until its completion is handed to the recorder.
struct Op {
  Context* ctx;
  uint64_t launch;  // its group's id
  bool returned;
  Pending pending;
  const void* send;  // out of place: what it sent, fingerprinted at completion
  size_t send_bytes;
  DataType send_dtype;
};

struct Ops {
  std::mutex mu;
  std::vector<Op> ops;
  std::vector<uint64_t> ended;  // groups whose end has passed with operations still to come
};
Ops& TheOps() {
  static auto* o = new Ops();
  return *o;
}

std::atomic<uint64_t> g_next_launch{1};
std::atomic<uint32_t> g_next_group{1u << 24};  // apart from the API interposer's group ids
std::atomic<uint64_t> g_comms_made{0};

// Which of NCCL's functions a task runs, as the trace names it.
struct Function {
  std::string_view nccl;
  ApiId api;
  OpKind kind;
};
constexpr Function kFunctions[] = {
    {"AllReduce", kApi_ncclAllReduce, OpKind::kAllreduce},
    {"Broadcast", kApi_ncclBroadcast, OpKind::kBcast},
    {"Reduce", kApi_ncclReduce, OpKind::kReduce},
    {"AllGather", kApi_ncclAllGather, OpKind::kAllgather},
    {"ReduceScatter", kApi_ncclReduceScatter, OpKind::kReduceScatterBlock},
    {"AlltoAll", kApi_ncclAlltoAll, OpKind::kAlltoall},
    {"Gather", kApi_ncclGather, OpKind::kGather},
    {"Scatter", kApi_ncclScatter, OpKind::kScatter},
    {"Send", kApi_ncclSend, OpKind::kSend},
    {"Recv", kApi_ncclRecv, OpKind::kRecv},
};
const Function* FunctionOf(const char* func) {
  if (func == nullptr) return nullptr;
  for (const Function& f : kFunctions) {
    if (f.nccl == func) return &f;
  }
  return nullptr;
}

// NCCL's names of its types. 2.28 names ncclUint8 "Unknown", and nothing else so.
DataType TypeOf(const char* name) {
  struct Name {
    std::string_view nccl;
    DataType type;
  };
  static constexpr Name kNames[] = {
      {"ncclInt8", DataType::kInt8},          {"ncclUint8", DataType::kUint8},
      {"Unknown", DataType::kUint8},          {"ncclInt32", DataType::kInt32},
      {"ncclUint32", DataType::kUint32},      {"ncclInt64", DataType::kInt64},
      {"ncclUint64", DataType::kUint64},      {"ncclFloat16", DataType::kFloat16},
      {"ncclFloat32", DataType::kFloat32},    {"ncclFloat64", DataType::kFloat64},
      {"ncclBfloat16", DataType::kBfloat16},  {"ncclFloat8e4m3", DataType::kFp8E4M3},
      {"ncclFloat8e5m2", DataType::kFp8E5M2},
  };
  if (name == nullptr) return DataType::kUnknown;
  for (const Name& n : kNames) {
    if (n.nccl == name) return n.type;
  }
  return DataType::kUnknown;
}

size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kUnknown: return 1;
    default: return 8;
  }
}

bool Rooted(OpKind k) {
  return k == OpKind::kBcast || k == OpKind::kReduce || k == OpKind::kGather || k == OpKind::kScatter;
}

// Whether NCCL's caller at `caller` is an NCCL whose calls the API
// interposer sees: the library the preload's NCCL functions forward to.
bool ApiPathSees(const void* caller) {
  void* f = nccl::NcclFunction("ncclAllReduce");
  Dl_info a{}, b{};
  return f != nullptr && dladdr(caller, &a) != 0 && dladdr(f, &b) != 0 && a.dli_fbase == b.dli_fbase;
}

void NotePath(Recorder* rec, const char* path) {
  static std::atomic<bool> api{false}, plugin{false};
  std::atomic<bool>& once = std::strcmp(path, "api") == 0 ? api : plugin;
  if (!once.exchange(true)) rec->AppendInfo("nccl.recorded_by", path);
}

// ---------------------------------------------------------------------------
// Completions.

// Hands operations NCCL has enqueued to the recorder's completion
// (nccl_record.h), each on its own stream: once ncclGroupEnd has returned,
// the streams of its operations wait for NCCL's kernels.
void Hand(std::vector<Op>& ops) {
  for (Op& op : ops) {
    Recorder* rec = op.ctx->rec;
    if (Recorder::Peek() != rec) continue;
    Pending& p = op.pending;
    if (op.send != nullptr && !p.captured) {
      SendSide side = TakeSendSide(rec, op.send, op.send_bytes, op.send_dtype, p.device, p.stream);
      p.send_fp = side.fp;
      p.send_stage = side.stage;
      p.send_bytes = side.stage_bytes;
      p.send_dtype = op.send_dtype;
      p.sent = side.host;
      p.input_fingerprinted = true;
    }
    Complete(rec, p);
  }
}

// The end of group `launch` has passed (`ended`), or an operation of it was
// enqueued: takes those of its operations that are enqueued, once its end
// has passed (operations NCCL announces later, from another thread, are
// handed over as they come).
std::vector<Op> TakeEnqueued(uint64_t launch, bool ended) {
  Ops& o = TheOps();
  std::lock_guard<std::mutex> lock(o.mu);
  auto e = std::find(o.ended.begin(), o.ended.end(), launch);
  if (ended && e == o.ended.end()) e = o.ended.insert(o.ended.end(), launch);
  std::vector<Op> taken;
  if (e == o.ended.end() && launch != 0) return taken;
  bool more = false;
  for (auto it = o.ops.begin(); it != o.ops.end();) {
    if (it->launch != launch) {
      ++it;
    } else if (it->returned) {
      taken.push_back(std::move(*it));
      it = o.ops.erase(it);
    } else {
      more = true;
      ++it;
    }
  }
  if (!more && e != o.ended.end()) o.ended.erase(e);
  return taken;
}

// ---------------------------------------------------------------------------
// The events.

void Announce(Context* ctx, uint64_t hash, const char* name, int nodes) {
  Recorder* rec = ctx->rec;
  ctx->comm = HashCombine(0x70726f66696c6572ull, hash);  // "profiler"
  ctx->state = rec->comms().Insert(reinterpret_cast<uint64_t>(ctx), ctx->comm, ctx->nranks, ctx->rank, {});
  CommCreateEvent e{};
  e.comm = ctx->comm;
  e.api = kApi_ncclProfilerInit;
  e.parent_seq = g_comms_made.fetch_add(1) + 1;
  e.size = ctx->nranks;
  e.rank = ctx->rank;
  e.device = cuda::CurrentDevice();
  e.handle = reinterpret_cast<uint64_t>(ctx);
  e.flags = comm_flags::kNccl;
  e.unique_id = hash;
  rec->Append(EventKind::kCommCreate, e, 0);
  char id[24];
  std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(ctx->comm));
  rec->AppendInfo("nccl.comm", std::string(id) + " hash=" + std::to_string(hash) + " nodes=" +
                                   std::to_string(nodes) + " name=" + (name != nullptr ? name : ""));
  rec->NoteNcclCommunicator(ctx->rank, ctx->nranks);
  NotePath(rec, "profiler plugin");
}

// The application's operation NCCL announced as task `ev`.
void StartTask(Ev* ev, const abi::DescrV6& d) {
  Context* ctx = ev->ctx;
  Recorder* rec = ctx->rec;
  const bool p2p = d.type == abi::kP2p;
  const Function* f = FunctionOf(p2p ? d.p2p.func : d.coll.func);
  if (f == nullptr) return;
  const Ev* api = ev->parent != nullptr && (ev->parent->type == abi::kCollApi || ev->parent->type == abi::kP2pApi)
                      ? ev->parent
                      : nullptr;
  const Ev* group = api != nullptr && api->parent != nullptr && api->parent->type == abi::kGroupApi ? api->parent
                                                                                                    : nullptr;
  OpEvent op{};
  op.api = f->api;
  op.kind = f->kind;
  op.flags = op_flags::kNonBlocking;
  op.request = ev->request = nccl::NextRequest();
  op.comm = ctx->comm;
  op.root = -1;
  op.peer = kNoPeer;
  op.recv_peer = kNoPeer;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  if (p2p) {
    op.dtype = TypeOf(d.p2p.datatype);
    count = d.p2p.count;
    op.peer = d.p2p.peer;
    if (f->kind == OpKind::kSend) {
      send = d.p2p.buff;
      op.peer_seq = ctx->state->NextSend(op.peer);
    } else {
      recv = d.p2p.buff;
      op.peer_seq = ctx->state->NextRecv(op.peer);
    }
  } else {
    // The application's count and type: NCCL counts AllGather and Broadcast
    // in bytes in its task.
    op.dtype = api != nullptr ? api->dtype : TypeOf(d.coll.datatype);
    count = api != nullptr ? api->count : d.coll.count;
    if (Rooted(f->kind)) op.root = d.coll.root;
    send = d.coll.send;
    recv = d.coll.recv;
    op.seq = ctx->state->NextCollective();
  }
  const size_t esize = SizeOf(op.dtype);
  op.dtype_size = static_cast<uint32_t>(esize);
  op.count = static_cast<int64_t>(count);
  op.stream = reinterpret_cast<uint64_t>(api != nullptr ? api->stream : nullptr);
  op.send_buf = reinterpret_cast<uint64_t>(send);
  op.recv_buf = reinterpret_cast<uint64_t>(recv);
  const OpTotals totals = Totals(nccl::ArgsOf(f->kind, count, ctx->nranks, ctx->rank, op.root));
  op.bytes = static_cast<uint64_t>(totals.send) * esize;
  if (group != nullptr && group->group != 0) {
    op.flags |= op_flags::kInGroup;
    op.group = group->group;
  }
  const bool captured = api != nullptr && api->captured;
  if (captured) op.flags |= op_flags::kGraphCaptured;
  // NCCL may announce it from a CUDA host callback, where the driver
  // answers nothing: memory of unknown kind is not read at all.
  const cuda::Memory memory = captured ? cuda::Memory::kUnknown : cuda::MemoryOf(send != nullptr ? send : recv);
  const bool device = memory != cuda::Memory::kHost;
  if (device) op.flags |= op_flags::kDevice;
  // In place, or writing into what it sends (an in-place AllGather or
  // ReduceScatter): what it sent is not there after it.
  const size_t recv_bytes = static_cast<size_t>(totals.recv) * esize;
  const auto* s = static_cast<const char*>(send);
  const auto* r = static_cast<const char*>(recv);
  const bool overlap = send != nullptr && recv != nullptr && op.bytes > 0 && recv_bytes > 0 && s < r + recv_bytes &&
                       r < s + op.bytes;
  if (send != nullptr && send == recv) op.flags |= op_flags::kInPlace;
  rec->Append(EventKind::kOp, op, 0);

  Op pending{};
  pending.ctx = ctx;
  pending.launch = group != nullptr ? group->launch : 0;
  pending.returned = false;
  Pending& p = pending.pending;
  p.request = op.request;
  p.api = op.api;
  p.comm = op.comm;
  p.seq = op.seq;
  p.peer_seq = op.peer_seq;
  p.recv = memory != cuda::Memory::kUnknown ? recv : nullptr;
  p.bytes = recv_bytes;
  p.dtype = op.dtype;
  p.stream = reinterpret_cast<cudaStream_t>(op.stream);
  p.device = device;
  p.source = f->kind == OpKind::kRecv ? op.peer : kNoPeer;
  p.received = f->kind == OpKind::kRecv ? static_cast<int64_t>(count) : -1;
  p.captured = captured;
  // What an in-place operation sent is gone by the time NCCL tells of it.
  pending.send = overlap || memory == cuda::Memory::kUnknown ? nullptr : send;
  pending.send_bytes = op.bytes;
  pending.send_dtype = op.dtype;
  Ops& o = TheOps();
  std::lock_guard<std::mutex> lock(o.mu);
  o.ops.push_back(std::move(pending));
}

// NCCL has enqueued task `ev`.
void StopTask(Ev* ev) {
  if (ev->request == 0) return;
  uint64_t launch = 0;
  ReturnEvent r{};
  {
    Ops& o = TheOps();
    std::lock_guard<std::mutex> lock(o.mu);
    for (Op& op : o.ops) {
      if (op.pending.request != ev->request) continue;
      op.returned = true;
      launch = op.launch;
      r.api = op.pending.api;
      r.comm = op.pending.comm;
      r.seq = op.pending.seq;
      r.peer_seq = op.pending.peer_seq;
      break;
    }
  }
  r.rc = ncclSuccess;
  r.request = ev->request;
  r.source = kNoPeer;
  r.recv_count = -1;
  ev->ctx->rec->Append(EventKind::kReturn, r, 0);
  std::vector<Op> now = TakeEnqueued(launch, false);
  Hand(now);
}

void StartGroup(Ev* ev, const abi::DescrV6& d) {
  ev->launch = g_next_launch.fetch_add(1);
  t_nccl_launch = nullptr;  // a new group: whatever the last one left is over
  // Depth 1 is the implicit group NCCL opens around a single call.
  if (d.group_api.group_depth <= 1) return;
  ev->group = g_next_group.fetch_add(1);
  GroupEvent g{};
  g.api = kApi_ncclGroupStart;
  g.id = ev->group;
  g.depth = static_cast<uint32_t>(d.group_api.group_depth - 1);
  ev->ctx->rec->Append(EventKind::kGroup, g, 0);
}

void StopGroup(Ev* ev) {
  if (t_nccl_launch == ev) t_nccl_launch = nullptr;
  if (ev->group != 0) {
    GroupEvent g{};
    g.api = kApi_ncclGroupEnd;
    g.is_end = true;
    g.id = ev->group;
    g.depth = 1;
    ev->ctx->rec->Append(EventKind::kGroup, g, 0);
  }
  std::vector<Op> now = TakeEnqueued(ev->launch, true);
  Hand(now);
}

// ---------------------------------------------------------------------------
// The plugin's entry points, one implementation for both tables.

std::atomic<bool> g_loaded{false};

ncclResult_t Init(void** context, uint64_t hash, int* mask, const char* name, int nodes, int nranks, int rank,
                  abi::DebugLogger log, bool v6, const void* caller) noexcept {
  if (context == nullptr || mask == nullptr) return ncclInvalidArgument;
  g_loaded.store(true, std::memory_order_relaxed);
  *context = nullptr;
  try {
    auto* ctx = new Context();
    ctx->v6 = v6;
    ctx->nranks = nranks;
    ctx->rank = rank;
    int chained_mask = 0;
    const Chain& chain = TheChain();
    if (chain.any()) {
      ncclResult_t r = ncclSuccess;
      chain.Call(v6, [&](const auto& p) {
        r = p.init(&ctx->chained, hash, &chained_mask, name, nodes, nranks, rank, log);
      });
      if (r != ncclSuccess) {
        ctx->chained = nullptr;
        chained_mask = 0;
      }
      ctx->chained_mask = chained_mask;
    }
    Guard guard;
    const bool record = !Inert() && !rerun::Active() && !ApiPathSees(caller);
    if (record) {
      Recorder* rec = Recorder::Get();
      if (rec != nullptr && rec->recording()) {
        ctx->rec = rec;
        Announce(ctx, hash, name, nodes);
      }
    }
    *mask = (ctx->rec != nullptr ? kRecorded : 0) | chained_mask;
    *context = ctx;
    return ncclSuccess;
  } catch (...) {
    *mask = 0;
    return ncclInternalError;
  }
}

ncclResult_t Start(void* context, void** handle, abi::DescrV6* d, bool v6) noexcept {
  if (handle == nullptr) return ncclInvalidArgument;
  *handle = nullptr;
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr || d == nullptr) return ncclSuccess;
  try {
    const Chain& chain = TheChain();
    const bool ours = ctx->rec != nullptr && (d->type & kRecorded) != 0;
    const bool theirs = ctx->chained != nullptr && Wanted(d->type, ctx->chained_mask);
    if (!ours && !theirs) return ncclSuccess;
    Ev* ev = ThePool().Take();
    ev->type = d->type;
    ev->ctx = ctx;
    // A proxy event's parent may be another process's (NCCL's PXN).
    const bool local_parent = d->type != abi::kProxyOp || d->proxy_op.pid == getpid();
    ev->parent = local_parent ? static_cast<Ev*>(d->parent) : nullptr;
    if (theirs) {
      abi::DescrV6 c = *d;
      auto chained_of = [](void* p) { return p != nullptr ? static_cast<Ev*>(p)->chained : nullptr; };
      if (local_parent) c.parent = chained_of(d->parent);
      if (d->type == abi::kColl) c.coll.parent_group = chained_of(d->coll.parent_group);
      if (d->type == abi::kP2p) c.p2p.parent_group = chained_of(d->p2p.parent_group);
      const bool ce = (d->type & (abi::kCeColl | abi::kCeSync | abi::kCeBatch)) != 0;
      if (chain.AtV6(v6)) {
        chain.v6->start(ctx->chained, &ev->chained, &c);
      } else if (!ce) {
        chain.v5->start(ctx->chained, &ev->chained, reinterpret_cast<abi::DescrV5*>(&c));
      }
    }
    if (ours) {
      Guard guard;
      // NCCL reports an API event on the thread that made the call.
      if ((d->type & (abi::kGroupApi | abi::kCollApi | abi::kP2pApi)) != 0) NoteProgramThread();
      switch (d->type) {
        case abi::kGroupApi:
          ev->captured = d->group_api.graph_captured;
          StartGroup(ev, *d);
          break;
        case abi::kCollApi:
          ev->func = d->coll_api.func;
          ev->count = d->coll_api.count;
          ev->dtype = TypeOf(d->coll_api.datatype);
          ev->root = d->coll_api.root;
          ev->stream = d->coll_api.stream;
          ev->captured = d->coll_api.graph_captured;
          break;
        case abi::kP2pApi:
          ev->func = d->p2p_api.func;
          ev->count = d->p2p_api.count;
          ev->dtype = TypeOf(d->p2p_api.datatype);
          ev->stream = d->p2p_api.stream;
          ev->captured = d->p2p_api.graph_captured;
          break;
        case abi::kKernelLaunch:
          ev->stream = d->kernel_launch.stream;
          ev->outer_launch = t_nccl_launch;
          t_nccl_launch = ev;  // the launch is NCCL's own
          break;
        case abi::kColl:
        case abi::kP2p:
          StartTask(ev, *d);
          break;
        default:
          break;
      }
    }
    *handle = ev;
  } catch (...) {
    WarnOnce("nccl-profiler", "recording an NCCL profiler event failed; NCCL operations may be missing from the trace");
  }
  return ncclSuccess;
}

ncclResult_t Stop(void* handle) noexcept {
  auto* ev = static_cast<Ev*>(handle);
  if (ev == nullptr || ev->ctx == nullptr) return ncclSuccess;
  try {
    Context* ctx = ev->ctx;
    const Chain& chain = TheChain();
    if (ev->chained != nullptr) chain.Call(ctx->v6, [&](const auto& p) { p.stop(ev->chained); });
    if (ctx->rec != nullptr && Recorder::Peek() == ctx->rec) {
      Guard guard;
      switch (ev->type) {
        case abi::kGroupApi: StopGroup(ev); break;
        case abi::kKernelLaunch:
          if (t_nccl_launch == ev) t_nccl_launch = ev->outer_launch;
          break;
        case abi::kColl:
        case abi::kP2p: StopTask(ev); break;
        default: break;
      }
    }
  } catch (...) {
    WarnOnce("nccl-profiler", "recording an NCCL profiler event failed; NCCL operations may be missing from the trace");
  }
  ThePool().Give(ev);
  return ncclSuccess;
}

ncclResult_t Record(void* handle, int state, abi::StateArgs* args) noexcept {
  auto* ev = static_cast<Ev*>(handle);
  if (ev == nullptr || ev->ctx == nullptr) return ncclSuccess;
  const Chain& chain = TheChain();
  if (ev->chained != nullptr) chain.Call(ev->ctx->v6, [&](const auto& p) { p.record(ev->chained, state, args); });
  // From here to the end of the group, NCCL launches its work.
  if (ev->ctx->rec != nullptr && ev->type == abi::kGroupApi && state == abi::kGroupEndApiStart) t_nccl_launch = ev;
  return ncclSuccess;
}

ncclResult_t Finalize(void* context) noexcept {
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr) return ncclSuccess;
  try {
    const Chain& chain = TheChain();
    if (ctx->chained != nullptr) chain.Call(ctx->v6, [&](const auto& p) { p.finalize(ctx->chained); });
    if (ctx->rec != nullptr && Recorder::Peek() == ctx->rec) {
      Guard guard;
      CommFreeEvent f{ctx->comm, kApi_ncclProfilerFinalize, ncclSuccess};
      ctx->rec->Append(EventKind::kCommFree, f, 0);
      ctx->rec->comms().Remove(reinterpret_cast<uint64_t>(ctx));
    }
  } catch (...) {
  }
  // The context itself stays: an event NCCL still holds may point to it.
  return ncclSuccess;
}

// The tables NCCL finds.
ncclResult_t InitV5(void** context, uint64_t hash, int* mask, const char* name, int nodes, int nranks, int rank,
                    abi::DebugLogger log) {
  return Init(context, hash, mask, name, nodes, nranks, rank, log, false, __builtin_return_address(0));
}
ncclResult_t InitV6(void** context, uint64_t hash, int* mask, const char* name, int nodes, int nranks, int rank,
                    abi::DebugLogger log) {
  return Init(context, hash, mask, name, nodes, nranks, rank, log, true, __builtin_return_address(0));
}
ncclResult_t StartV5(void* context, void** handle, abi::DescrV5* d) {
  abi::DescrV6 wide{};
  if (d != nullptr) std::memcpy(&wide, d, sizeof(*d));
  return Start(context, handle, d != nullptr ? &wide : nullptr, false);
}
ncclResult_t StartV6(void* context, void** handle, abi::DescrV6* d) { return Start(context, handle, d, true); }

}  // namespace

bool Loaded() { return g_loaded.load(std::memory_order_relaxed); }

void NoteApiPath() {
  if (Recorder* rec = Recorder::Peek()) NotePath(rec, "api");
}

}  // namespace replay::interpose::nccl_profiler

namespace abi = replay::nccl_profiler;
namespace plugin = replay::interpose::nccl_profiler;

extern "C" __attribute__((visibility("default"))) const abi::PluginV5 ncclProfiler_v5 = {
    "replay", &plugin::InitV5, &plugin::StartV5, &plugin::Stop, &plugin::Record, &plugin::Finalize};
extern "C" __attribute__((visibility("default"))) const abi::PluginV6 ncclProfiler_v6 = {
    "replay", &plugin::InitV6, &plugin::StartV6, &plugin::Stop, &plugin::Record, &plugin::Finalize};
