// ReproProgram (replay/shrink.h): a trace's calls as a standalone C program.
//
// Each rank's calls become one C function, one line per call, in recorded
// order: the communicators created as recorded (dup, split with the recorded
// colour and the rank each member got as key, NCCL communicators from a
// unique id or by ncclCommSplit), collectives and messages with the recorded
// counts, types, reductions, roots, peers and tags through the functions of
// repro_library.h, non-blocking calls and the waits that complete them, NCCL
// groups. Data is synthetic; a receive that matched a wildcard names the
// sender it matched. Ranks whose calls are the same share a function. The
// program needs MPI (and for NCCL calls CUDA's driver API and NCCL), nothing
// of replay.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "replay/check.h"
#include "replay/shrink.h"
#include "shrink/finding_key.h"
#include "shrink/program.h"
#include "shrink/repro_library.h"

namespace replay {
namespace {

using shrink::IsNcclApi;

std::string MpiType(DataType t, uint32_t size, int64_t* count) {
  switch (t) {
    case DataType::kInt8: return "MPI_SIGNED_CHAR";
    case DataType::kUint8: return "MPI_UNSIGNED_CHAR";
    case DataType::kInt16: return "MPI_SHORT";
    case DataType::kUint16: return "MPI_UNSIGNED_SHORT";
    case DataType::kInt32: return "MPI_INT";
    case DataType::kUint32: return "MPI_UNSIGNED";
    case DataType::kInt64: return "MPI_INT64_T";
    case DataType::kUint64: return "MPI_UINT64_T";
    case DataType::kFloat32: return "MPI_FLOAT";
    case DataType::kFloat64: return "MPI_DOUBLE";
    case DataType::kFloat128: return "MPI_LONG_DOUBLE";
    case DataType::kComplex64: return "MPI_C_FLOAT_COMPLEX";
    case DataType::kComplex128: return "MPI_C_DOUBLE_COMPLEX";
    case DataType::kBool: return "MPI_C_BOOL";
    case DataType::kPair: return size == 8 ? "MPI_2INT" : "MPI_DOUBLE_INT";
    default:
      // Derived and other types travel as their bytes.
      if (size > 1 && count != nullptr) *count *= size;
      return "MPI_BYTE";
  }
}

std::string MpiOp(RedOp op) {
  switch (op) {
    case RedOp::kProd: return "MPI_PROD";
    case RedOp::kMax: return "MPI_MAX";
    case RedOp::kMin: return "MPI_MIN";
    case RedOp::kLand: return "MPI_LAND";
    case RedOp::kLor: return "MPI_LOR";
    case RedOp::kLxor: return "MPI_LXOR";
    case RedOp::kBand: return "MPI_BAND";
    case RedOp::kBor: return "MPI_BOR";
    case RedOp::kBxor: return "MPI_BXOR";
    case RedOp::kMinloc: return "MPI_MINLOC";
    case RedOp::kMaxloc: return "MPI_MAXLOC";
    case RedOp::kReplace: return "MPI_REPLACE";
    default: return "MPI_SUM";  // sum, avg and user-defined reductions
  }
}

std::string NcclType(DataType t) {
  switch (t) {
    case DataType::kInt8: return "ncclInt8";
    case DataType::kUint8: return "ncclUint8";
    case DataType::kInt32: return "ncclInt32";
    case DataType::kUint32: return "ncclUint32";
    case DataType::kInt64: return "ncclInt64";
    case DataType::kUint64: return "ncclUint64";
    case DataType::kFloat16: return "ncclFloat16";
    case DataType::kBfloat16: return "ncclBfloat16";
    case DataType::kFloat64: return "ncclFloat64";
    case DataType::kFp8E4M3: return "ncclFloat8e4m3";
    case DataType::kFp8E5M2: return "ncclFloat8e5m2";
    default: return "ncclFloat32";
  }
}

std::string NcclOp(RedOp op) {
  switch (op) {
    case RedOp::kProd: return "ncclProd";
    case RedOp::kMax: return "ncclMax";
    case RedOp::kMin: return "ncclMin";
    case RedOp::kAvg: return "ncclAvg";
    default: return "ncclSum";
  }
}

std::string Num(int64_t v) { return std::to_string(v); }

// A communicator as the program names it.
struct CommInfo {
  std::string var;               // "c3", MPI_COMM_WORLD or MPI_COMM_SELF
  bool nccl = false;
  std::vector<int32_t> members;  // world ranks in communicator order
};

std::string Peer(int32_t p) { return p == kAnySource ? std::string("MPI_ANY_SOURCE") : Num(p); }
std::string Tag(int32_t t) { return t == kAnyTag ? std::string("MPI_ANY_TAG") : Num(t); }

class ReproWriter {
 public:
  explicit ReproWriter(std::vector<shrink::RankEvents> ranks) : ranks_(std::move(ranks)) {}
  std::string Program(const std::string& title, const std::string& expect, const std::string& commands);

 private:
  void IndexComms();
  std::string RankBody(size_t r);
  // The line(s) of the call at event `i`, or "" for an event that is no call.
  std::string Line(const shrink::RankEvents& r, size_t i);
  std::string Create(const shrink::RankEvents& r, size_t i);
  std::string MpiCall(const shrink::RankEvents& r, size_t i);
  std::string NcclCall(const shrink::RankEvents& r, size_t i);
  const Event* After(const shrink::RankEvents& r, size_t i, EventKind kind) const;
  std::string CommVar(uint64_t id) const {
    auto it = comms_.find(id);
    return it == comms_.end() ? "MPI_COMM_NULL /* not created in the trace */" : it->second.var;
  }
  // `name(args)` through the library function `name`.
  std::string Use(const std::string& name, const std::string& args) {
    used_.insert(name);
    return name + "(" + args + ");";
  }

  std::vector<shrink::RankEvents> ranks_;
  std::map<uint64_t, CommInfo> comms_;
  std::set<std::string> used_;  // library functions called
  bool nccl_ = false;
  // Per rank, while its body is written.
  std::map<uint64_t, int> requests_;  // request id -> rq[] index
  int rank_ = 0;
  bool none_ = false;                 // a split that gave this rank no communicator
};

const Event* ReproWriter::After(const shrink::RankEvents& r, size_t i, EventKind kind) const {
  for (size_t j = i + 1; j < r.events.size(); ++j) {
    if (r.events[j].thread != r.events[i].thread) continue;
    if (r.events[j].kind == kind) return &r.events[j];
    if (r.events[j].kind == EventKind::kOp || r.events[j].kind == EventKind::kGroup) return nullptr;
  }
  return nullptr;
}

void ReproWriter::IndexComms() {
  int next = 1;
  for (const shrink::RankEvents& r : ranks_) {
    for (const Event& e : r.events) {
      if (e.kind == EventKind::kOp && IsNcclApi(r.header.ApiName(e.op.api))) nccl_ = true;
      if (e.kind != EventKind::kCommCreate) continue;
      const CommCreateEvent& c = e.comm_create;
      CommInfo& info = comms_[c.comm];
      if (info.var.empty()) {
        info.var = (c.flags & comm_flags::kWorld)  ? "MPI_COMM_WORLD"
                   : (c.flags & comm_flags::kSelf) ? "MPI_COMM_SELF"
                                                   : "c" + std::to_string(next++);
        info.nccl = IsNcclApi(r.header.ApiName(c.api));
      }
      if (!e.list.empty()) {
        info.members.assign(e.list.begin(), e.list.end());
      } else if (c.size > 0 && c.rank >= 0 && c.rank < c.size) {
        if (info.members.size() != static_cast<size_t>(c.size)) info.members.assign(static_cast<size_t>(c.size), -1);
        info.members[static_cast<size_t>(c.rank)] = r.header.rank;
      }
    }
  }
}

std::string ReproWriter::Create(const shrink::RankEvents& r, size_t i) {
  const OpEvent& op = r.events[i].op;
  const std::string api = r.header.ApiName(op.api);
  const Event* created = After(r, i, EventKind::kCommCreate);
  const std::string parent = CommVar(op.comm);
  if (IsNcclApi(api)) {
    if (api == "ncclCommSplit") {
      if (created == nullptr) {
        return "{ ncclComm_t none; nccl_check(ncclCommSplit(" + parent +
               ", NCCL_SPLIT_NOCOLOR, 0, &none, NULL), \"ncclCommSplit\"); }";
      }
      return "nccl_check(ncclCommSplit(" + parent + ", " + Num(created->comm_create.color) + ", " +
             Num(created->comm_create.rank) + ", &" + comms_.at(created->comm_create.comm).var +
             ", NULL), \"ncclCommSplit\");";
    }
    if (created == nullptr || api == "ncclCommShrink" || api == "ncclCommInitAll") {
      return "/* " + api + ": not made here */";
    }
    // From a unique id its first member makes and sends to the others.
    used_.insert("nccl_check");
    const CommInfo& c = comms_.at(created->comm_create.comm);
    const std::string tag = Num(1000 + std::stoi(c.var.substr(1)));
    std::string out = "{\n    ncclUniqueId id;\n";
    if (created->comm_create.rank == 0) {
      out += "    nccl_check(ncclGetUniqueId(&id), \"ncclGetUniqueId\");\n";
      for (size_t k = 1; k < c.members.size(); ++k) {
        out += "    MPI_Send(&id, sizeof id, MPI_BYTE, " + Num(c.members[k]) + ", " + tag + ", MPI_COMM_WORLD);\n";
      }
    } else {
      out += "    MPI_Recv(&id, sizeof id, MPI_BYTE, " + Num(c.members.empty() ? 0 : c.members.front()) + ", " + tag +
             ", MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n";
    }
    return out + "    nccl_check(ncclCommInitRank(&" + c.var + ", " + Num(static_cast<int64_t>(c.members.size())) +
           ", id, " + Num(created->comm_create.rank) + "), \"ncclCommInitRank\");\n  }";
  }
  used_.insert("mpi_check");
  std::string target = "&none";
  if (created != nullptr) {
    target = "&" + comms_.at(created->comm_create.comm).var;
  } else {
    none_ = true;
  }
  const std::string key = created != nullptr ? Num(created->comm_create.rank) : std::string("0");
  if (api == "MPI_Comm_dup" || api == "MPI_Comm_idup" || api == "MPI_Comm_dup_with_info" ||
      api == "MPI_Comm_idup_with_info") {
    return "mpi_check(MPI_Comm_dup(" + parent + ", " + target + "), \"MPI_Comm_dup\");";
  }
  if (api == "MPI_Comm_split_type") {
    const std::string type = created != nullptr ? Num(created->comm_create.color) : std::string("MPI_UNDEFINED");
    return "mpi_check(MPI_Comm_split_type(" + parent + ", " + type + ", " + key + ", MPI_INFO_NULL, " + target +
           "), \"MPI_Comm_split_type\");";
  }
  // A split, and any other creation as the split that gives the same members.
  std::string color = "MPI_UNDEFINED";
  if (created != nullptr) {
    color = api == "MPI_Comm_split" && created->comm_create.color >= 0
                ? Num(created->comm_create.color)
                : Num(static_cast<int64_t>(created->comm_create.comm & 0x3fffffff));
  }
  const std::string note = api == "MPI_Comm_split" ? "" : "/* " + api + ", as the split that gives its members */\n  ";
  return note + "mpi_check(MPI_Comm_split(" + parent + ", " + color + ", " + key + ", " + target +
         "), \"MPI_Comm_split\");";
}

std::string ReproWriter::NcclCall(const shrink::RankEvents& r, size_t i) {
  const OpEvent& op = r.events[i].op;
  const std::string api = r.header.ApiName(op.api);
  const std::string c = Num(std::max<int64_t>(op.count, 0)), t = NcclType(op.dtype), cm = CommVar(op.comm);
  switch (op.kind) {
    case OpKind::kAllreduce: return Use("nccl_allreduce", c + ", " + t + ", " + NcclOp(op.redop) + ", " + cm);
    case OpKind::kBcast: return Use("nccl_broadcast", c + ", " + t + ", " + Num(op.root) + ", " + cm);
    case OpKind::kReduce:
      return Use("nccl_reduce", c + ", " + t + ", " + NcclOp(op.redop) + ", " + Num(op.root) + ", " + cm);
    case OpKind::kAllgather: return Use("nccl_allgather", c + ", " + t + ", " + cm);
    case OpKind::kReduceScatterBlock:
      return Use("nccl_reduce_scatter", c + ", " + t + ", " + NcclOp(op.redop) + ", " + cm);
    case OpKind::kAlltoall: return Use("nccl_alltoall", c + ", " + t + ", " + cm);
    case OpKind::kGather: return Use("nccl_gather", c + ", " + t + ", " + Num(op.root) + ", " + cm);
    case OpKind::kScatter: return Use("nccl_scatter", c + ", " + t + ", " + Num(op.root) + ", " + cm);
    case OpKind::kSend: return Use("nccl_send", c + ", " + t + ", " + Num(op.peer) + ", " + cm);
    case OpKind::kRecv: return Use("nccl_recv", c + ", " + t + ", " + Num(op.peer) + ", " + cm);
    case OpKind::kCommFree:
      used_.insert("nccl_check");
      return "nccl_check(" + api + "(" + cm + "), \"" + api + "\");";
    default: return "/* " + api + ": not made here */";
  }
}

std::string ReproWriter::MpiCall(const shrink::RankEvents& r, size_t i) {
  const Event& e = r.events[i];
  const OpEvent& op = e.op;
  const std::string api = r.header.ApiName(op.api);
  const std::string cm = CommVar(op.comm);
  const bool nb = (op.flags & op_flags::kNonBlocking) != 0 && op.request != 0;
  std::string req;
  if (nb) {
    const int k = static_cast<int>(requests_.size());
    requests_[op.request] = k;
    req = ", &rq[" + Num(k) + "]";
  }
  const std::string pre = nb ? "mpi_i" : "mpi_";
  int64_t count = std::max<int64_t>(op.count, 0);
  const std::string t = MpiType(op.dtype, op.dtype_size, &count);
  const std::string c = Num(count);
  const std::string rc = Num(op.recv_count > 0 ? op.recv_count : count);
  const CommInfo* comm = comms_.count(op.comm) ? &comms_.at(op.comm) : nullptr;
  const int n = comm != nullptr ? static_cast<int>(comm->members.size()) : 0;
  // Per-rank counts as a C array.
  auto counts = [&](size_t from) {
    std::string a = "(const int[]){";
    for (int k = 0; k < n; ++k) {
      const size_t at = from + static_cast<size_t>(k);
      a += (k ? ", " : "") + Num(at < e.list.size() ? e.list[at] : 0);
    }
    return a + "}";
  };
  const int64_t per = n > 0 ? count / n : 0;
  switch (op.kind) {
    case OpKind::kBarrier: return Use(pre + "barrier", cm + req);
    case OpKind::kBcast: return Use(pre + "bcast", c + ", " + t + ", " + Num(op.root) + ", " + cm + req);
    case OpKind::kReduce:
      return Use(pre + "reduce", c + ", " + t + ", " + MpiOp(op.redop) + ", " + Num(op.root) + ", " + cm + req);
    case OpKind::kAllreduce: return Use(pre + "allreduce", c + ", " + t + ", " + MpiOp(op.redop) + ", " + cm + req);
    case OpKind::kScan: return Use(pre + "scan", c + ", " + t + ", " + MpiOp(op.redop) + ", " + cm + req);
    case OpKind::kExscan: return Use(pre + "exscan", c + ", " + t + ", " + MpiOp(op.redop) + ", " + cm + req);
    case OpKind::kGather:
      return Use(pre + "gather", c + ", " + t + ", " + rc + ", " + Num(op.root) + ", " + cm + req);
    case OpKind::kAllgather: return Use(pre + "allgather", c + ", " + t + ", " + rc + ", " + cm + req);
    case OpKind::kScatter: {
      const std::string each = op.recv_count > 0 ? Num(op.recv_count) : Num(per);
      return Use(pre + "scatter", each + ", " + t + ", " + Num(op.root) + ", " + cm + req);
    }
    case OpKind::kAlltoall: return Use(pre + "alltoall", Num(per) + ", " + t + ", " + cm + req);
    case OpKind::kReduceScatterBlock:
      return Use(pre + "reduce_scatter_block", Num(per) + ", " + t + ", " + MpiOp(op.redop) + ", " + cm + req);
    case OpKind::kGatherv:
      return Use(pre + "gatherv", c + ", " + t + ", " + counts(0) + ", " + Num(op.root) + ", " + cm + req);
    case OpKind::kAllgatherv: return Use(pre + "allgatherv", c + ", " + t + ", " + counts(0) + ", " + cm + req);
    case OpKind::kScatterv:
      return Use(pre + "scatterv", counts(0) + ", " + t + ", " + rc + ", " + Num(op.root) + ", " + cm + req);
    case OpKind::kReduceScatter:
      return Use(pre + "reduce_scatter", counts(0) + ", " + t + ", " + MpiOp(op.redop) + ", " + cm + req);
    case OpKind::kAlltoallv:
      return Use(pre + "alltoallv", counts(0) + ", " + counts(static_cast<size_t>(n)) + ", " + t + ", " + cm + req);
    case OpKind::kSend: {
      if ((op.flags & op_flags::kPersistent) && op.peer_seq == 0) return "";  // an init: its starts send
      const std::string mode = (op.flags & op_flags::kSynchronous) ? "ssend" : "send";
      return Use(pre + mode, c + ", " + t + ", " + Num(op.peer) + ", " + Num(op.tag) + ", " + cm + req);
    }
    case OpKind::kRecv:
    case OpKind::kMrecv: {
      if ((op.flags & op_flags::kPersistent) && op.peer_seq == 0 && op.peer != kAnySource) return "";
      // The sender and tag it matched, when the recording saw it complete.
      int32_t source = op.peer, tag = op.tag;
      const Event* ret = After(r, i, EventKind::kReturn);
      if (ret != nullptr && ret->ret.source >= 0) {
        source = ret->ret.source;
        tag = ret->ret.tag;
      } else if (nb) {
        for (const Event& later : r.events) {
          if (later.kind == EventKind::kCompletion && later.completion.request == op.request &&
              later.completion.source >= 0) {
            source = later.completion.source;
            tag = later.completion.tag;
          }
        }
      }
      return Use(pre + "recv", c + ", " + t + ", " + Peer(source) + ", " + Tag(tag) + ", " + cm + req);
    }
    case OpKind::kSendrecv: {
      int32_t source = op.recv_peer, tag = op.recv_tag;
      const Event* ret = After(r, i, EventKind::kReturn);
      if (ret != nullptr && ret->ret.source >= 0) {
        source = ret->ret.source;
        tag = ret->ret.tag;
      }
      int64_t rcount = op.recv_count > 0 ? op.recv_count : count;
      const std::string rt = MpiType(op.recv_dtype == DataType::kUnknown ? op.dtype : op.recv_dtype,
                                     op.recv_dtype_size, &rcount);
      return Use("mpi_sendrecv", c + ", " + t + ", " + Num(op.peer) + ", " + Num(op.tag) + ", " + Num(rcount) + ", " +
                                     rt + ", " + Peer(source) + ", " + Tag(tag) + ", " + cm);
    }
    case OpKind::kProbe:
      used_.insert("mpi_check");
      return "mpi_check(MPI_Probe(" + Peer(op.peer) + ", " + Tag(op.tag) + ", " + cm +
             ", MPI_STATUS_IGNORE), \"MPI_Probe\");";
    case OpKind::kCommFree:
      used_.insert("mpi_check");
      return "mpi_check(MPI_Comm_free(&" + cm + "), \"MPI_Comm_free\");";
    case OpKind::kAbort: return "MPI_Abort(MPI_COMM_WORLD, " + Num(op.count) + ");";
    case OpKind::kWait: {
      std::vector<std::string> reqs;
      for (int64_t id : e.list) {
        auto it = requests_.find(static_cast<uint64_t>(id));
        if (it != requests_.end()) reqs.push_back("rq[" + Num(it->second) + "]");
      }
      if (reqs.empty()) return "";
      used_.insert("mpi_check");
      const std::string note = api != "MPI_Wait" && api != "MPI_Waitall" ? "/* " + api + " */ " : "";
      if (reqs.size() == 1) return note + "mpi_check(MPI_Wait(&" + reqs[0] + ", MPI_STATUS_IGNORE), \"MPI_Wait\");";
      std::string list;
      for (size_t k = 0; k < reqs.size(); ++k) list += (k ? ", " : "") + reqs[k];
      return note + "mpi_check(MPI_Waitall(" + Num(static_cast<int64_t>(reqs.size())) + ", (MPI_Request[]){" + list +
             "}, MPI_STATUSES_IGNORE), \"MPI_Waitall\");";
    }
    default: return "/* " + api + ": not made here */";
  }
}

std::string ReproWriter::Line(const shrink::RankEvents& r, size_t i) {
  const Event& e = r.events[i];
  if (e.kind == EventKind::kGroup) return Use(e.group.is_end ? "group_end" : "group_start", "");
  if (e.kind != EventKind::kOp) return "";
  const OpEvent& op = e.op;
  if (op.kind == OpKind::kInit || op.kind == OpKind::kFinalize) return "";  // main() makes them
  if (op.kind == OpKind::kCommCreate) return Create(r, i);
  return IsNcclApi(r.header.ApiName(op.api)) ? NcclCall(r, i) : MpiCall(r, i);
}

std::string ReproWriter::RankBody(size_t r) {
  const shrink::RankEvents& rank = ranks_[r];
  rank_ = rank.header.rank;
  requests_.clear();
  none_ = false;
  std::string body;
  for (size_t i = 0; i < rank.events.size(); ++i) {
    const std::string line = Line(rank, i);
    if (!line.empty()) body += "  " + line + "\n";
  }
  // The communicators and requests it uses, declared first.
  std::set<std::string> mpi_vars, nccl_vars;
  for (const Event& e : rank.events) {
    if (e.kind != EventKind::kCommCreate) continue;
    const CommInfo& c = comms_.at(e.comm_create.comm);
    if (c.var.rfind("MPI_COMM", 0) != 0) (c.nccl ? nccl_vars : mpi_vars).insert(c.var);
  }
  std::string decl;
  for (const std::string& v : mpi_vars) decl += "  MPI_Comm " + v + " = MPI_COMM_NULL;\n";
  for (const std::string& v : nccl_vars) decl += "  ncclComm_t " + v + " = NULL;\n";
  if (none_) decl += "  MPI_Comm none;\n";
  if (!requests_.empty()) decl += "  MPI_Request rq[" + Num(static_cast<int64_t>(requests_.size())) + "];\n";
  return decl + body;
}

std::string ReproWriter::Program(const std::string& title, const std::string& expect, const std::string& commands) {
  IndexComms();
  // One function per distinct body.
  std::vector<std::string> bodies;
  std::vector<size_t> body_of(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r) {
    std::string b = RankBody(r);
    auto it = std::find(bodies.begin(), bodies.end(), b);
    body_of[r] = static_cast<size_t>(it - bodies.begin());
    if (it == bodies.end()) bodies.push_back(std::move(b));
  }
  if (nccl_) used_.insert({"cuda_check", "synchronize"});

  std::ostringstream o;
  o << "/* repro.c: " << title << "\n *\n"
    << " * Written by `replay shrink`: the calls of the smallest job it found that still\n"
    << " * fails the same way, made in order by " << ranks_.size() << (ranks_.size() == 1 ? " rank" : " ranks")
    << " with synthetic data. It needs\n"
    << " * MPI" << (nccl_ ? ", CUDA and NCCL" : "") << ", nothing of replay.\n *\n"
    << " * Build and run:\n";
  std::istringstream cmds(commands);
  for (std::string line; std::getline(cmds, line);) o << " *   " << line << "\n";
  o << " *\n * Expected: ";
  for (char ch : expect) o << (ch == '\n' ? std::string("\n *   ") : std::string(1, ch));
  o << "\n */\n";
  o << "#include <mpi.h>\n";
  if (nccl_) o << "#include <cuda.h>\n#include <nccl.h>\n#include <stdint.h>\n";
  o << "#include <stdio.h>\n#include <stdlib.h>\n\n";
  o << "static int rank;\n";
  if (nccl_) o << "static CUstream stream;\n";
  o << "\n" << shrink::ReproLibrary(used_);
  for (size_t b = 0; b < bodies.size(); ++b) {
    std::string who;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (body_of[r] == b) who += (who.empty() ? " " : ", ") + std::to_string(r);
    }
    o << "/* rank" << (who.find(',') != std::string::npos ? "s" : "") << who << " */\n";
    o << "static void calls_" << b << "(void) {\n" << bodies[b] << "}\n\n";
  }
  o << "int main(int argc, char **argv) {\n"
       "  int size;\n"
       "  MPI_Init(&argc, &argv);\n"
       "  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n"
       "  MPI_Comm_size(MPI_COMM_WORLD, &size);\n"
    << "  if (size != " << ranks_.size() << ") {\n"
    << "    if (rank == 0) fprintf(stderr, \"run it with " << ranks_.size() << " ranks: mpirun -np "
    << ranks_.size() << " %s\\n\", argv[0]);\n"
    << "    MPI_Finalize();\n"
       "    return 2;\n"
       "  }\n"
       "  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);\n";
  if (nccl_) {
    o << "  /* One device per rank on its node. */\n"
         "  MPI_Comm node;\n"
         "  int local = 0, devices = 0;\n"
         "  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);\n"
         "  MPI_Comm_rank(node, &local);\n"
         "  MPI_Comm_free(&node);\n"
         "  CUdevice device;\n"
         "  CUcontext context;\n"
         "  cuda_check(cuInit(0), \"cuInit\");\n"
         "  cuda_check(cuDeviceGetCount(&devices), \"cuDeviceGetCount\");\n"
         "  cuda_check(cuDeviceGet(&device, devices > 0 ? local % devices : 0), \"cuDeviceGet\");\n"
         "  cuda_check(cuDevicePrimaryCtxRetain(&context, device), \"cuDevicePrimaryCtxRetain\");\n"
         "  cuda_check(cuCtxSetCurrent(context), \"cuCtxSetCurrent\");\n"
         "  cuda_check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), \"cuStreamCreate\");\n";
  }
  o << "  switch (rank) {\n";
  for (size_t r = 0; r < ranks_.size(); ++r) o << "    case " << r << ": calls_" << body_of[r] << "(); break;\n";
  o << "  }\n";
  if (nccl_) o << "  synchronize();\n";
  o << "  MPI_Finalize();\n"
       "  return 0;\n"
       "}\n";
  return o.str();
}

std::vector<shrink::RankEvents> ReadRanks(const TraceReader& trace, Status* status) {
  std::vector<shrink::RankEvents> out;
  for (size_t i = 0; i < trace.ranks().size(); ++i) {
    auto r = trace.OpenRank(i);
    if (!r.ok()) {
      *status = r.status();
      return {};
    }
    out.push_back({(*r)->header(), (*r)->events()});
    out.back().header.rank = (*r)->rank();
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.header.rank < b.header.rank; });
  return out;
}

bool TraceHasNccl(const std::vector<shrink::RankEvents>& ranks) {
  for (const auto& r : ranks) {
    for (const std::string& api : r.header.api_names) {
      if (IsNcclApi(api)) {
        for (const Event& e : r.events) {
          if (e.kind == EventKind::kOp && IsNcclApi(r.header.ApiName(e.op.api))) return true;
        }
        break;
      }
    }
  }
  return false;
}

std::string Commands(size_t ranks, bool nccl, bool hang) {
  std::string build = nccl ? "cuda=${CUDA_HOME:-/usr/local/cuda}\n"
                             "mpicc -o repro repro.c -I$cuda/include -L$cuda/lib64 -L$cuda/lib64/stubs -lnccl -lcuda\n"
                           : "mpicc -o repro repro.c\n";
  return build + (hang ? "timeout 60 " : "") + "mpirun -np " + std::to_string(ranks) + " ./repro";
}


bool IsHang(const Finding& f) {
  return f.kind == FindingKind::kMissingRanks || f.kind == FindingKind::kNeverCompleted ||
         f.kind == FindingKind::kUnmatchedP2p;
}

// `finding`, or the first finding of the trace's check a drive can show.
std::optional<Finding> Expected(const TraceReader& trace, const Finding* finding) {
  if (finding != nullptr) return *finding;
  auto report = CheckTrace(trace);
  if (!report.ok()) return std::nullopt;
  const Finding* f = shrink::PickFinding(*report, "");
  return f != nullptr ? std::optional<Finding>(*f) : std::nullopt;
}

}  // namespace

std::string ReproCommands(const TraceReader& trace, const Finding* finding) {
  Status st;
  std::vector<shrink::RankEvents> ranks = ReadRanks(trace, &st);
  std::optional<Finding> f = Expected(trace, finding);
  return Commands(trace.ranks().size(), TraceHasNccl(ranks), f && IsHang(*f));
}

Result<std::string> ReproProgram(const TraceReader& trace, const Finding* finding) {
  Status st;
  std::vector<shrink::RankEvents> ranks = ReadRanks(trace, &st);
  if (!st.ok()) return st;
  if (ranks.empty()) return Status::InvalidArgument("the trace has no ranks");
  std::string title = "a job of " + std::to_string(ranks.size()) + " ranks", expect = "it completes.";
  std::optional<Finding> f = Expected(trace, finding);
  if (f) {
    title = f->title;
    expect = "replay check of its recording reports\n  " + std::string(FindingKindName(f->kind)) + " " + f->title;
    if (IsHang(*f)) expect += "\nand it hangs there (the timeout ends it)";
  }
  const std::string commands = ReproCommands(trace, f ? &*f : nullptr);
  ReproWriter w(std::move(ranks));
  return w.Program(title, expect, commands);
}

}  // namespace replay
