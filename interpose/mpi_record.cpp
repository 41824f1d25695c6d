#include "mpi_record.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "log.h"
#include "mpi_buffers.h"
#include "replay/op_shape.h"
#include "replay/session.h"
#include "util/hash.h"

namespace replay::interpose::mpi {

static thread_local std::vector<MPI_Status> t_statuses;
thread_local std::vector<MPI_Request> t_saved;
static thread_local std::vector<unsigned char> t_pack;
static thread_local std::vector<int64_t> t_list;

// ---------------------------------------------------------------------------
// Datatypes

DataType NamedType(const char* name, int size) {
  struct Entry {
    const char* name;
    DataType dt;
  };
  static const Entry kNamed[] = {
      {"MPI_FLOAT", DataType::kFloat32}, {"MPI_DOUBLE", DataType::kFloat64},
      {"MPI_LONG_DOUBLE", DataType::kFloat128}, {"MPI_CHAR", DataType::kInt8},
      {"MPI_SIGNED_CHAR", DataType::kInt8}, {"MPI_UNSIGNED_CHAR", DataType::kUint8},
      {"MPI_BYTE", DataType::kByte}, {"MPI_PACKED", DataType::kByte},
      {"MPI_SHORT", DataType::kInt16}, {"MPI_UNSIGNED_SHORT", DataType::kUint16},
      {"MPI_INT8_T", DataType::kInt8}, {"MPI_UINT8_T", DataType::kUint8},
      {"MPI_INT16_T", DataType::kInt16}, {"MPI_UINT16_T", DataType::kUint16},
      {"MPI_INT32_T", DataType::kInt32}, {"MPI_UINT32_T", DataType::kUint32},
      {"MPI_INT64_T", DataType::kInt64}, {"MPI_UINT64_T", DataType::kUint64},
      {"MPI_C_BOOL", DataType::kBool}, {"MPI_CXX_BOOL", DataType::kBool},
      {"MPI_C_COMPLEX", DataType::kComplex64}, {"MPI_C_FLOAT_COMPLEX", DataType::kComplex64},
      {"MPI_CXX_FLOAT_COMPLEX", DataType::kComplex64}, {"MPI_C_DOUBLE_COMPLEX", DataType::kComplex128},
      {"MPI_CXX_DOUBLE_COMPLEX", DataType::kComplex128}, {"MPI_FLOAT_INT", DataType::kPair},
      {"MPI_DOUBLE_INT", DataType::kPair}, {"MPI_LONG_INT", DataType::kPair},
      {"MPI_2INT", DataType::kPair}, {"MPI_SHORT_INT", DataType::kPair},
      {"MPI_LONG_DOUBLE_INT", DataType::kPair},
  };
  for (const Entry& e : kNamed) {
    if (std::strcmp(name, e.name) == 0) return e.dt;
  }
  // Integer types named by C type: classify by size and signedness.
  bool is_unsigned = std::strstr(name, "UNSIGNED") != nullptr;
  if (std::strstr(name, "INT") != nullptr || std::strstr(name, "LONG") != nullptr ||
      std::strstr(name, "AINT") != nullptr || std::strstr(name, "OFFSET") != nullptr ||
      std::strstr(name, "COUNT") != nullptr || std::strcmp(name, "MPI_UNSIGNED") == 0 ||
      std::strcmp(name, "MPI_WCHAR") == 0) {
    switch (size) {
      case 1: return is_unsigned ? DataType::kUint8 : DataType::kInt8;
      case 2: return is_unsigned ? DataType::kUint16 : DataType::kInt16;
      case 4: return is_unsigned ? DataType::kUint32 : DataType::kInt32;
      case 8: return is_unsigned ? DataType::kUint64 : DataType::kInt64;
      default: break;
    }
  }
  return DataType::kUnknown;
}

TypeInfo DescribeUncached(MPI_Datatype t, int depth);

// Hash of a derived type's construction (combiners, counts and basic types),
// and its single basic type if it has one.
uint64_t Signature(MPI_Datatype t, int depth, DataType* base) {
  const MpiAbi& abi = Abi();
  int ni = 0, na = 0, nd = 0, comb = 0;
  if (depth > 8 || abi.Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) return 0;
  if (comb == MPI_COMBINER_NAMED) {
    TypeInfo leaf = DescribeUncached(t, depth + 1);
    if (*base == DataType::kUnknown) {
      *base = leaf.dt;
    } else if (*base != leaf.dt) {
      *base = DataType::kDerived;  // mixed: no single basic type
    }
    return HashCombine(static_cast<uint64_t>(leaf.dt) + 1, leaf.size);
  }
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> aints(static_cast<size_t>(na));
  std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
  if (abi.Type_get_contents(t, ni, na, nd, ints.data(), aints.data(), types.data()) != MPI_SUCCESS) {
    return 0;
  }
  // The byte displacements and extents (the address arguments) are layout, not
  // signature, and often taken from the addresses of the program's buffers,
  // which differ from run to run: they are left out.
  uint64_t h = Hash64(ints.data(), ints.size() * sizeof(int), static_cast<uint64_t>(comb));
  for (MPI_Datatype child : types) {
    h = HashCombine(h, Signature(child, depth + 1, base));
    int cni, cna, cnd, ccomb;
    if (abi.Type_get_envelope(child, &cni, &cna, &cnd, &ccomb) == MPI_SUCCESS &&
        ccomb != MPI_COMBINER_NAMED) {
      abi.Type_free(&child);
    }
  }
  return h;
}

TypeInfo DescribeUncached(MPI_Datatype t, int depth) {
  const MpiAbi& abi = Abi();
  TypeInfo info;
  if (t == nullptr || t == abi.datatype_null) return info;
  int size = 0;
  MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
  abi.Type_size(t, &size);
  abi.Type_get_extent(t, &lb, &extent);
  abi.Type_get_true_extent(t, &tlb, &textent);
  info.size = static_cast<uint32_t>(std::max(size, 0));
  info.extent = extent;
  info.contiguous = lb == 0 && tlb == 0 && extent == size && textent == size;
  int ni = 0, na = 0, nd = 0, comb = 0;
  abi.Type_get_envelope(t, &ni, &na, &nd, &comb);
  if (comb == MPI_COMBINER_NAMED) {
    char name[MPI_MAX_OBJECT_NAME] = {};
    int len = 0;
    abi.Type_get_name(t, name, &len);
    info.dt = NamedType(name, size);
    info.base = info.dt;
    return info;
  }
  info.dt = DataType::kDerived;
  info.sig = Signature(t, depth, &info.base);
  if (info.base == DataType::kDerived) info.base = DataType::kUnknown;
  return info;
}

// Handle -> TypeInfo, lock-free to read. Entries are never freed (a racing
// reader may hold one); MPI_Type_free drops the mapping.
class TypeCache {
 public:
  const TypeInfo& Get(MPI_Datatype t) {
    uintptr_t key = reinterpret_cast<uintptr_t>(t);
    size_t start = (key >> 4) * 0x9e3779b97f4a7c15ull >> 54;  // 10 bits
    for (size_t i = 0; i < kSlots; ++i) {
      Slot& s = slots_[(start + i) & (kSlots - 1)];
      uintptr_t k = s.key.load(std::memory_order_acquire);
      if (k == key) {
        if (const TypeInfo* v = s.value.load(std::memory_order_acquire)) return *v;
        break;
      }
      if (k == 0) break;
    }
    return Insert(t, key, start);
  }
  void Drop(MPI_Datatype t) {
    uintptr_t key = reinterpret_cast<uintptr_t>(t);
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : slots_) {
      if (s.key.load() == key) s.value.store(nullptr, std::memory_order_release);
    }
  }

 private:
  static constexpr size_t kSlots = 1024;
  struct Slot {
    std::atomic<uintptr_t> key{0};
    std::atomic<const TypeInfo*> value{nullptr};
  };
  const TypeInfo& Insert(MPI_Datatype t, uintptr_t key, size_t start) {
    auto* v = new TypeInfo(DescribeUncached(t, 0));
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < kSlots; ++i) {
      Slot& s = slots_[(start + i) & (kSlots - 1)];
      uintptr_t k = s.key.load(std::memory_order_relaxed);
      if (k == key || k == 0) {
        s.value.store(v, std::memory_order_release);
        s.key.store(key, std::memory_order_release);
        return *v;
      }
    }
    return *v;  // full: not cached, still correct
  }
  Slot slots_[kSlots];
  std::mutex mu_;
};

// Constant-initialised, so usable from the first call, and at a fixed
// address: a look-up reads the slot's line and the type's, nothing to get
// there first.
constinit TypeCache g_types;
TypeCache& Types() { return g_types; }

const TypeInfo& TypeOf(MPI_Datatype t) { return Types().Get(t); }

// ---------------------------------------------------------------------------
// Buffers: a region is the pieces of memory one side of a call covers.

const char* Offset(const void* base, int64_t elements, const TypeInfo& t) {
  return static_cast<const char*>(base) + elements * t.extent;
}

// The bytes of a region, contiguous: either in place or packed into t_pack.
Bytes Gather(const Region& r, MPI_Comm comm) {
  Bytes b;
  if (r.empty()) return b;
  if (r.many.empty()) {
    const TypeInfo& t = Types().Get(r.one.type);
    b.dt = t.dt == DataType::kDerived ? t.base : t.dt;
    if (t.contiguous) {
      b.data = static_cast<const unsigned char*>(r.one.buf);
      b.size = static_cast<size_t>(r.one.count) * t.size;
      return b;
    }
  }
  const MpiAbi& abi = Abi();
  size_t total = 0;
  bool same = true;
  DataType first = DataType::kUnknown;
  bool have_first = false;
  r.ForEach([&](const Piece& p) {
    const TypeInfo& t = Types().Get(p.type);
    total += static_cast<size_t>(p.count) * t.size;
    DataType d = t.dt == DataType::kDerived ? t.base : t.dt;
    if (!have_first) {
      first = d;
      have_first = true;
    } else if (d != first) {
      same = false;
    }
  });
  if (t_pack.size() < total) t_pack.resize(total);
  size_t pos = 0;
  r.ForEach([&](const Piece& p) {
    const TypeInfo& t = Types().Get(p.type);
    size_t n = static_cast<size_t>(p.count) * t.size;
    if (t.contiguous) {
      std::memcpy(t_pack.data() + pos, p.buf, n);
      pos += n;
    } else {
      int position = 0;
      if (p.count > INT32_MAX || pos + n > total) return;
      abi.Pack(p.buf, static_cast<int>(p.count), p.type, t_pack.data() + pos,
               static_cast<int>(total - pos), &position, comm);
      pos += static_cast<size_t>(position);
    }
  });
  b.data = t_pack.data();
  b.size = pos;
  b.dt = same ? first : DataType::kByte;
  return b;
}

// ---------------------------------------------------------------------------
// Communicators

// World ranks of a group's members, in group order.
std::vector<int32_t> Members(MPI_Group g) {
  const MpiAbi& abi = Abi();
  int n = 0;
  abi.Group_size(g, &n);
  std::vector<int> in(static_cast<size_t>(std::max(n, 0)));
  for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = i;
  std::vector<int> out(in.size(), MPI_UNDEFINED);
  MPI_Group world;
  abi.Comm_group(abi.comm_world, &world);
  abi.Group_translate_ranks(g, n, in.data(), world, out.data());
  abi.Group_free(&world);
  return std::vector<int32_t>(out.begin(), out.end());
}

std::vector<int32_t> CommMembers(MPI_Comm c, bool remote) {
  const MpiAbi& abi = Abi();
  MPI_Group g;
  if ((remote ? abi.Comm_remote_group(c, &g) : abi.Comm_group(c, &g)) != MPI_SUCCESS) return {};
  std::vector<int32_t> m = Members(g);
  abi.Group_free(&g);
  return m;
}

uint64_t Handle(MPI_Comm c) { return reinterpret_cast<uint64_t>(c); }

// Registers WORLD and SELF once MPI is initialised (normally from MPI_Init's
// return; lazily if the recorder came in later). The check is inline, so
// that a call after it costs no frame of its own.
void RegisterRecordedWorld(Recorder* rec);
inline void EnsureWorld(Recorder* rec) {
  if (__builtin_expect(!g_mpi.world_registered.load(std::memory_order_acquire), 0)) RegisterRecordedWorld(rec);
}
void RegisterRecordedWorld(Recorder* rec) {
  static std::once_flag once;
  std::atomic<bool>& done = g_mpi.world_registered;
  const MpiAbi& abi = Abi();
  if (rec->comms().Find(Handle(abi.comm_world)) != nullptr) {
    done.store(true, std::memory_order_release);
    return;
  }
  int initialized = 0;
  abi.Initialized(&initialized);
  if (!initialized) return;
  std::call_once(once, [&] {
    int rank = 0, size = 0;
    abi.Comm_rank(abi.comm_world, &rank);
    abi.Comm_size(abi.comm_world, &size);
    std::vector<int32_t> world(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) world[static_cast<size_t>(i)] = i;
    rec->comms().Insert(Handle(abi.comm_world), WorldCommId(), size, rank, world);
    rec->comms().Insert(Handle(abi.comm_self), SelfCommId(rank), 1, 0, {rank});
    auto announce = [&](uint64_t id, uint64_t handle, uint16_t flags, int32_t sz, int32_t rk,
                        const std::vector<int32_t>& members) {
      CommCreateEvent e{};
      e.comm = id;
      e.api = kApi_MPI_Init;
      e.flags = flags;
      e.size = sz;
      e.rank = rk;
      e.device = -1;
      e.handle = handle;
      std::vector<int64_t> list(members.begin(), members.end());
      rec->Append(EventKind::kCommCreate, e, 0, list);
    };
    announce(WorldCommId(), Handle(abi.comm_world), comm_flags::kWorld, size, rank, world);
    announce(SelfCommId(rank), Handle(abi.comm_self), comm_flags::kSelf, 1, 0, {rank});
    rec->AppendInfo("mpi.world_rank", std::to_string(rank));
    rec->AppendInfo("mpi.world_size", std::to_string(size));
    rec->NoteWorld(rank, size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    if (abi.Get_library_version(lib, &len) == MPI_SUCCESS) {
      std::string s(lib, static_cast<size_t>(std::max(len, 0)));
      while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
      rec->AppendInfo("mpi.library", s);
      rec->SetVersion("mpi", s.substr(0, s.find(',')));
    }
    int major = 0, minor = 0;
    abi.Get_version(&major, &minor);
    rec->AppendInfo("mpi.standard", std::to_string(major) + "." + std::to_string(minor));
    int level = 0;
    if (abi.Query_thread(&level) == MPI_SUCCESS) {
      const char* names[] = {"single", "funneled", "serialized", "multiple"};
      rec->AppendInfo("mpi.thread_level", level >= 0 && level <= 3 ? names[level] : "unknown");
    }
  });
}

// WORLD and SELF in a table other than the recorder's (whole-job re-run).
void RegisterWorld(CommTable* comms) {
  const MpiAbi& abi = Abi();
  int initialized = 0;
  abi.Initialized(&initialized);
  if (!initialized || comms->Find(Handle(abi.comm_world)) != nullptr) return;
  int rank = 0, size = 0;
  abi.Comm_rank(abi.comm_world, &rank);
  abi.Comm_size(abi.comm_world, &size);
  std::vector<int32_t> world(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) world[static_cast<size_t>(i)] = i;
  comms->Insert(Handle(abi.comm_world), WorldCommId(), size, rank, world);
  comms->Insert(Handle(abi.comm_self), SelfCommId(rank), 1, 0, {rank});
}

// Neighbour counts of a topology communicator: (in, out).
void NeighborCounts(MPI_Comm c, int rank, int* in, int* out) {
  const MpiAbi& abi = Abi();
  int topo = MPI_UNDEFINED;
  *in = *out = 0;
  if (rerun::Active() && VirtualNeighborCounts(c, rank, in, out)) return;
  abi.Topo_test(c, &topo);
  if (topo == MPI_CART) {
    int ndims = 0;
    abi.Cartdim_get(c, &ndims);
    *in = *out = 2 * ndims;
  } else if (topo == MPI_GRAPH) {
    int n = 0;
    abi.Graph_neighbors_count(c, rank, &n);
    *in = *out = n;
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    abi.Dist_graph_neighbors_count(c, in, out, &weighted);
  }
}

// Mprobe'd messages: handle -> what was matched, for the Mrecv that takes it.
struct MatchedMessage {
  uint64_t comm_handle;
  int source;
  int tag;
};
std::mutex g_messages_mu;
std::unordered_map<uint64_t, MatchedMessage>& Messages() {
  static auto* m = new std::unordered_map<uint64_t, MatchedMessage>();
  return *m;
}

std::atomic<bool> g_warned_abi{false};


// ---------------------------------------------------------------------------

void Call::NoteMatchedMessage(MPI_Message handle, int matched_source, int matched_tag) {
  std::lock_guard<std::mutex> lock(g_messages_mu);
  Messages()[reinterpret_cast<uint64_t>(handle)] = MatchedMessage{Handle(comm), matched_source, matched_tag};
}

MPI_Status* Call::Statuses(MPI_Status* statuses, int n) {
  if (statuses != MPI_STATUSES_IGNORE) {
    statuses_ = statuses;
    return statuses;
  }
  if (t_statuses.size() < static_cast<size_t>(std::max(n, 0))) t_statuses.resize(static_cast<size_t>(n));
  statuses_ = t_statuses.data();
  return statuses_;
}

// g_mpi.recording: the recorder MPI calls go to, once a call found that this
// process records (it is not re-run, and its MPI is the one replay was built
// for). One load then decides for the calls after it; once the recorder stops
// recording (closed, failed, or a forked child's), the whole decision again.
Mode Call::Begin() noexcept {
  if (!guard_.outermost()) return Mode::kPass;
  NoteProgramThread();
  if (Recorder* r = g_mpi.recording.load(std::memory_order_acquire);
      __builtin_expect(r != nullptr && r->recording(), 1)) {
    if (Unrecorded(shape_)) return Mode::kPass;
    rec_ = r;
    return RecordWith();
  }
  if (rerun::Active()) {
    session_ = rerun::Get();
    if (session_ == nullptr) return Mode::kPass;
    ctx_.comms = &session_->comms();
    ctx_.requests = &session_->requests();
    ctx_.level = Level::kData;
    ctx_.policy = &session_->policy();
    ctx_.received_policy = &session_->received_policy();
    ctx_.capture = &emitted_;
    recording_ = true;
    if (rerun::AllRanks()) {
      if (Unrecorded(shape_) || !Abi().ok) return mode_ = Mode::kPass;
      return mode_ = Mode::kForce;
    }
    return mode_ = Mode::kRerun;
  }
  if (Unrecorded(shape_)) return Mode::kPass;
  rec_ = Recorder::ForCall();
  if (rec_ == nullptr) return Mode::kPass;
  if (!Abi().ok) {
    if (!g_warned_abi.exchange(true)) {
      Warn("the MPI library in this process is not the Open MPI replay was built for; MPI calls "
           "pass through unrecorded");
    }
    return Mode::kPass;
  }
  g_mpi.recording.store(rec_, std::memory_order_release);
  return RecordWith();
}

Mode Call::RecordWith() {
  ctx_.comms = &rec_->comms();
  ctx_.requests = &rec_->requests();
  ctx_.level = rec_->level();
  ctx_.policy = &rec_->fingerprints();
  ctx_.received_policy = &rec_->received_fingerprints();
  ctx_.writer = &rec_->writer();
  recording_ = true;
  return mode_ = Mode::kRecord;
}

void Call::Enter() noexcept {
  if (!recording_) return;
  try {
    if (mode_ == Mode::kForce) {
      Prepare();
      return;
    }
    DoEnter();
  } catch (...) {
    recording_ = false;
  }
}

void Call::Leave(int rc) noexcept {
  if (!recording_) return;
  try {
    if (mode_ == Mode::kForce) {
      Finish(rc);
      return;
    }
    DoLeave(rc);
  } catch (...) {
  }
}

void Call::AppendOp() {
  op_.api = api_;
  op_.kind = op_.kind == OpKind::kOther ? kind_ : op_.kind;
  op_.flags |= flags;
  if (op_.root == 0 && root < 0) op_.root = -1;
  // Most ops have no list: the thread's list is not even looked at then.
  std::span<const int64_t> list;
  if (listed_) list = t_list;
  if (rec_ != nullptr) {
    open_ = rec_->AppendCall(op_, call_site_, list);
  } else {
    Emit(EventKind::kOp, op_, call_site_, list);
  }
  if (listed_) t_list.clear();
}

void Call::AppendReturn(int rc) {
  ret_.api = api_;
  ret_.rc = rc;
  ret_.comm = op_.comm;
  ret_.seq = op_.seq;
  if (ret_.peer_seq == 0) ret_.peer_seq = op_.peer_seq;
  ret_.request = op_.request;
  if (open_) {
    open_ = false;
    rec_->AppendCallReturn(ret_, call_site_);
  } else {
    Emit(EventKind::kReturn, ret_, call_site_);
  }
  if (rc != MPI_SUCCESS) AppendError(rc);
}

void Call::AppendError(int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  std::string text = std::string(ApiName(api_)) + ": ";
  if (Abi().Error_string(rc, msg, &len) == MPI_SUCCESS) {
    text.append(msg, static_cast<size_t>(std::max(len, 0)));
  } else {
    text += "error " + std::to_string(rc);
  }
  ErrorEvent e{ErrorSource::kMpi, rc, op_.comm};
  Emit(EventKind::kError, e, call_site_, {}, text);
}


namespace {

// Fingerprints a region with `policy`; at level data stores the bytes and
// their key in *payload_hash and *payload_size (when given). Nothing at level
// meta or for an empty region.
std::optional<Fingerprint> Fingerprinted(const CallContext& ctx, const Region& r, MPI_Comm comm,
                                         const FingerprintPolicy* policy, uint64_t* payload_hash,
                                         uint64_t* payload_size) {
  if (ctx.level == Level::kMeta || r.empty()) return std::nullopt;
  Bytes b = Gather(r, comm);
  Fingerprint f = FingerprintBuffer(b.data, b.size, b.dt, *policy);
  if (payload_hash != nullptr && ctx.level == Level::kData && b.size > 0) {
    uint64_t full = f.sampled ? Hash64(b.data, b.size) : f.hash;
    *payload_hash = full;
    *payload_size = b.size;
    if (ctx.writer != nullptr) {
      auto ref = ctx.writer->StorePayload(std::span<const uint8_t>(b.data, b.size), full);
      if (!ref.ok()) *payload_hash = *payload_size = 0;
    }
  }
  return f;
}

template <typename Body>
void Received(const CallContext& ctx, const Region& r, MPI_Comm comm, Body* body) {
  auto f = Fingerprinted(ctx, r, comm, ctx.received_policy, &body->payload_hash, &body->payload_size);
  if (!f) return;
  body->recv_hash = f->hash;
  body->recv_nan = f->nan;
  body->recv_inf = f->inf;
  body->flags |= op_flags::kHasRecvHash;
  if (f->counts_sampled) body->flags |= op_flags::kRecvSampled;
}

}  // namespace

namespace internal {

void FingerprintSent(const CallContext& ctx, const Region& r, MPI_Comm comm, OpEvent* op) {
  auto f = Fingerprinted(ctx, r, comm, ctx.policy, nullptr, nullptr);
  if (!f) return;
  op->send_hash = f->hash;
  op->send_nan = f->nan;
  op->send_inf = f->inf;
  op->flags |= op_flags::kHasSendHash;
}

void FingerprintReceived(const CallContext& ctx, const Region& r, MPI_Comm comm, ReturnEvent* ret) {
  Received(ctx, r, comm, ret);
}

void FingerprintReceived(const CallContext& ctx, const Region& r, MPI_Comm comm, CompletionEvent* c) {
  Received(ctx, r, comm, c);
}

}  // namespace internal

void StoreRegion(const CallContext& ctx, const Region& r, MPI_Comm comm, uint64_t* payload_hash,
                 uint64_t* payload_size) {
  Fingerprinted(ctx, r, comm, ctx.received_policy, payload_hash, payload_size);
}

void Call::EnterAbort() {
  op_.count = errorcode;
  AppendOp();
  std::string text = "MPI_Abort(errorcode=" + std::to_string(errorcode) + ") called";
  ErrorEvent e{ErrorSource::kMpi, errorcode, op_.comm};
  Emit(EventKind::kError, e, call_site_, {}, text);
  if (rec_ != nullptr) rec_->Close(CloseReason::kAbort);
  recording_ = false;
}

void Call::DoEnter() {
  op_.root = root;
  op_.peer = kNoPeer;
  op_.recv_peer = kNoPeer;
  ret_.source = kNoPeer;
  ret_.recv_count = -1;
  if (shape_ != Shape::kInit && rec_ != nullptr) EnsureWorld(rec_);
  if (mode_ == Mode::kForce) RegisterWorld(ctx_.comms);
  if (comm != nullptr) {
    cs_ = ctx_.comms->Find(Handle(comm));
    if (cs_ != nullptr) op_.comm = cs_->id;
  }
  // Collectives, the common calls, without the frame the others need.
  if (shape_ == Shape::kColl) {
    EnterCollective();
    return;
  }
  EnterByShape();
}

void Call::EnterByShape() {
  const MpiAbi& abi = Abi();
  auto describe_send = [&](MPI_Datatype t, int64_t count) {
    const TypeInfo& ti = Types().Get(t);
    op_.dtype = ti.dt;
    op_.dtype_size = ti.size;
    op_.dtype_sig = ti.sig;
    op_.count = count;
    op_.bytes = static_cast<uint64_t>(std::max<int64_t>(count, 0)) * ti.size;
  };
  auto describe_recv = [&](MPI_Datatype t, int64_t count) {
    const TypeInfo& ti = Types().Get(t);
    op_.recv_dtype = ti.dt;
    op_.recv_dtype_size = ti.size;
    op_.recv_count = count;
  };
  auto fingerprint_send = [&](const Region& r) { FingerprintSent(ctx_, r, comm, &op_); };

  switch (shape_) {
    case Shape::kInit:
    case Shape::kFinalize:
      AppendOp();
      return;
    case Shape::kAbort:
      EnterAbort();
      return;
    case Shape::kCommNew:
    case Shape::kCommInter:
      if (cs_ != nullptr) op_.seq = cs_->NextCollective();
      if (req != nullptr) op_.request = ctx_.requests->NextId();
      op_.tag = tag;
      AppendOp();
      return;
    case Shape::kCommGroup:
      op_.tag = tag;
      AppendOp();
      return;
    case Shape::kCommFree:
      saved_comm_ = freecomm != nullptr ? *freecomm : nullptr;
      cs_ = ctx_.comms->Find(Handle(saved_comm_));
      if (cs_ != nullptr) {
        op_.comm = cs_->id;
        op_.seq = cs_->NextCollective();
      }
      AppendOp();
      return;
    case Shape::kSend:
    case Shape::kIsend:
    case Shape::kPersistentInit: {
      op_.peer = peer;
      op_.tag = tag;
      bool is_recv = kind_ == OpKind::kRecv;
      if (is_recv) {
        describe_send(rtype, rcount);
      } else {
        describe_send(stype, scount);
      }
      if (shape_ == Shape::kPersistentInit) {
        op_.kind = OpKind::kOther;
        op_.flags |= op_flags::kPersistent;
      } else {
        if (cs_ != nullptr && peer >= 0) op_.peer_seq = cs_->NextSend(peer);
        Region r;
        r.Add(sbuf, scount, stype);
        fingerprint_send(r);
      }
      if (req != nullptr) {
        op_.request = ctx_.requests->NextId();
        op_.flags |= op_flags::kNonBlocking;
      }
      op_.send_buf = reinterpret_cast<uint64_t>(sbuf);
      op_.recv_buf = reinterpret_cast<uint64_t>(rbuf);
      AppendOp();
      return;
    }
    case Shape::kRecv:
    case Shape::kIrecv:
      op_.peer = peer;
      op_.tag = tag;
      describe_send(rtype, rcount);
      op_.bytes = 0;
      op_.recv_buf = reinterpret_cast<uint64_t>(rbuf);
      if (cs_ != nullptr && peer >= 0) op_.peer_seq = cs_->NextRecv(peer);
      if (req != nullptr) {
        op_.request = ctx_.requests->NextId();
        op_.flags |= op_flags::kNonBlocking;
      }
      AppendOp();
      return;
    case Shape::kSendrecv: {
      op_.peer = peer;
      op_.tag = tag;
      op_.recv_peer = source;
      op_.recv_tag = rtag;
      describe_send(stype, scount);
      describe_recv(rtype, rcount);
      if (cs_ != nullptr && peer >= 0) op_.peer_seq = cs_->NextSend(peer);
      if (cs_ != nullptr && source >= 0) ret_.peer_seq = cs_->NextRecv(source);
      op_.send_buf = reinterpret_cast<uint64_t>(sbuf);
      op_.recv_buf = reinterpret_cast<uint64_t>(rbuf);
      Region r;
      r.Add(sbuf, scount, stype);
      fingerprint_send(r);
      AppendOp();
      return;
    }
    case Shape::kProbe:
      // Blocking probes get an op (a rank may hang in one); polls only their outcome.
      if (flag == nullptr) {
        op_.peer = peer;
        op_.tag = tag;
        AppendOp();
      }
      return;
    case Shape::kMrecv: {
      MatchedMessage m{0, kNoPeer, 0};
      if (message != nullptr) {
        std::lock_guard<std::mutex> lock(g_messages_mu);
        auto it = Messages().find(reinterpret_cast<uint64_t>(*message));
        if (it != Messages().end()) {
          m = it->second;
          Messages().erase(it);
        }
      }
      cs_ = ctx_.comms->Find(m.comm_handle);
      if (cs_ != nullptr) op_.comm = cs_->id;
      op_.peer = m.source;
      op_.tag = m.tag;
      describe_send(rtype, rcount);
      op_.bytes = 0;
      if (cs_ != nullptr && m.source >= 0) op_.peer_seq = cs_->NextRecv(m.source);
      if (req != nullptr) {
        op_.request = ctx_.requests->NextId();
        op_.flags |= op_flags::kNonBlocking;
      }
      AppendOp();
      return;
    }
    case Shape::kStart:
      // Each start is a new send or receive: numbered and announced now.
      for (int i = 0; i < nreq; ++i) {
        uint64_t h = reinterpret_cast<uint64_t>(reqs[i]);
        ctx_.requests->Update(h, [&](PendingOp& p) {
          CommState* c = ctx_.comms->Find(p.comm_handle);
          OpEvent o{};
          o.api = api_;
          o.kind = p.is_recv ? OpKind::kRecv : OpKind::kSend;
          o.flags = op_flags::kPersistent | op_flags::kNonBlocking;
          o.comm = p.comm;
          o.peer = p.peer;
          o.tag = p.tag;
          o.root = -1;
          o.recv_peer = kNoPeer;
          o.request = p.request_id = ctx_.requests->NextId();
          p.active = true;
          if (c != nullptr && p.peer >= 0) {
            o.peer_seq = p.is_recv ? c->NextRecv(p.peer) : c->NextSend(p.peer);
          }
          p.peer_seq = o.peer_seq;
          MPI_Datatype t = reinterpret_cast<MPI_Datatype>(p.is_recv ? p.recv_type : p.send_type);
          const TypeInfo& ti = Types().Get(t);
          o.dtype = ti.dt;
          o.dtype_size = ti.size;
          o.count = p.is_recv ? p.recv_count : p.send_count;
          if (!p.is_recv) {
            o.bytes = static_cast<uint64_t>(o.count) * ti.size;
            Region r;
            r.Add(reinterpret_cast<const void*>(p.send_buf), p.send_count, t);
            MPI_Comm pc = reinterpret_cast<MPI_Comm>(p.comm_handle);
            FingerprintSent(ctx_, r, pc, &o);
          }
          Emit(EventKind::kOp, o, call_site_);
        });
      }
      return;
    case Shape::kCancel:
      if (nreq == 1 && reqs != nullptr) {
        if (auto p = ctx_.requests->Get(reinterpret_cast<uint64_t>(*reqs))) {
          op_.request = p->request_id;
          op_.comm = p->comm;
        }
      }
      AppendOp();
      return;
    case Shape::kComplete: {
      t_saved.assign(reqs, reqs + std::max(nreq, 0));
      if (BlockingWait()) {
        // A rank blocked in a wait shows which requests it waits for.
        t_list.clear();
        listed_ = true;
        for (MPI_Request r : t_saved) {
          if (r == abi.request_null) continue;
          if (auto p = ctx_.requests->Get(reinterpret_cast<uint64_t>(r))) {
            t_list.push_back(static_cast<int64_t>(p->request_id));
          }
        }
        op_.count = nreq;
        AppendOp();
      }
      return;
    }
    case Shape::kRequestFree:
      if (reqs != nullptr) saved_req_ = *reqs;
      return;
    case Shape::kColl:  // DoEnter's own, before this switch
      return;
    case Shape::kTypeFree:
      if (type_ptr != nullptr) Types().Drop(*type_ptr);
      return;
    case Shape::kQuery:
    case Shape::kTopo:
    case Shape::kGroup:
      return;
    case Shape::kRma:
      op_.peer = peer >= 0 ? peer : kNoPeer;
      op_.redop = OpOf(op);
      if (stype != nullptr) describe_send(stype, scount);
      if (req != nullptr) op_.request = ctx_.requests->NextId();
      AppendOp();
      return;
  }
}

// The blocks of a collective that ForEachBlock lays out: per-peer, listed,
// neighbourhood and all-to-all-w sides (HasOneBlockSides is the rest), and the
// listed counts the trace keeps.
void Call::LayCollective(const OpArgs& a, const OpShape& shape, Region& send, Region& recv, int64_t* sent,
                         bool* sent_from_recv) {
  ForEachBlock(a, [&](const Block& b) {
    const bool in_recv = b.buffer == Side::kRecv;
    if (b.side == Side::kSend) {
      *sent += b.count;
      *sent_from_recv = in_recv;
    }
    MPI_Datatype t = in_recv ? rtype : stype;
    const char* at = static_cast<const char*>(in_recv ? rbuf : sbuf);
    if (shape.byte_offsets) {
      const MPI_Datatype* types = in_recv ? rtypes : stypes;
      if (types == nullptr) return;
      t = types[b.peer];
      at += b.offset;
    } else if (b.offset != 0) {
      at = Offset(at, b.offset, Types().Get(t));
    }
    (b.side == Side::kSend ? send : recv).Add(at, b.count, t);
  });
  t_list.clear();
  listed_ = true;
  ForEachListedCount(a, [&](int64_t count) { t_list.push_back(count); });
}

// Collectives whose sides are laid out from lists of counts and
// displacements. Out of line: its arguments would widen every collective's
// frame.
void Call::LayListed(const OpShape& shape, const SideArgs& sides, Region& send, Region& recv, int64_t* sent,
                     bool* sent_from_recv) {
  const bool inter = cs_ != nullptr && cs_->remote_size > 0;
  OpArgs a;
  a.kind = kind_;
  a.size = cs_ != nullptr ? cs_->size : 0;
  a.peers = inter ? cs_->remote_size : a.size;
  a.rank = cs_ != nullptr ? cs_->rank : -1;
  if (shape.neighbors) NeighborCounts(comm, a.rank, &a.in_peers, &a.out_peers);
  a.is_root = sides.is_root;
  a.in_root_group = sides.in_root_group;
  a.in_place = sides.in_place;
  a.send_count = scount;
  a.recv_count = rcount;
  a.send_counts = scounts;
  a.recv_counts = rcounts;
  a.send_displs = sdispls_aint != nullptr ? IntList(sdispls_aint) : IntList(sdispls);
  a.recv_displs = rdispls_aint != nullptr ? IntList(rdispls_aint) : IntList(rdispls);
  LayCollective(a, shape, send, recv, sent, sent_from_recv);
}

void Call::EnterCollective() {
  const OpShape& shape = ShapeOf(kind_);
  const bool inter = cs_ != nullptr && cs_->remote_size > 0;
  const int32_t rank = cs_ != nullptr ? cs_->rank : -1;
  SideArgs sides;
  // Rooted collectives: on an intercommunicator the root passes MPI_ROOT and
  // the rest of its group MPI_PROC_NULL.
  sides.is_root = inter ? root == MPI_ROOT : root == rank;
  sides.in_root_group = inter && (root == MPI_ROOT || root == MPI_PROC_NULL);
  // In place: the send buffer is MPI_IN_PLACE, or, at the root of a scatter,
  // the receive buffer.
  sides.in_place = sbuf == MPI_IN_PLACE || (shape.in_place == InPlace::kRootKeepsBlock && rbuf == MPI_IN_PLACE);
  if (cs_ != nullptr) op_.seq = cs_->NextCollective();
  if (req != nullptr) {
    op_.request = ctx_.requests->NextId();
    op_.flags |= op_flags::kNonBlocking;
  }
  if (sides.in_place) op_.flags |= op_flags::kInPlace;
  op_.redop = OpOf(op);
  op_.send_buf = reinterpret_cast<uint64_t>(sbuf);
  op_.recv_buf = reinterpret_cast<uint64_t>(rbuf);

  // The pieces of memory each side covers; all-to-all-w has a datatype per
  // peer and displacements in bytes. What a blocking call receives is laid
  // out where Leave fingerprints it.
  Region send;
  Region& recv = recv_region_;
  int64_t sent = 0;
  bool sent_from_recv = false;
  if (HasOneBlockSides(shape)) {
    const OneBlockSides one = OneBlocks(shape, sides);
    if (one.sends) {
      sent = scount;
      sent_from_recv = one.from_recv;
      if (one.from_recv) {
        send.Add(rbuf, scount, rtype);
      } else {
        send.Add(sbuf, scount, stype);
      }
    }
    if (one.receives) recv.Add(rbuf, rcount, rtype);
  } else {
    LayListed(shape, sides, send, recv, &sent, &sent_from_recv);
  }
  MPI_Datatype send_type = shape.byte_offsets ? nullptr : sent_from_recv ? rtype : stype;
  const int64_t send_count = shape.count_is_call ? scount : sent;
  if (send_type != nullptr) {
    const TypeInfo& ti = Types().Get(send_type);
    op_.dtype = ti.dt;
    op_.dtype_size = ti.size;
    op_.dtype_sig = ti.sig;
    op_.bytes = static_cast<uint64_t>(std::max<int64_t>(send_count, 0)) * ti.size;
  } else if (stypes != nullptr || rtypes != nullptr) {
    op_.dtype = DataType::kDerived;
  }
  op_.count = send_count;
  if (shape.recv_count == RecvCount::kKept || (shape.recv_count == RecvCount::kKeptAtRoot && sides.is_root)) {
    op_.recv_count = rcount;
  }
  if (rtype != nullptr && rtype != send_type) {
    const TypeInfo& ri = Types().Get(rtype);
    op_.recv_dtype = ri.dt;
    op_.recv_dtype_size = ri.size;
  }
  FingerprintSent(ctx_, send, comm, &op_);
  AppendOp();
  // What completion will fingerprint: now for blocking calls (kept in the
  // call), filed with the request for non-blocking ones.
  if (req != nullptr) {
    pending_ = std::make_unique<PendingOp>();
    PendingOp& p = *pending_;
    p.request_id = op_.request;
    p.api = api_;
    p.kind = kind_;
    p.comm = op_.comm;
    p.comm_handle = Handle(comm);
    p.seq = op_.seq;
    p.is_recv = !recv.empty();
    recv.ForEach([&](const Piece& piece) {
      p.recv_pieces.push_back({reinterpret_cast<uint64_t>(piece.buf), static_cast<uint64_t>(piece.count),
                               reinterpret_cast<uint64_t>(piece.type)});
    });
  }
}

void Call::LeaveCollective(int rc) {
  if (req != nullptr) {
    AppendReturn(rc);
    if (rc == MPI_SUCCESS && pending_) ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), *pending_);
    return;
  }
  if (rc == MPI_SUCCESS) FingerprintReceived(ctx_, recv_region_, comm, &ret_);
  AppendReturn(rc);
}

// ---------------------------------------------------------------------------
// One-sided windows

namespace {

struct Window {
  const void* base = nullptr;
  int64_t size = 0;
  std::vector<Piece> reads;  // origin buffers the next synchronisation completes
};
std::mutex g_windows_mu;
std::unordered_map<uint64_t, Window>& Windows() {
  static auto* w = new std::unordered_map<uint64_t, Window>();
  return *w;
}

bool Synchronises(ApiId api) {
  switch (api) {
    case kApi_MPI_Win_fence:
    case kApi_MPI_Win_lock:
    case kApi_MPI_Win_unlock:
    case kApi_MPI_Win_flush:
    case kApi_MPI_Win_lock_all:
    case kApi_MPI_Win_unlock_all:
    case kApi_MPI_Win_post:
    case kApi_MPI_Win_start:
    case kApi_MPI_Win_complete:
    case kApi_MPI_Win_wait:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool WindowSync(ApiId api, MPI_Win win, Region* r) {
  if (!Synchronises(api)) return false;
  std::lock_guard<std::mutex> lock(g_windows_mu);
  auto it = Windows().find(reinterpret_cast<uint64_t>(win));
  if (it == Windows().end()) return false;
  Window& w = it->second;
  r->Add(w.base, w.size, Abi().datatype_byte);
  for (const Piece& p : w.reads) r->Add(p.buf, p.count, p.type);
  w.reads.clear();
  return true;
}

void Call::NoteRma(int rc) {
  if (rc != MPI_SUCCESS) return;
  std::lock_guard<std::mutex> lock(g_windows_mu);
  switch (api_) {
    case kApi_MPI_Win_create:
    case kApi_MPI_Win_allocate: {
      if (win_out == nullptr) return;
      void* base = api_ == kApi_MPI_Win_create ? win_base : *static_cast<void**>(win_baseptr);
      Windows()[reinterpret_cast<uint64_t>(*win_out)] = Window{base, static_cast<int64_t>(win_size), {}};
      return;
    }
    case kApi_MPI_Win_free:
      Windows().erase(reinterpret_cast<uint64_t>(win));
      return;
    case kApi_MPI_Get:
    case kApi_MPI_Get_accumulate:
    case kApi_MPI_Fetch_and_op:
    case kApi_MPI_Compare_and_swap: {
      auto it = Windows().find(reinterpret_cast<uint64_t>(win));
      if (it != Windows().end() && rbuf != nullptr && rcount > 0) it->second.reads.push_back(Piece{rbuf, rcount, rtype});
      return;
    }
    default:
      return;
  }
}

void Call::LeaveRma(int rc) {
  NoteRma(rc);
  // The bytes are kept (level data) but not fingerprinted as received data: a
  // synchronisation that opens an epoch may already see the next epoch's
  // updates land, so they are the same in every run only once it closes.
  Region r;
  if (rc == MPI_SUCCESS && WindowSync(api_, win, &r)) {
    StoreRegion(ctx_, r, Abi().comm_self, &ret_.payload_hash, &ret_.payload_size);
  }
  AppendReturn(rc);
  if (req != nullptr && rc == MPI_SUCCESS) ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), RmaRequest(op_.request));
}

// A request-based one-sided call's request: an MPI_Rget's origin buffer holds
// what it read once the request completes, received data as a receive's.
PendingOp Call::RmaRequest(uint64_t request_id) const {
  PendingOp p;
  p.request_id = request_id;
  p.api = api_;
  p.kind = OpKind::kRma;
  p.comm_handle = Handle(Abi().comm_self);
  p.is_recv = api_ == kApi_MPI_Rget;
  if (p.is_recv) {
    p.recv_pieces.push_back({reinterpret_cast<uint64_t>(rbuf), static_cast<uint64_t>(scount),
                             reinterpret_cast<uint64_t>(stype)});
  }
  return p;
}

// A distributed graph's neighbours, as MPI made them: with MPI_Dist_graph_create
// a rank may name the edges of others, so a rank re-run alone could not work
// them out from its own arguments.
void Call::NoteDistGraph(MPI_Comm created) {
  const MpiAbi& abi = Abi();
  int in = 0, out = 0, weighted = 0;
  if (abi.Dist_graph_neighbors_count(created, &in, &out, &weighted) != MPI_SUCCESS || in < 0 || out < 0) return;
  Topology t;
  t.kind = Topology::Kind::kDistGraph;
  t.weighted = weighted != 0;
  t.sources.resize(static_cast<size_t>(in));
  t.destinations.resize(static_cast<size_t>(out));
  t.source_weights.resize(static_cast<size_t>(in));
  t.destination_weights.resize(static_cast<size_t>(out));
  if (abi.Dist_graph_neighbors(created, in, t.sources.data(), t.source_weights.data(), out, t.destinations.data(),
                               t.destination_weights.data()) != MPI_SUCCESS) {
    return;
  }
  if (!t.weighted) {
    t.source_weights.clear();
    t.destination_weights.clear();
  }
  std::string text(kDistGraphInfoKey);
  text += t.DistGraphText();
  Emit(EventKind::kInfo, InfoEvent{static_cast<uint32_t>(kDistGraphInfoKey.size())}, 0, {}, text);
}

void Call::LeaveCommCreate(int rc) {
  AppendReturn(rc);
  const MpiAbi& abi = Abi();
  if (rc != MPI_SUCCESS || newcomm == nullptr || *newcomm == abi.comm_null) return;
  MPI_Comm nc = *newcomm;
  int inter = 0, size = 0, rank = -1, remote = 0;
  abi.Comm_test_inter(nc, &inter);
  abi.Comm_size(nc, &size);
  abi.Comm_rank(nc, &rank);
  std::vector<int32_t> members = CommMembers(nc, false);
  std::vector<int32_t> all = members;
  if (inter) {
    abi.Comm_remote_size(nc, &remote);
    std::vector<int32_t> rm = CommMembers(nc, true);
    all.insert(all.end(), rm.begin(), rm.end());
  }
  std::vector<int32_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  int32_t lowest = sorted.empty() ? -1 : sorted.front();
  uint64_t parent = op_.comm;
  uint64_t id = 0;
  if (shape_ == Shape::kCommGroup) {
    uint64_t nth = cs_ != nullptr ? cs_->group_creations.fetch_add(1) : 0;
    id = MemberSetCommId(parent, sorted, tag, nth);
  } else if (shape_ == Shape::kCommInter) {
    // Both sides number the creation on their own local communicator; the
    // member set and tag are what they share.
    id = MemberSetCommId(0, sorted, tag, 0);
  } else {
    id = DerivedCommId(parent, op_.seq, lowest);
  }
  ctx_.comms->Insert(Handle(nc), id, size, rank, members, inter ? remote : 0);
  CommCreateEvent e{};
  e.comm = id;
  e.parent = parent;
  e.api = api_;
  e.parent_seq = op_.seq;
  e.color = color;
  e.key = key;
  e.size = size;
  e.rank = rank;
  e.device = -1;
  e.handle = Handle(nc);
  e.flags = static_cast<uint16_t>((inter ? comm_flags::kInter : 0) | (topology ? comm_flags::kTopology : 0));
  std::vector<int64_t> list(members.begin(), members.end());
  Emit(EventKind::kCommCreate, e, call_site_, list);
  if (api_ == kApi_MPI_Dist_graph_create || api_ == kApi_MPI_Dist_graph_create_adjacent) NoteDistGraph(nc);
  if (req != nullptr) {
    PendingOp p;
    p.request_id = op_.request;
    p.api = api_;
    p.kind = OpKind::kCommCreate;
    p.comm = parent;
    p.seq = op_.seq;
    ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), p);
  }
}

void Call::LeaveInit(int rc) {
  AppendReturn(rc);
  if (rc == MPI_SUCCESS && rec_ != nullptr) EnsureWorld(rec_);
  if (rc == MPI_SUCCESS && mode_ == Mode::kForce) RegisterWorld(ctx_.comms);
}

void Call::LeaveComplete(int rc) {
  const MpiAbi& abi = Abi();
  const int n = static_cast<int>(t_saved.size());
  auto complete = [&](int i, MPI_Status* st) {
    if (i < 0 || i >= n) return;
    MPI_Request h = t_saved[static_cast<size_t>(i)];
    if (h == abi.request_null) return;
    auto p = ctx_.requests->Complete(reinterpret_cast<uint64_t>(h));
    if (!p || (p->persistent && !p->active)) return;
    CompletionEvent c{};
    c.request = p->request_id;
    c.api = api_;
    c.comm = p->comm;
    c.seq = p->seq;
    c.peer_seq = p->peer_seq;
    c.rc = st != nullptr && rc == MPI_ERR_IN_STATUS ? st->MPI_ERROR : rc;
    c.source = kNoPeer;
    c.recv_count = -1;
    if (p->is_recv && st != nullptr) {
      int cancelled = 0;
      abi.Test_cancelled(st, &cancelled);
      c.cancelled = cancelled != 0;
      Region r;
      if (p->kind == OpKind::kRecv || p->kind == OpKind::kMrecv) {
        c.source = st->MPI_SOURCE;
        c.tag = st->MPI_TAG;
        MPI_Datatype t = reinterpret_cast<MPI_Datatype>(p->recv_type);
        int got = 0;
        if (abi.Get_count(st, t, &got) != MPI_SUCCESS || got == MPI_UNDEFINED) got = 0;
        c.recv_count = got;
        if (p->peer == kAnySource && c.source >= 0) {
          if (CommState* cs = ctx_.comms->Find(p->comm_handle)) c.peer_seq = cs->NextRecv(c.source);
        }
        r.Add(reinterpret_cast<const void*>(p->recv_buf), got, t);
      } else {
        for (const auto& piece : p->recv_pieces) {
          r.Add(reinterpret_cast<const void*>(piece[0]), static_cast<int64_t>(piece[1]),
                reinterpret_cast<MPI_Datatype>(piece[2]));
        }
      }
      if (!c.cancelled) FingerprintReceived(ctx_, r, reinterpret_cast<MPI_Comm>(p->comm_handle), &c);
    } else if (st != nullptr && p->kind == OpKind::kSend) {
      int cancelled = 0;
      abi.Test_cancelled(st, &cancelled);
      c.cancelled = cancelled != 0;
    }
    Emit(EventKind::kCompletion, c, call_site_);
  };
  auto outcome = [&](bool fl, int idx, int count) {
    TestEvent t{};
    t.api = api_;
    t.flag = fl;
    t.index = idx;
    t.source = kNoPeer;
    t.count = count;
    t.rc = rc;
    Emit(EventKind::kTest, t, call_site_, t_list);
    t_list.clear();
  };
  bool all_ok = rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS;
  switch (api_) {
    case kApi_MPI_Wait:
      if (all_ok) complete(0, status_);
      break;
    case kApi_MPI_Test:
      outcome(*flag != 0, -1, 0);
      if (all_ok && *flag) complete(0, status_);
      break;
    case kApi_MPI_Waitall:
      for (int i = 0; all_ok && i < n; ++i) complete(i, statuses_ + i);
      break;
    case kApi_MPI_Testall:
      outcome(*flag != 0, -1, 0);
      for (int i = 0; all_ok && *flag && i < n; ++i) complete(i, statuses_ + i);
      break;
    case kApi_MPI_Waitany:
    case kApi_MPI_Testany: {
      bool fl = flag == nullptr || *flag != 0;
      int idx = *index == MPI_UNDEFINED ? -1 : *index;
      outcome(fl, idx, 0);
      if (all_ok && fl && idx >= 0) complete(idx, status_);
      break;
    }
    case kApi_MPI_Waitsome:
    case kApi_MPI_Testsome: {
      int k = *outcount == MPI_UNDEFINED ? 0 : *outcount;
      t_list.clear();
      for (int j = 0; j < k; ++j) t_list.push_back(indices[j]);
      outcome(k > 0, -1, k);
      for (int j = 0; all_ok && j < k; ++j) complete(indices[j], statuses_ + j);
      break;
    }
    default:
      break;
  }
  if (BlockingWait()) {
    AppendReturn(rc);
  } else if (rc != MPI_SUCCESS) {
    AppendError(rc);
  }
}

bool Call::BlockingWait() const {
  return api_ == kApi_MPI_Wait || api_ == kApi_MPI_Waitall || api_ == kApi_MPI_Waitany ||
         api_ == kApi_MPI_Waitsome;
}

void Call::NoteReceived(bool wildcard) {
  ret_.source = status_->MPI_SOURCE;
  ret_.tag = status_->MPI_TAG;
  int got = 0;
  if (Abi().Get_count(status_, rtype, &got) != MPI_SUCCESS || got == MPI_UNDEFINED) got = 0;
  ret_.recv_count = got;
  if (wildcard && cs_ != nullptr && ret_.source >= 0) ret_.peer_seq = cs_->NextRecv(ret_.source);
  Region r;
  r.Add(rbuf, got, rtype);
  FingerprintReceived(ctx_, r, comm, &ret_);
}

void Call::DoLeave(int rc) {
  if (shape_ == Shape::kColl) {
    LeaveCollective(rc);
    return;
  }
  LeaveByShape(rc);
}

void Call::LeaveByShape(int rc) {
  const MpiAbi& abi = Abi();
  switch (shape_) {
    case Shape::kInit:
      LeaveInit(rc);
      return;
    case Shape::kFinalize:
      AppendReturn(rc);
      if (rec_ != nullptr) rec_->NoteFinalized();
      return;
    case Shape::kAbort:
      return;
    case Shape::kCommNew:
    case Shape::kCommGroup:
    case Shape::kCommInter:
      LeaveCommCreate(rc);
      return;
    case Shape::kCommFree: {
      AppendReturn(rc);
      if (rc != MPI_SUCCESS || cs_ == nullptr) return;
      CommFreeEvent e{cs_->id, api_, rc};
      Emit(EventKind::kCommFree, e, call_site_);
      ctx_.comms->Remove(Handle(saved_comm_));
      return;
    }
    case Shape::kRma:
      LeaveRma(rc);
      return;
    case Shape::kSend:
    case Shape::kCancel:
    case Shape::kStart:
      AppendReturn(rc);
      return;
    case Shape::kIsend:
    case Shape::kIrecv:
    case Shape::kPersistentInit:
    case Shape::kMrecv:
      if (req == nullptr) {
        // Blocking MPI_Mrecv.
        if (rc == MPI_SUCCESS && status_ != nullptr) NoteReceived(false);
        AppendReturn(rc);
        return;
      }
      AppendReturn(rc);
      if (rc == MPI_SUCCESS) {
        PendingOp p;
        p.request_id = op_.request;
        p.api = api_;
        p.kind = kind_;
        p.comm = op_.comm;
        p.comm_handle = Handle(comm != nullptr ? comm : (cs_ != nullptr ? reinterpret_cast<MPI_Comm>(cs_->handle) : nullptr));
        p.seq = op_.seq;
        p.peer_seq = op_.peer_seq;
        p.peer = op_.peer;
        p.tag = tag;
        p.persistent = shape_ == Shape::kPersistentInit;
        p.active = !p.persistent;
        p.is_recv = kind_ == OpKind::kRecv || kind_ == OpKind::kMrecv;
        p.recv_buf = reinterpret_cast<uint64_t>(rbuf);
        p.recv_count = rcount;
        p.recv_type = reinterpret_cast<uint64_t>(rtype);
        p.send_buf = reinterpret_cast<uint64_t>(sbuf);
        p.send_count = scount;
        p.send_type = reinterpret_cast<uint64_t>(stype);
        ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), p);
      }
      return;
    case Shape::kRecv:
    case Shape::kSendrecv: {
      const int asked = shape_ == Shape::kSendrecv ? source : peer;
      if (rc == MPI_SUCCESS && status_ != nullptr) NoteReceived(asked == kAnySource);
      AppendReturn(rc);
      return;
    }
    case Shape::kProbe: {
      bool fl = flag == nullptr || *flag != 0;
      TestEvent t{};
      t.api = api_;
      t.flag = fl;
      t.index = -1;
      t.comm = op_.comm;
      t.rc = rc;
      t.source = kNoPeer;
      if (fl && rc == MPI_SUCCESS && status_ != nullptr) {
        t.source = status_->MPI_SOURCE;
        t.tag = status_->MPI_TAG;
        int bytes = 0;
        abi.Get_count(status_, abi.datatype_byte, &bytes);
        t.count = bytes;
        if (message != nullptr && *message != abi.message_null) NoteMatchedMessage(*message, t.source, t.tag);
      }
      Emit(EventKind::kTest, t, call_site_);
      if (flag == nullptr) AppendReturn(rc);
      else if (rc != MPI_SUCCESS) AppendError(rc);
      return;
    }
    case Shape::kComplete:
      LeaveComplete(rc);
      return;
    case Shape::kRequestFree:
      if (rc == MPI_SUCCESS && saved_req_ != nullptr) {
        ctx_.requests->Complete(reinterpret_cast<uint64_t>(saved_req_), /*free_persistent=*/true);
      }
      return;
    case Shape::kColl:  // DoLeave's own, before this switch
      return;
    case Shape::kTypeFree:
    case Shape::kQuery:
    case Shape::kTopo:
    case Shape::kGroup:
      return;
  }
}

}  // namespace replay::interpose::mpi
