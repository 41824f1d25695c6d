// replay-drive: re-issues one rank's recorded MPI communication, without the
// application. Started by `replay drive` under mpirun, one process per recorded
// rank: each reads its rank's events and makes the same calls, in the same
// order, on communicators created the same way, with synthetic data (or, for
// point-to-point messages, the bytes the receiver recorded). Hangs and
// mismatches of the recording happen again; `replay drive` records this run
// and reports what went wrong in it.
//
// Usage (under mpirun): replay-drive DIR [--ranks LIST] [--payload recorded|synthetic]
//                                      [--backend host|nccl] [--timeout S]
//
// NCCL communication is re-issued either with NCCL's semantics over MPI on
// host memory (--backend host: each NCCL communicator an MPI communicator of
// the same members, each operation the MPI operation of the same shape), or
// with real NCCL on GPUs (--backend nccl, nccl_backend.h), where each
// operation is waited for after it is enqueued (after the outermost group end
// for grouped ones) until --timeout S seconds from the start have passed.
//
// Exit status: 0 when the rank's events were all re-issued; 1 when an NCCL
// operation failed (its communicators are then aborted); 2 for bad arguments,
// an unreadable trace or a backend that cannot start; 3 when the rank stopped
// waiting for an NCCL operation at the timeout: a hang. It then exits at once
// (_exit: the preload still closes its trace), leaving the operation pending
// in the drive's trace as it was. Aborting the communicators first would let
// the aborted kernels finish and the preload record the operation as
// completed, which would erase the hang from the trace `replay drive` checks;
// the exit frees the GPU work as a killed process's does.
//
// Not re-issued (counted and reported): one-sided communication, neighbourhood
// collectives and intercommunicators. Events of all of a rank's threads are
// issued from one thread, in the recorded order.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nccl_backend.h"
#include "replay/event.h"
#include "replay/op_shape.h"
#include "replay/trace_reader.h"

namespace replay::drive {
namespace {

constexpr int kExitNcclError = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitHung = 3;

struct Options {
  std::string dir;
  std::set<int> live;  // empty: all
  bool recorded_payloads = false;
  std::string backend = "host";
  double timeout_s = 0;  // 0: wait as long as it takes
};

MPI_Datatype TypeOf(DataType t, uint32_t size) {
  switch (t) {
    case DataType::kInt8: return MPI_SIGNED_CHAR;
    case DataType::kUint8: return MPI_UNSIGNED_CHAR;
    case DataType::kInt16: return MPI_SHORT;
    case DataType::kUint16: return MPI_UNSIGNED_SHORT;
    case DataType::kInt32: return MPI_INT;
    case DataType::kUint32: return MPI_UNSIGNED;
    case DataType::kInt64: return MPI_LONG_LONG;
    case DataType::kUint64: return MPI_UNSIGNED_LONG_LONG;
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kFloat128: return MPI_LONG_DOUBLE;
    case DataType::kComplex64: return MPI_C_FLOAT_COMPLEX;
    case DataType::kComplex128: return MPI_C_DOUBLE_COMPLEX;
    case DataType::kBool: return MPI_C_BOOL;
    case DataType::kPair: return size == 8 ? MPI_2INT : MPI_DOUBLE_INT;
    default: return MPI_BYTE;
  }
}

MPI_Op OpOf(RedOp op) {
  switch (op) {
    case RedOp::kProd: return MPI_PROD;
    case RedOp::kMax: return MPI_MAX;
    case RedOp::kMin: return MPI_MIN;
    case RedOp::kLand: return MPI_LAND;
    case RedOp::kLor: return MPI_LOR;
    case RedOp::kLxor: return MPI_LXOR;
    case RedOp::kBand: return MPI_BAND;
    case RedOp::kBor: return MPI_BOR;
    case RedOp::kBxor: return MPI_BXOR;
    case RedOp::kMinloc: return MPI_MINLOC;
    case RedOp::kMaxloc: return MPI_MAXLOC;
    case RedOp::kReplace: return MPI_REPLACE;
    default: return MPI_SUM;  // sum, avg and user-defined reductions
  }
}

// Buffers a non-blocking operation must keep until it completes.
struct Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> send, recv;
  std::vector<int> counts_a, displs_a, counts_b, displs_b;
};

class Driver {
 public:
  // `nccl`: the real-NCCL backend, or null for NCCL over MPI on host memory.
  Driver(const Options& opt, std::unique_ptr<RankReader> reader, std::unique_ptr<TraceReader> trace, int rank,
         int size, std::unique_ptr<NcclBackend> nccl)
      : opt_(opt),
        reader_(std::move(reader)),
        trace_(std::move(trace)),
        rank_(rank),
        size_(size),
        nccl_(std::move(nccl)) {
    deadline_ = opt.timeout_s > 0
                    ? NcclBackend::Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000))
                    : NcclBackend::Clock::time_point::max();
  }

  int Run();

 private:
  const RankHeader& header() const { return reader_->header(); }
  bool Live(int world_rank) const { return opt_.live.empty() || opt_.live.count(world_rank) != 0; }
  // A communication whose members are all live is issued; others are served
  // from the trace (skipped here).
  bool AllLive(uint64_t comm) const {
    auto it = members_.find(comm);
    if (it == members_.end()) return true;
    for (int r : it->second) {
      if (!Live(r)) return false;
    }
    return true;
  }
  MPI_Comm Comm(uint64_t id) const {
    auto it = comms_.find(id);
    return it == comms_.end() ? MPI_COMM_NULL : it->second;
  }
  void CreateComm(size_t op_index);
  void CreateNcclComm(const Event& op, const Event* created);
  void CreateGpuComm(const Event& op, const Event* created, MPI_Comm members);
  bool IsNccl(uint16_t api) const { return header().ApiName(api).rfind("nccl", 0) == 0; }
  void GpuOperation(const Event& e);
  void GpuGroup(const Event& e);
  void GpuFree(const Event& e);
  void GpuWait();
  void GpuError(const std::string& what);
  void PrintSummary() const;
  void Collective(const Event& e, bool has_ret);
  void PointToPoint(size_t op_index);
  std::vector<char> Synthetic(size_t bytes) const {
    std::vector<char> b(bytes);
    for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<char>((i * 131 + static_cast<size_t>(rank_)) & 0x3f);
    return b;
  }
  std::vector<char> SendBytes(const OpEvent& op, size_t bytes);
  const Event* ReturnOf(size_t op_index) const;
  void Note(const std::string& what) { skipped_[what]++; }

  Options opt_;
  std::unique_ptr<RankReader> reader_;
  std::unique_ptr<TraceReader> trace_;
  int rank_;
  int size_;
  std::map<uint64_t, MPI_Comm> comms_;
  std::map<uint64_t, std::vector<int>> members_;
  std::map<uint64_t, std::unique_ptr<Pending>> requests_;  // recorded request id
  std::map<std::string, int> skipped_;
  std::map<int, std::unique_ptr<RankReader>> peers_;  // --payload recorded: receivers' traces
  int issued_ = 0;
  int errors_ = 0;
  std::unique_ptr<NcclBackend> nccl_;
  NcclBackend::Clock::time_point deadline_;
  int exit_code_ = 0;    // kExitNcclError or kExitHung once the drive stopped early
  std::string stopped_;  // why it stopped early
};

const Event* Driver::ReturnOf(size_t i) const {
  const std::vector<Event>& ev = reader_->events();
  uint32_t thread = ev[i].thread;
  for (size_t j = i + 1; j < ev.size(); ++j) {
    if (ev[j].thread != thread) continue;
    if (ev[j].kind == EventKind::kReturn && ev[j].ret.api == ev[i].op.api) return &ev[j];
    if (ev[j].kind == EventKind::kOp) return nullptr;
  }
  return nullptr;
}

// The bytes a send carries: synthetic, or what its receiver recorded getting.
std::vector<char> Driver::SendBytes(const OpEvent& op, size_t bytes) {
  if (!opt_.recorded_payloads || op.peer < 0) return Synthetic(bytes);
  auto members = members_.find(op.comm);
  int peer_world = members != members_.end() && op.peer < static_cast<int>(members->second.size())
                       ? members->second[static_cast<size_t>(op.peer)]
                       : op.peer;
  auto it = peers_.find(peer_world);
  if (it == peers_.end()) {
    const RankEntry* e = trace_->FindRank(peer_world);
    if (e == nullptr) return Synthetic(bytes);
    auto r = RankReader::Open(e->dir);
    if (!r.ok()) return Synthetic(bytes);
    it = peers_.emplace(peer_world, std::move(r).value()).first;
  }
  // The receiver's completion or return with this message's sequence number from us.
  int my_rank_in_comm = -1;
  if (members != members_.end()) {
    for (size_t k = 0; k < members->second.size(); ++k) {
      if (members->second[k] == rank_) my_rank_in_comm = static_cast<int>(k);
    }
  }
  for (const Event& e : it->second->events()) {
    uint64_t hash = 0, size = 0;
    if (e.kind == EventKind::kReturn && e.ret.comm == op.comm && e.ret.source == my_rank_in_comm &&
        e.ret.peer_seq == op.peer_seq) {
      hash = e.ret.payload_hash;
      size = e.ret.payload_size;
    } else if (e.kind == EventKind::kCompletion && e.completion.comm == op.comm &&
               e.completion.source == my_rank_in_comm && e.completion.peer_seq == op.peer_seq) {
      hash = e.completion.payload_hash;
      size = e.completion.payload_size;
    }
    if (size == 0) continue;
    auto bytes_or = it->second->Payload(hash);
    if (!bytes_or.ok()) break;
    std::vector<char> out(bytes);
    std::memcpy(out.data(), bytes_or->data(), std::min<size_t>(bytes, bytes_or->size()));
    return out;
  }
  return Synthetic(bytes);
}

void Driver::CreateComm(size_t i) {
  const std::vector<Event>& ev = reader_->events();
  const Event& op = ev[i];
  std::string api = header().ApiName(op.op.api);
  MPI_Comm parent = Comm(op.op.comm);
  // The communicator this rank got, if any: the comm_create after the return.
  const Event* created = nullptr;
  for (size_t j = i + 1; j < ev.size(); ++j) {
    if (ev[j].thread != op.thread) continue;
    if (ev[j].kind == EventKind::kCommCreate) {
      created = &ev[j];
      break;
    }
    if (ev[j].kind == EventKind::kOp) break;
  }
  if (created != nullptr && (created->comm_create.flags & comm_flags::kInter)) {
    Note(api + " (intercommunicator)");
    return;
  }
  if (api.rfind("nccl", 0) == 0) {
    CreateNcclComm(op, created);
    return;
  }
  if (parent == MPI_COMM_NULL && api != "MPI_Comm_create_group") {
    Note(api + " on an unknown communicator");
    return;
  }
  MPI_Comm out = MPI_COMM_NULL;
  if (api == "MPI_Comm_create_group") {
    if (created == nullptr) return;
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> members(created->list.begin(), created->list.end());
    MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
    MPI_Comm_create_group(MPI_COMM_WORLD, group, static_cast<int>(op.op.tag), &out);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
  } else if (api == "MPI_Comm_dup" || api == "MPI_Comm_dup_with_info" || api == "MPI_Comm_idup") {
    ++issued_;
    if (MPI_Comm_dup(parent, &out) != MPI_SUCCESS) ++errors_;
  } else {
    // Any other creation collective over the parent is a split: the new
    // communicator's recorded colour (or identity) its colour, the recorded
    // rank its key. A split keeps the recorded lineage, so the drive's
    // communicators have the recording's names.
    int color = MPI_UNDEFINED;
    if (created != nullptr) {
      color = api == "MPI_Comm_split" && created->comm_create.color >= 0
                  ? static_cast<int>(created->comm_create.color)
                  : static_cast<int>(created->comm_create.comm & 0x3fffffff);
    }
    int key = created != nullptr ? created->comm_create.rank : 0;
    ++issued_;
    if (MPI_Comm_split(parent, color, key, &out) != MPI_SUCCESS) ++errors_;
  }
  if (created != nullptr && out != MPI_COMM_NULL) {
    comms_[created->comm_create.comm] = out;
    members_[created->comm_create.comm] = std::vector<int>(created->list.begin(), created->list.end());
  }
}

// NCCL communicators: each gets an MPI communicator with the same members in
// the same order, split from the world (communicators made from a unique id)
// or from the parent (ncclCommSplit, ncclCommShrink). Every member knows the
// communicator's identity from its own recording, so that identity is the
// colour; the rank each member had is the key. On host memory the MPI
// communicator stands for the NCCL one; on GPUs it carries the unique id of a
// real one (CreateGpuComm).
void Driver::CreateNcclComm(const Event& op, const Event* created) {
  const std::string api = header().ApiName(op.op.api);
  if (api == "ncclCommInitAll") {
    Note("ncclCommInitAll (one process driving several devices)");
    return;
  }
  MPI_Comm parent = op.op.comm == 0 ? MPI_COMM_WORLD : Comm(op.op.comm);
  if (parent == MPI_COMM_NULL) {
    Note(api + " on an unknown communicator");
    return;
  }
  int color = created != nullptr ? static_cast<int>(created->comm_create.comm & 0x3fffffff) : MPI_UNDEFINED;
  int key = created != nullptr ? created->comm_create.rank : 0;
  MPI_Comm out = MPI_COMM_NULL;
  if (nccl_ == nullptr) ++issued_;  // on GPUs it only carries the unique id: the NCCL call counts
  if (MPI_Comm_split(parent, color, key, &out) != MPI_SUCCESS) ++errors_;
  if (created != nullptr && out != MPI_COMM_NULL) {
    comms_[created->comm_create.comm] = out;
    int n = 0;
    MPI_Comm_size(out, &n);
    std::vector<int> local(static_cast<size_t>(n)), world(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) local[static_cast<size_t>(k)] = k;
    MPI_Group g, wg;
    MPI_Comm_group(out, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, n, local.data(), wg, world.data());
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    members_[created->comm_create.comm] = world;
  }
  if (nccl_ != nullptr) CreateGpuComm(op, created, created != nullptr ? out : MPI_COMM_NULL);
}

// NCCL communicators on GPUs, over the MPI communicator of the same members
// made above: a split is re-issued as ncclCommSplit with the recorded colour
// and key (the backend falls back to a unique id when that gives other
// members); anything else gets a unique id from its first member. A rank the
// recording left out of a split (NCCL_SPLIT_NOCOLOR) still takes part in it.
void Driver::CreateGpuComm(const Event& op, const Event* created, MPI_Comm members) {
  const std::string api = header().ApiName(op.op.api);
  const uint64_t id = created != nullptr ? created->comm_create.comm : 0;
  Status st;
  if (api == "ncclCommSplit") {
    const int key = created != nullptr ? static_cast<int>(created->comm_create.key) : 0;
    st = nccl_->Split(op.op.comm, op.op.tag, key, id, members);  // the op's tag is the colour
  } else if (members != MPI_COMM_NULL) {
    // ncclCommInitRank, ...Config, ...Scalable, and ncclCommShrink (whose
    // excluded ranks take no part).
    st = nccl_->InitFromUniqueId(id, members);
  } else {
    return;
  }
  ++issued_;
  if (!st.ok()) GpuError(api + ": " + st.message());
}

// One NCCL collective or message, enqueued on its communicator's stream and,
// outside a group, waited for at once.
void Driver::GpuOperation(const Event& e) {
  const OpEvent& op = e.op;
  const std::string api = header().ApiName(op.api);
  if (!nccl_->Has(op.comm)) {
    Note(api + " on an unknown communicator");
    return;
  }
  const bool message = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
  if (message) {
    if (!Live(rank_)) return;
    auto m = members_.find(op.comm);
    if (m != members_.end() && op.peer >= 0 && op.peer < static_cast<int>(m->second.size()) &&
        !Live(m->second[static_cast<size_t>(op.peer)])) {
      Note("NCCL messages with ranks served from the trace");
      return;
    }
  } else if (!Live(rank_) || !AllLive(op.comm)) {
    Note(api + " with ranks served from the trace");
    return;
  }
  NcclOp o;
  o.api = api;
  o.kind = op.kind;
  o.count = op.count;
  o.dtype = op.dtype;
  o.dtype_size = op.dtype_size;
  o.redop = op.redop;
  o.root = op.root;
  o.peer = op.peer;
  o.seq = op.seq;
  if (op.kind == OpKind::kSend && opt_.recorded_payloads) {
    o.payload =
        SendBytes(op, static_cast<size_t>(std::max<int64_t>(op.count, 0)) * std::max<uint32_t>(op.dtype_size, 1));
  }
  ++issued_;
  Status st = nccl_->Issue(op.comm, o);
  if (!st.ok()) GpuError(st.message());
  if (nccl_->GroupDepth() == 0) GpuWait();
}

// ncclGroupStart and ncclGroupEnd where the recording called them: what the
// group holds is launched, and waited for, at the outermost end.
void Driver::GpuGroup(const Event& e) {
  if (!Live(rank_)) return;  // a rank served from the trace only helps create communicators
  const std::string api = header().ApiName(e.group.api);
  ++issued_;
  Status st = e.group.is_end ? nccl_->GroupEnd(api == "ncclGroupSimulateEnd") : nccl_->GroupStart();
  if (!st.ok()) GpuError(st.message());
  if (e.group.is_end && nccl_->GroupDepth() == 0) GpuWait();
}

void Driver::GpuFree(const Event& e) {
  if (!nccl_->Has(e.comm_free.comm)) return;
  ++issued_;
  Status st = nccl_->Free(e.comm_free.comm, header().ApiName(e.comm_free.api));
  if (!st.ok()) GpuError(st.message());
}

// A hang ends here: at the deadline the rank says what it was waiting for and
// exits (see the exit status at the top). After an NCCL error it aborts its
// communicators and stops driving.
void Driver::GpuWait() {
  std::string what;
  switch (nccl_->Wait(deadline_, &what)) {
    case WaitResult::kDone:
      return;
    case WaitResult::kFailed:
      GpuError(what);
      exit_code_ = kExitNcclError;
      stopped_ = "an NCCL error in " + what;
      nccl_->Abort();
      return;
    case WaitResult::kTimedOut: {
      char after[32];
      std::snprintf(after, sizeof(after), "%g", opt_.timeout_s);
      exit_code_ = kExitHung;
      stopped_ = "hung: " + what + " had not completed after --timeout " + after + " s";
      PrintSummary();
      _exit(kExitHung);
    }
  }
}

void Driver::GpuError(const std::string& what) {
  constexpr int kShown = 10;
  if (++errors_ <= kShown) {
    std::fprintf(stderr, "replay-drive: rank %d: %s%s\n", rank_, what.c_str(),
                 errors_ == kShown ? " (further errors are only counted)" : "");
  }
}

void Driver::Collective(const Event& e, bool has_ret) {
  const OpEvent& op = e.op;
  MPI_Comm comm = Comm(op.comm);
  std::string api = header().ApiName(op.api);
  if (comm == MPI_COMM_NULL) {
    Note(api + " on an unknown communicator");
    return;
  }
  if (!Live(rank_) || !AllLive(op.comm)) {
    Note(api + " with ranks served from the trace");
    return;
  }
  int csize = 0, crank = 0;
  MPI_Comm_size(comm, &csize);
  MPI_Comm_rank(comm, &crank);
  MPI_Datatype type = TypeOf(op.dtype, op.dtype_size);
  int tsize = 1;
  MPI_Type_size(type, &tsize);
  // Derived or unknown types travel as bytes.
  const int64_t scale = type == MPI_BYTE ? std::max<uint32_t>(op.dtype_size, 1) : 1;
  const size_t unit = type == MPI_BYTE ? 1 : static_cast<size_t>(tsize);
  const bool nonblocking = (op.flags & op_flags::kNonBlocking) != 0;
  auto p = std::make_unique<Pending>();
  MPI_Request* req = nonblocking ? &p->request : nullptr;
  MPI_Op redop = OpOf(op.redop);
  // The call's arguments from what the trace keeps (op_shape.h), its listed
  // counts laid out one after the other; buffers as large as they cover.
  OpArgs a = RecordedArgs(op, e.list, csize, crank);
  a.send_count *= scale;
  a.recv_count *= scale;
  auto lay = [&](IntList counts, std::vector<int>* c, std::vector<int>* d) {
    c->assign(static_cast<size_t>(csize), 0);
    d->assign(static_cast<size_t>(csize), 0);
    int disp = 0;
    for (int k = 0; counts && k < csize; ++k) {
      (*c)[static_cast<size_t>(k)] = static_cast<int>(counts[k] * scale);
      (*d)[static_cast<size_t>(k)] = disp;
      disp += (*c)[static_cast<size_t>(k)];
    }
  };
  lay(a.send_counts, &p->counts_a, &p->displs_a);
  lay(a.recv_counts, &p->counts_b, &p->displs_b);
  a.send_counts = p->counts_a.data();
  a.send_displs = p->displs_a.data();
  a.recv_counts = p->counts_b.data();
  a.recv_displs = p->displs_b.data();
  const OpTotals total = Totals(a);
  // A broadcast has one buffer, the root's to send and the others' to receive into.
  const int64_t send_elems = op.kind == OpKind::kBcast ? std::max(total.send, total.recv) : total.send;
  p->send = Synthetic(static_cast<size_t>(std::max<int64_t>(send_elems, 1)) * unit);
  p->recv.resize(static_cast<size_t>(std::max<int64_t>(total.recv, 1)) * unit);
  void* sb = p->send.data();
  void* rb = p->recv.data();
  const int sc = static_cast<int>(std::max<int64_t>(a.send_count, 0));
  const int rc_ = static_cast<int>(std::max<int64_t>(a.recv_count, 0));
  const int* scs = p->counts_a.data();
  const int* sds = p->displs_a.data();
  const int* rcs = p->counts_b.data();
  const int* rds = p->displs_b.data();
  // The collective's blocking form, or its non-blocking one completing through
  // *req: the same arguments either way.
  auto call = [&](auto blocking, auto immediate, auto... args) {
    return nonblocking ? immediate(args..., req) : blocking(args...);
  };
  int rc = MPI_SUCCESS;
  switch (op.kind) {
    case OpKind::kBarrier:
      rc = call(MPI_Barrier, MPI_Ibarrier, comm);
      break;
    case OpKind::kBcast:
      rc = call(MPI_Bcast, MPI_Ibcast, sb, sc, type, op.root, comm);
      break;
    case OpKind::kReduce:
      rc = call(MPI_Reduce, MPI_Ireduce, sb, rb, sc, type, redop, op.root, comm);
      break;
    case OpKind::kAllreduce:
      rc = call(MPI_Allreduce, MPI_Iallreduce, sb, rb, sc, type, redop, comm);
      break;
    case OpKind::kScan:
      rc = call(MPI_Scan, MPI_Iscan, sb, rb, sc, type, redop, comm);
      break;
    case OpKind::kExscan:
      rc = call(MPI_Exscan, MPI_Iexscan, sb, rb, sc, type, redop, comm);
      break;
    case OpKind::kGather:
      rc = call(MPI_Gather, MPI_Igather, sb, sc, type, rb, rc_, type, op.root, comm);
      break;
    case OpKind::kAllgather:
      rc = call(MPI_Allgather, MPI_Iallgather, sb, sc, type, rb, rc_, type, comm);
      break;
    case OpKind::kScatter:
      rc = call(MPI_Scatter, MPI_Iscatter, sb, sc, type, rb, rc_, type, op.root, comm);
      break;
    case OpKind::kAlltoall:
      rc = call(MPI_Alltoall, MPI_Ialltoall, sb, sc, type, rb, rc_, type, comm);
      break;
    case OpKind::kGatherv:
      rc = call(MPI_Gatherv, MPI_Igatherv, sb, sc, type, rb, rcs, rds, type, op.root, comm);
      break;
    case OpKind::kAllgatherv:
      rc = call(MPI_Allgatherv, MPI_Iallgatherv, sb, sc, type, rb, rcs, rds, type, comm);
      break;
    case OpKind::kScatterv:
      rc = call(MPI_Scatterv, MPI_Iscatterv, sb, scs, sds, type, rb, rc_, type, op.root, comm);
      break;
    case OpKind::kAlltoallv:
      rc = call(MPI_Alltoallv, MPI_Ialltoallv, sb, scs, sds, type, rb, rcs, rds, type, comm);
      break;
    case OpKind::kReduceScatter:
      rc = call(MPI_Reduce_scatter, MPI_Ireduce_scatter, sb, rb, rcs, type, redop, comm);
      break;
    case OpKind::kReduceScatterBlock:
      rc = call(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, sb, rb, rc_, type, redop, comm);
      break;
    default:
      Note(api);
      return;
  }
  ++issued_;
  if (rc != MPI_SUCCESS) ++errors_;
  (void)has_ret;
  if (nonblocking && op.request != 0) requests_[op.request] = std::move(p);
}

void Driver::PointToPoint(size_t i) {
  const Event& e = reader_->events()[i];
  const OpEvent& op = e.op;
  std::string api = header().ApiName(op.api);
  MPI_Comm comm = Comm(op.comm);
  if (comm == MPI_COMM_NULL) {
    Note(api + " on an unknown communicator");
    return;
  }
  const bool nonblocking = (op.flags & op_flags::kNonBlocking) != 0;
  if (!Live(rank_)) return;  // a rank served from the trace only helps create communicators
  auto peer_live = [&](int peer) {
    auto m = members_.find(op.comm);
    if (peer < 0 || m == members_.end() || peer >= static_cast<int>(m->second.size())) return true;
    return Live(m->second[static_cast<size_t>(peer)]);
  };
  MPI_Datatype type = TypeOf(op.dtype, op.dtype_size);
  int64_t count = op.count;
  if (type == MPI_BYTE && op.dtype_size > 1) count *= op.dtype_size;
  int tsize = 1;
  MPI_Type_size(type, &tsize);
  size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 0)) * static_cast<size_t>(tsize);
  int c = static_cast<int>(std::max<int64_t>(count, 0));
  const Event* ret = ReturnOf(i);
  auto p = std::make_unique<Pending>();
  int rc = MPI_SUCCESS;
  switch (op.kind) {
    case OpKind::kSend: {
      if ((op.flags & op_flags::kPersistent) && op.peer_seq == 0) return;  // an init, not a send
      if (!peer_live(op.peer)) {
        Note("sends to ranks served from the trace");
        return;
      }
      p->send = SendBytes(op, bytes);
      if (nonblocking) {
        rc = MPI_Isend(p->send.data(), c, type, op.peer, op.tag, comm, &p->request);
      } else if (op.flags & op_flags::kSynchronous) {
        rc = MPI_Ssend(p->send.data(), c, type, op.peer, op.tag, comm);
      } else {
        rc = MPI_Send(p->send.data(), c, type, op.peer, op.tag, comm);
      }
      break;
    }
    case OpKind::kRecv:
    case OpKind::kMrecv: {
      if ((op.flags & op_flags::kPersistent) && op.peer_seq == 0 && op.peer != kAnySource) return;
      // The source it matched when it completed, if it did: a wildcard made definite.
      int source = op.peer, tag = op.tag;
      if (ret != nullptr && ret->ret.source >= 0) {
        source = ret->ret.source;
        tag = ret->ret.tag;
      } else if (nonblocking) {
        for (const Event& later : reader_->events()) {
          if (later.kind == EventKind::kCompletion && later.completion.request == op.request &&
              later.completion.source >= 0) {
            source = later.completion.source;
            tag = later.completion.tag;
          }
        }
      }
      if (source == kNoPeer || !peer_live(source)) {
        Note("receives from ranks served from the trace");
        return;
      }
      p->recv.resize(std::max<size_t>(bytes, 1));
      rc = nonblocking ? MPI_Irecv(p->recv.data(), c, type, source, tag, comm, &p->request)
                       : MPI_Recv(p->recv.data(), c, type, source, tag, comm, MPI_STATUS_IGNORE);
      break;
    }
    case OpKind::kSendrecv: {
      int source = op.recv_peer, tag = op.recv_tag;
      if (ret != nullptr && ret->ret.source >= 0) {
        source = ret->ret.source;
        tag = ret->ret.tag;
      }
      if (!peer_live(op.peer) || !peer_live(source)) {
        Note("sendrecv with ranks served from the trace");
        return;
      }
      MPI_Datatype rtype = TypeOf(op.recv_dtype == DataType::kUnknown ? op.dtype : op.recv_dtype, op.recv_dtype_size);
      int rc_count = static_cast<int>(op.recv_count > 0 ? op.recv_count : count);
      int rsize = 1;
      MPI_Type_size(rtype, &rsize);
      p->send = SendBytes(op, bytes);
      p->recv.resize(std::max<size_t>(static_cast<size_t>(rc_count) * static_cast<size_t>(rsize), 1));
      rc = MPI_Sendrecv(p->send.data(), c, type, op.peer, op.tag, p->recv.data(), rc_count, rtype, source, tag, comm,
                        MPI_STATUS_IGNORE);
      break;
    }
    default:
      Note(api);
      return;
  }
  ++issued_;
  if (rc != MPI_SUCCESS) ++errors_;
  if (nonblocking && op.request != 0) requests_[op.request] = std::move(p);
}

int Driver::Run() {
  const std::vector<Event>& ev = reader_->events();
  comms_[0] = MPI_COMM_NULL;
  for (size_t i = 0; i < ev.size() && exit_code_ == 0; ++i) {
    const Event& e = ev[i];
    if (e.kind == EventKind::kGroup) {
      if (nccl_ != nullptr) GpuGroup(e);
      continue;
    }
    if (e.kind == EventKind::kCommCreate && (e.comm_create.flags & (comm_flags::kWorld | comm_flags::kSelf))) {
      comms_[e.comm_create.comm] = (e.comm_create.flags & comm_flags::kWorld) ? MPI_COMM_WORLD : MPI_COMM_SELF;
      members_[e.comm_create.comm] = std::vector<int>(e.list.begin(), e.list.end());
      continue;
    }
    if (e.kind == EventKind::kCompletion) {
      auto it = requests_.find(e.completion.request);
      if (it != requests_.end()) {
        MPI_Wait(&it->second->request, MPI_STATUS_IGNORE);
        requests_.erase(it);
      }
      continue;
    }
    if (e.kind == EventKind::kCommFree) {
      if (nccl_ != nullptr && IsNccl(e.comm_free.api)) GpuFree(e);
      auto it = comms_.find(e.comm_free.comm);
      if (it != comms_.end() && it->second != MPI_COMM_NULL && it->second != MPI_COMM_WORLD &&
          it->second != MPI_COMM_SELF) {
        MPI_Comm_free(&it->second);
        comms_.erase(it);
      }
      continue;
    }
    if (e.kind != EventKind::kOp) continue;
    const OpEvent& op = e.op;
    if (nccl_ != nullptr && NcclBackend::Reissues(op.kind) && IsNccl(op.api)) {
      GpuOperation(e);
      continue;
    }
    const bool has_ret = ReturnOf(i) != nullptr;
    switch (op.kind) {
      case OpKind::kInit:
      case OpKind::kFinalize:
        break;
      case OpKind::kAbort:
        std::fprintf(stderr, "replay-drive: rank %d: the recording calls MPI_Abort(%lld) here; so does the drive\n",
                     rank_, static_cast<long long>(op.count));
        MPI_Abort(MPI_COMM_WORLD, static_cast<int>(op.count));
        break;
      case OpKind::kCommCreate:
        CreateComm(i);
        break;
      case OpKind::kCommFree:
        break;
      case OpKind::kWait:
        // A wait that never returned: the rank hung waiting for these requests.
        if (!has_ret) {
          for (int64_t id : e.list) {
            auto it = requests_.find(static_cast<uint64_t>(id));
            if (it != requests_.end()) MPI_Wait(&it->second->request, MPI_STATUS_IGNORE);
          }
        }
        break;
      case OpKind::kSend:
      case OpKind::kRecv:
      case OpKind::kSendrecv:
      case OpKind::kMrecv:
        PointToPoint(i);
        break;
      case OpKind::kCancel: {
        // A receive the program gave up on: cancelled here too, or its wait hangs.
        auto it = requests_.find(op.request);
        if (it != requests_.end()) MPI_Cancel(&it->second->request);
        break;
      }
      case OpKind::kProbe:
      case OpKind::kStart:
      case OpKind::kOther:
        break;  // their effect is in the sends and receives they lead to
      case OpKind::kRma:
        Note("one-sided communication");
        break;
      case OpKind::kNeighborAllgather:
      case OpKind::kNeighborAllgatherv:
      case OpKind::kNeighborAlltoall:
      case OpKind::kNeighborAlltoallv:
      case OpKind::kNeighborAlltoallw:
      case OpKind::kAlltoallw:
        Note(header().ApiName(op.api));
        break;
      default:
        if (IsCollective(op.kind)) Collective(e, has_ret);
        break;
    }
  }
  if (nccl_ != nullptr && exit_code_ == 0) {
    // A group the recording left open (the rank died inside it) is closed, so its operations run.
    while (nccl_->GroupDepth() > 0) {
      Status st = nccl_->GroupEnd(false);
      if (!st.ok()) GpuError(st.message());
    }
    GpuWait();
  }
  // After a stop, MPI requests may wait on ranks that stopped too.
  if (exit_code_ == 0) {
    for (auto& [id, p] : requests_) MPI_Wait(&p->request, MPI_STATUS_IGNORE);
  }
  if (nccl_ != nullptr) nccl_->Close();
  PrintSummary();
  return exit_code_;
}

void Driver::PrintSummary() const {
  std::string skipped;
  for (const auto& [what, n] : skipped_) skipped += "; not re-issued: " + std::to_string(n) + " x " + what;
  if (!stopped_.empty()) skipped += "; stopped: " + stopped_;
  std::printf("replay-drive: rank %d: re-issued %d calls, %d returned an error%s\n", rank_, issued_, errors_,
              skipped.c_str());
  std::fflush(stdout);
}

// This process's rank among those of its node, from the launcher, else from MPI.
int LocalRank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

int Main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) {
      std::string list = argv[++i];
      size_t start = 0;
      while (start < list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        opt.live.insert(std::atoi(list.substr(start, comma - start).c_str()));
        start = comma + 1;
      }
    } else if (a == "--payload" && i + 1 < argc) {
      opt.recorded_payloads = std::string(argv[++i]) == "recorded";
    } else if (a == "--backend" && i + 1 < argc) {
      opt.backend = argv[++i];
    } else if (a == "--timeout" && i + 1 < argc) {
      opt.timeout_s = std::atof(argv[++i]);
    } else {
      opt.dir = a;
    }
  }
  auto trace = TraceReader::Open(opt.dir);
  if (!trace.ok()) {
    std::fprintf(stderr, "replay-drive: %s\n", trace.status().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
  }
  if (static_cast<int>((*trace)->ranks().size()) != size) {
    if (rank == 0) {
      std::fprintf(stderr, "replay-drive: the trace has %zu ranks; run with as many (mpirun -np %zu)\n",
                   (*trace)->ranks().size(), (*trace)->ranks().size());
    }
    MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
  }
  const RankEntry* entry = (*trace)->FindRank(rank);
  if (entry == nullptr) {
    std::fprintf(stderr, "replay-drive: rank %d is not in the trace\n", rank);
    MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
  }
  auto reader = RankReader::Open(entry->dir);
  if (!reader.ok()) {
    std::fprintf(stderr, "replay-drive: %s\n", reader.status().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
  }
  std::unique_ptr<NcclBackend> nccl;
  if (opt.backend == "nccl") {
    auto b = NcclBackend::Open(LocalRank());
    if (!b.ok()) {
      std::fprintf(stderr, "replay-drive: rank %d: --backend nccl: %s\n", rank, b.status().message().c_str());
      MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
    }
    nccl = std::move(b).value();
    std::printf("replay-drive: rank %d: %s\n", rank, nccl->Describe().c_str());
  } else if (opt.backend != "host") {
    if (rank == 0) std::fprintf(stderr, "replay-drive: --backend %s is not one of host, nccl\n", opt.backend.c_str());
    MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
  }
  int rc = 0;
  {
    Driver d(opt, std::move(reader).value(), std::move(trace).value(), rank, size, std::move(nccl));
    rc = d.Run();
  }
  MPI_Finalize();
  return rc;
}

}  // namespace
}  // namespace replay::drive

int main(int argc, char** argv) { return replay::drive::Main(argc, argv); }
