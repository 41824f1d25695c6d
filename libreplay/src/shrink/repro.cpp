// ReproProgram (replay/shrink.h): a trace's calls as a standalone C program.
//
// Each rank's calls become one C function, made in recorded order: the
// communicators created as recorded (dup, split with the recorded colour and
// the rank each member got as key, NCCL communicators from a unique id or
// ncclCommSplit), collectives and messages with the recorded counts, types,
// reductions, roots, peers and tags, non-blocking calls and the waits that
// complete them, NCCL groups. Data is synthetic; a receive that matched a
// wildcard names the sender it matched. Ranks whose calls are the same share
// a function. The program needs MPI (and for NCCL calls CUDA's driver API
// and NCCL), nothing of replay.
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

size_t MpiTypeSize(DataType t, uint32_t size) {
  switch (t) {
    case DataType::kPair: return size == 8 ? 8 : 16;
    case DataType::kUnknown:
    case DataType::kDerived:
    case DataType::kByte: return 1;
    default: return std::max<uint32_t>(size, 1);
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
  std::string var;                // "c3", or MPI_COMM_WORLD / MPI_COMM_SELF
  bool nccl = false;
  std::vector<int32_t> members;   // world ranks in communicator order
  std::string what;               // "MPI_Comm_dup(MPI_COMM_WORLD)": how it was made, for a comment
};

class ReproWriter {
 public:
  explicit ReproWriter(std::vector<shrink::RankEvents> ranks) : ranks_(std::move(ranks)) {}
  std::string Program(const std::string& title, const std::string& expect, const std::string& commands);

 private:
  void IndexComms();
  std::string RankBody(size_t r);
  void Op(const shrink::RankEvents& r, size_t i, std::ostringstream& out, const std::string& indent);
  const Event* After(const shrink::RankEvents& r, size_t i, EventKind kind) const;
  std::string CommVar(uint64_t id) const {
    auto it = comms_.find(id);
    return it == comms_.end() ? "MPI_COMM_NULL /* a communicator the trace does not show created */" : it->second.var;
  }

  std::vector<shrink::RankEvents> ranks_;
  std::map<uint64_t, CommInfo> comms_;
  bool nccl_ = false;
  // Per rank while writing it.
  std::map<uint64_t, int> requests_;            // request id -> rq[] index
  std::map<uint64_t, std::string> req_buffers_; // request id -> buffers to free after its wait
  int group_depth_ = 0;
  int rank_ = 0;
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
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      if (e.kind != EventKind::kCommCreate) continue;
      const CommCreateEvent& c = e.comm_create;
      CommInfo& info = comms_[c.comm];
      if (info.var.empty()) {
        if (c.flags & comm_flags::kWorld) {
          info.var = "MPI_COMM_WORLD";
        } else if (c.flags & comm_flags::kSelf) {
          info.var = "MPI_COMM_SELF";
        } else {
          info.var = "c" + std::to_string(next++);
        }
        info.nccl = IsNcclApi(r.header.ApiName(c.api));
        info.what = r.header.ApiName(c.api);
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

void ReproWriter::Op(const shrink::RankEvents& r, size_t i, std::ostringstream& out, const std::string& in) {
  const Event& e = r.events[i];
  const std::string me = Num(rank_);
  if (e.kind == EventKind::kGroup) {
    const std::string api = r.header.ApiName(e.group.api);
    if (!e.group.is_end) {
      out << in << "nccl_check(ncclGroupStart(), \"ncclGroupStart\");\n";
      ++group_depth_;
    } else {
      out << in << "nccl_check(ncclGroupEnd(), \"ncclGroupEnd\");\n";
      if (group_depth_ > 0) --group_depth_;
      if (group_depth_ == 0) out << in << "synchronize();\n";
    }
    return;
  }
  if (e.kind != EventKind::kOp) return;
  const OpEvent& op = e.op;
  const std::string api = r.header.ApiName(op.api);
  const bool nccl = IsNcclApi(api);
  const CommInfo* comm = comms_.count(op.comm) ? &comms_.at(op.comm) : nullptr;
  const int n = comm != nullptr ? static_cast<int>(comm->members.size()) : 0;
  const Event* created = After(r, i, EventKind::kCommCreate);
  const Event* ret = After(r, i, EventKind::kReturn);

  // Communicators.
  if (op.kind == OpKind::kCommCreate) {
    const std::string parent = CommVar(op.comm);
    if (nccl) {
      if (created == nullptr) {
        if (api == "ncclCommSplit") {
          out << in << "{ ncclComm_t none; nccl_check(ncclCommSplit(" << parent << ", NCCL_SPLIT_NOCOLOR, 0, &none, NULL), \"ncclCommSplit\"); }\n";
        } else {
          out << in << "/* " << api << ": no communicator recorded; not made */\n";
        }
        return;
      }
      const CommInfo& c = comms_.at(created->comm_create.comm);
      if (api == "ncclCommSplit") {
        out << in << "nccl_check(ncclCommSplit(" << parent << ", " << created->comm_create.color << ", "
            << created->comm_create.rank << ", &" << c.var << ", NULL), \"ncclCommSplit\");\n";
        return;
      }
      if (api == "ncclCommShrink" || api == "ncclCommInitAll") {
        out << in << "/* " << api << ": not reproduced */\n";
        return;
      }
      // From a unique id its first member makes and sends to the others.
      const int32_t first = c.members.empty() ? 0 : c.members.front();
      const std::string tag = Num(1000 + std::stoi(c.var.substr(1)));
      out << in << "{\n" << in << "  ncclUniqueId id;\n";
      if (created->comm_create.rank == 0) {
        out << in << "  nccl_check(ncclGetUniqueId(&id), \"ncclGetUniqueId\");\n";
        for (size_t k = 1; k < c.members.size(); ++k) {
          out << in << "  MPI_Send(&id, sizeof id, MPI_BYTE, " << c.members[k] << ", " << tag
              << ", MPI_COMM_WORLD);\n";
        }
      } else {
        out << in << "  MPI_Recv(&id, sizeof id, MPI_BYTE, " << first << ", " << tag
            << ", MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n";
      }
      out << in << "  nccl_check(ncclCommInitRank(&" << c.var << ", " << c.members.size() << ", id, "
          << created->comm_create.rank << "), \"ncclCommInitRank\");\n"
          << in << "}\n";
      return;
    }
    const std::string target = created != nullptr ? "&" + comms_.at(created->comm_create.comm).var : "&none";
    if (api == "MPI_Comm_dup" || api == "MPI_Comm_idup" || api == "MPI_Comm_dup_with_info" ||
        api == "MPI_Comm_idup_with_info") {
      out << in << "mpi_check(MPI_Comm_dup(" << parent << ", " << target << "), \"MPI_Comm_dup\");\n";
    } else if (api == "MPI_Comm_split_type") {
      out << in << "mpi_check(MPI_Comm_split_type(" << parent << ", "
          << (created != nullptr ? Num(created->comm_create.color) : std::string("MPI_UNDEFINED")) << ", "
          << (created != nullptr ? Num(created->comm_create.rank) : std::string("0"))
          << ", MPI_INFO_NULL, " << target << "), \"MPI_Comm_split_type\");\n";
    } else {
      // A split, and any other creation as the split that gives the same members.
      std::string color = "MPI_UNDEFINED";
      if (created != nullptr) {
        color = api == "MPI_Comm_split" && created->comm_create.color >= 0
                    ? Num(created->comm_create.color)
                    : Num(static_cast<int64_t>(created->comm_create.comm & 0x3fffffff));
      }
      if (api != "MPI_Comm_split") out << in << "/* " << api << ", made as the split that gives its members */\n";
      out << in << "mpi_check(MPI_Comm_split(" << parent << ", " << color << ", "
          << (created != nullptr ? Num(created->comm_create.rank) : std::string("0")) << ", " << target
          << "), \"MPI_Comm_split\");\n";
    }
    return;
  }
  if (op.kind == OpKind::kCommFree) {
    if (nccl) {
      out << in << "nccl_check(" << api << "(" << CommVar(op.comm) << "), \"" << api << "\");\n";
    } else {
      out << in << "mpi_check(MPI_Comm_free(&" << CommVar(op.comm) << "), \"MPI_Comm_free\");\n";
    }
    return;
  }
  if (op.kind == OpKind::kInit || op.kind == OpKind::kFinalize) return;  // main() makes them
  if (op.kind == OpKind::kAbort) {
    out << in << "MPI_Abort(MPI_COMM_WORLD, " << op.count << ");\n";
    return;
  }
  if (op.kind == OpKind::kWait) {
    std::vector<std::string> reqs;
    std::string frees;
    for (int64_t id : e.list) {
      auto it = requests_.find(static_cast<uint64_t>(id));
      if (it == requests_.end()) continue;
      reqs.push_back("rq[" + Num(it->second) + "]");
      frees += req_buffers_[static_cast<uint64_t>(id)];
    }
    if (reqs.empty()) return;
    if (api != "MPI_Wait" && api != "MPI_Waitall") out << in << "/* " << api << " */\n";
    if (reqs.size() == 1) {
      out << in << "mpi_check(MPI_Wait(&" << reqs[0] << ", MPI_STATUS_IGNORE), \"MPI_Wait\");\n";
    } else {
      out << in << "{\n" << in << "  MPI_Request all[] = {";
      for (size_t k = 0; k < reqs.size(); ++k) out << (k ? ", " : "") << reqs[k];
      out << "};\n" << in << "  mpi_check(MPI_Waitall(" << reqs.size() << ", all, MPI_STATUSES_IGNORE), \"MPI_Waitall\");\n"
          << in << "}\n";
    }
    if (!frees.empty()) out << in << frees << "\n";
    return;
  }

  if (nccl) {
    const std::string type = NcclType(op.dtype);
    const size_t unit = std::max<uint32_t>(op.dtype_size, 1);
    const int64_t c = std::max<int64_t>(op.count, 0);
    const bool is_root = op.root >= 0 && comm != nullptr && op.root < n && comm->members[static_cast<size_t>(op.root)] == rank_;
    int64_t send = c, recv = c;
    switch (op.kind) {
      case OpKind::kAllgather: recv = c * std::max(n, 1); break;
      case OpKind::kReduceScatterBlock: send = c * std::max(n, 1); break;
      case OpKind::kAlltoall: send = recv = c * std::max(n, 1); break;
      case OpKind::kGather: recv = is_root ? c * std::max(n, 1) : 0; break;
      case OpKind::kScatter: send = is_root ? c * std::max(n, 1) : 0; break;
      default: break;
    }
    const std::string s = "device_buffer(" + Num(send * static_cast<int64_t>(unit)) + ")";
    const std::string rb = "device_buffer(" + Num(recv * static_cast<int64_t>(unit)) + ")";
    const std::string cm = CommVar(op.comm);
    std::string call;
    switch (op.kind) {
      case OpKind::kAllreduce:
        call = "ncclAllReduce((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + NcclOp(op.redop) + ", " + cm + ", stream)";
        break;
      case OpKind::kBcast:
        call = "ncclBroadcast((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + Num(op.root) + ", " + cm + ", stream)";
        break;
      case OpKind::kReduce:
        call = "ncclReduce((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + NcclOp(op.redop) + ", " + Num(op.root) + ", " + cm + ", stream)";
        break;
      case OpKind::kAllgather:
        call = "ncclAllGather((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + cm + ", stream)";
        break;
      case OpKind::kReduceScatterBlock:
        call = "ncclReduceScatter((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + NcclOp(op.redop) + ", " + cm + ", stream)";
        break;
      case OpKind::kAlltoall:
        call = "ncclAlltoAll((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + cm + ", stream)";
        break;
      case OpKind::kGather:
        call = "ncclGather((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + Num(op.root) + ", " + cm + ", stream)";
        break;
      case OpKind::kScatter:
        call = "ncclScatter((void*)" + s + ", (void*)" + rb + ", " + Num(c) + ", " + type + ", " + Num(op.root) + ", " + cm + ", stream)";
        break;
      case OpKind::kSend:
        call = "ncclSend((void*)" + s + ", " + Num(c) + ", " + type + ", " + Num(op.peer) + ", " + cm + ", stream)";
        break;
      case OpKind::kRecv:
        call = "ncclRecv((void*)" + rb + ", " + Num(c) + ", " + type + ", " + Num(op.peer) + ", " + cm + ", stream)";
        break;
      default:
        out << in << "/* " << api << ": not reproduced */\n";
        return;
    }
    out << in << "nccl_check(" << call << ", \"" << api << "\");\n";
    if (group_depth_ == 0) out << in << "synchronize();\n";
    return;
  }

  // MPI collectives and messages.
  int64_t count = std::max<int64_t>(op.count, 0);
  const std::string type = MpiType(op.dtype, op.dtype_size, &count);
  const size_t tsize = MpiTypeSize(op.dtype, op.dtype_size);
  int64_t rcount = op.recv_count > 0 ? op.recv_count : count;
  const std::string cm = CommVar(op.comm);
  const bool nonblocking = (op.flags & op_flags::kNonBlocking) != 0 && op.request != 0;
  std::string req;
  if (nonblocking) {
    const int k = static_cast<int>(requests_.size());
    requests_[op.request] = k;
    req = "&rq[" + Num(k) + "]";
  }
  auto lists = [&](size_t from, int64_t* total) {
    std::string counts = "{", displs = "{";
    int64_t disp = 0;
    for (int k = 0; k < n; ++k) {
      const int64_t v = from + static_cast<size_t>(k) < e.list.size() ? e.list[from + static_cast<size_t>(k)] : 0;
      counts += (k ? ", " : "") + Num(v);
      displs += (k ? ", " : "") + Num(disp);
      disp += v;
    }
    *total = disp;
    return std::make_pair(counts + "}", displs + "}");
  };
  int64_t send_elems = 0, recv_elems = 0;
  std::string call, pre;
  switch (op.kind) {
    case OpKind::kBarrier:
      call = nonblocking ? "MPI_Ibarrier(" + cm + ", " + req + ")" : "MPI_Barrier(" + cm + ")";
      break;
    case OpKind::kBcast:
      send_elems = count;
      call = std::string(nonblocking ? "MPI_Ibcast" : "MPI_Bcast") + "(s, " + Num(count) + ", " + type + ", " +
             Num(op.root) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    case OpKind::kReduce:
    case OpKind::kAllreduce:
    case OpKind::kScan:
    case OpKind::kExscan: {
      send_elems = recv_elems = count;
      const char* name = op.kind == OpKind::kReduce      ? (nonblocking ? "MPI_Ireduce" : "MPI_Reduce")
                         : op.kind == OpKind::kAllreduce ? (nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce")
                         : op.kind == OpKind::kScan      ? (nonblocking ? "MPI_Iscan" : "MPI_Scan")
                                                         : (nonblocking ? "MPI_Iexscan" : "MPI_Exscan");
      call = std::string(name) + "(s, r, " + Num(count) + ", " + type + ", " + MpiOp(op.redop) + ", " +
             (op.kind == OpKind::kReduce ? Num(op.root) + ", " : "") + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kGather:
    case OpKind::kAllgather: {
      send_elems = count;
      recv_elems = rcount * std::max(n, 1);
      const bool gather = op.kind == OpKind::kGather;
      call = std::string(gather ? (nonblocking ? "MPI_Igather" : "MPI_Gather")
                                : (nonblocking ? "MPI_Iallgather" : "MPI_Allgather")) +
             "(s, " + Num(count) + ", " + type + ", r, " + Num(rcount) + ", " + type + ", " +
             (gather ? Num(op.root) + ", " : "") + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kScatter: {
      const int64_t per = op.recv_count > 0 ? op.recv_count : (n > 0 ? count / n : 0);
      send_elems = per * std::max(n, 1);
      recv_elems = per;
      call = std::string(nonblocking ? "MPI_Iscatter" : "MPI_Scatter") + "(s, " + Num(per) + ", " + type + ", r, " +
             Num(per) + ", " + type + ", " + Num(op.root) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kAlltoall: {
      const int64_t per = n > 0 ? count / n : 0;
      send_elems = recv_elems = per * std::max(n, 1);
      call = std::string(nonblocking ? "MPI_Ialltoall" : "MPI_Alltoall") + "(s, " + Num(per) + ", " + type +
             ", r, " + Num(per) + ", " + type + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kReduceScatterBlock: {
      const int64_t per = n > 0 ? count / n : 0;
      send_elems = count;
      recv_elems = per;
      call = std::string(nonblocking ? "MPI_Ireduce_scatter_block" : "MPI_Reduce_scatter_block") + "(s, r, " +
             Num(per) + ", " + type + ", " + MpiOp(op.redop) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kGatherv:
    case OpKind::kAllgatherv:
    case OpKind::kScatterv:
    case OpKind::kReduceScatter:
    case OpKind::kAlltoallv: {
      int64_t total = 0, total_b = 0;
      auto [counts, displs] = lists(0, &total);
      pre = "int counts[] = " + counts + ", displs[] = " + displs + ";";
      if (op.kind == OpKind::kAlltoallv) {
        auto [counts_b, displs_b] = lists(static_cast<size_t>(n), &total_b);
        pre += " int rcounts[] = " + counts_b + ", rdispls[] = " + displs_b + ";";
        send_elems = total;
        recv_elems = total_b;
        call = std::string(nonblocking ? "MPI_Ialltoallv" : "MPI_Alltoallv") + "(s, counts, displs, " + type +
               ", r, rcounts, rdispls, " + type + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      } else if (op.kind == OpKind::kGatherv) {
        send_elems = count;
        recv_elems = total;
        call = std::string(nonblocking ? "MPI_Igatherv" : "MPI_Gatherv") + "(s, " + Num(count) + ", " + type +
               ", r, counts, displs, " + type + ", " + Num(op.root) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      } else if (op.kind == OpKind::kAllgatherv) {
        send_elems = count;
        recv_elems = total;
        call = std::string(nonblocking ? "MPI_Iallgatherv" : "MPI_Allgatherv") + "(s, " + Num(count) + ", " + type +
               ", r, counts, displs, " + type + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      } else if (op.kind == OpKind::kScatterv) {
        send_elems = total;
        recv_elems = rcount;
        call = std::string(nonblocking ? "MPI_Iscatterv" : "MPI_Scatterv") + "(s, counts, displs, " + type + ", r, " +
               Num(rcount) + ", " + type + ", " + Num(op.root) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      } else {
        send_elems = total;
        recv_elems = total;
        call = std::string(nonblocking ? "MPI_Ireduce_scatter" : "MPI_Reduce_scatter") + "(s, r, counts, " + type +
               ", " + MpiOp(op.redop) + ", " + cm + (nonblocking ? ", " + req : "") + ")";
      }
      break;
    }
    case OpKind::kSend: {
      if ((op.flags & op_flags::kPersistent) && op.peer_seq == 0) return;
      send_elems = count;
      const char* name = nonblocking ? ((op.flags & op_flags::kSynchronous) ? "MPI_Issend" : "MPI_Isend")
                                     : ((op.flags & op_flags::kSynchronous) ? "MPI_Ssend" : "MPI_Send");
      call = std::string(name) + "(s, " + Num(count) + ", " + type + ", " + Num(op.peer) + ", " + Num(op.tag) + ", " +
             cm + (nonblocking ? ", " + req : "") + ")";
      break;
    }
    case OpKind::kRecv:
    case OpKind::kMrecv: {
      // The sender and tag it matched, when the recording saw it complete.
      int32_t source = op.peer, tag = op.tag;
      const Event* done = ret != nullptr && ret->ret.source >= 0 ? ret : nullptr;
      if (done != nullptr) {
        source = done->ret.source;
        tag = done->ret.tag;
      } else if (nonblocking) {
        for (const Event& later : r.events) {
          if (later.kind == EventKind::kCompletion && later.completion.request == op.request &&
              later.completion.source >= 0) {
            source = later.completion.source;
            tag = later.completion.tag;
          }
        }
      }
      recv_elems = count;
      call = std::string(nonblocking ? "MPI_Irecv" : "MPI_Recv") + "(r, " + Num(count) + ", " + type + ", " +
             (source == kAnySource ? std::string("MPI_ANY_SOURCE") : Num(source)) + ", " +
             (tag == kAnyTag ? std::string("MPI_ANY_TAG") : Num(tag)) + ", " + cm + ", " +
             (nonblocking ? req : std::string("MPI_STATUS_IGNORE")) + ")";
      break;
    }
    case OpKind::kSendrecv: {
      int32_t source = op.recv_peer, tag = op.recv_tag;
      if (ret != nullptr && ret->ret.source >= 0) {
        source = ret->ret.source;
        tag = ret->ret.tag;
      }
      int64_t rc = op.recv_count > 0 ? op.recv_count : count;
      const std::string rtype = MpiType(op.recv_dtype == DataType::kUnknown ? op.dtype : op.recv_dtype,
                                        op.recv_dtype_size, &rc);
      send_elems = count;
      recv_elems = rc;
      call = "MPI_Sendrecv(s, " + Num(count) + ", " + type + ", " + Num(op.peer) + ", " + Num(op.tag) + ", r, " +
             Num(rc) + ", " + rtype + ", " + (source == kAnySource ? std::string("MPI_ANY_SOURCE") : Num(source)) +
             ", " + (tag == kAnyTag ? std::string("MPI_ANY_TAG") : Num(tag)) + ", " + cm + ", MPI_STATUS_IGNORE)";
      break;
    }
    case OpKind::kProbe:
      out << in << "mpi_check(MPI_Probe(" << (op.peer == kAnySource ? std::string("MPI_ANY_SOURCE") : Num(op.peer))
          << ", " << (op.tag == kAnyTag ? std::string("MPI_ANY_TAG") : Num(op.tag)) << ", " << cm
          << ", MPI_STATUS_IGNORE), \"MPI_Probe\");\n";
      return;
    default:
      out << in << "/* " << api << ": not reproduced */\n";
      return;
  }
  const int64_t sbytes = send_elems * static_cast<int64_t>(tsize);
  const int64_t rbytes = recv_elems * static_cast<int64_t>(tsize);
  if (nonblocking) {
    // Its buffers live until the wait that completes it.
    const int k = requests_[op.request];
    const std::string sb = "sb" + Num(k), rb = "rb" + Num(k);
    out << in << "void *" << sb << " = buffer(" << sbytes << "), *" << rb << " = buffer(" << rbytes << ");\n";
    if (!pre.empty()) out << in << pre << "\n";
    out << in << "{\n" << in << "  void *s = " << sb << ", *r = " << rb << ";\n";
    out << in << "  mpi_check(" << call << ", \"" << api << "\");\n" << in << "}\n";
    req_buffers_[op.request] = "free(" + sb + "); free(" + rb + ");";
    return;
  }
  out << in << "{\n" << in << "  void *s = buffer(" << sbytes << "), *r = buffer(" << rbytes << ");\n";
  if (!pre.empty()) out << in << "  " << pre << "\n";
  out << in << "  mpi_check(" << call << ", \"" << api << "\");\n";
  out << in << "  free(s);\n" << in << "  free(r);\n" << in << "}\n";
}

std::string ReproWriter::RankBody(size_t r) {
  const shrink::RankEvents& rank = ranks_[r];
  rank_ = rank.header.rank;
  requests_.clear();
  req_buffers_.clear();
  group_depth_ = 0;
  std::ostringstream body;
  for (size_t i = 0; i < rank.events.size(); ++i) Op(rank, i, body, "  ");
  // The communicators and requests it uses, declared first.
  std::ostringstream decl;
  std::set<std::string> mpi_vars, nccl_vars;
  for (const Event& e : rank.events) {
    if (e.kind != EventKind::kCommCreate) continue;
    const CommInfo& c = comms_.at(e.comm_create.comm);
    if (c.var.rfind("MPI_COMM", 0) == 0) continue;
    (c.nccl ? nccl_vars : mpi_vars).insert(c.var);
  }
  const std::string text = body.str();
  for (const std::string& v : mpi_vars) decl << "  MPI_Comm " << v << " = MPI_COMM_NULL;\n";
  for (const std::string& v : nccl_vars) decl << "  ncclComm_t " << v << " = NULL;\n";
  if (text.find("&none") != std::string::npos) decl << "  MPI_Comm none;\n";
  if (!requests_.empty()) decl << "  MPI_Request rq[" << requests_.size() << "];\n";
  return decl.str() + text;
}

std::string ReproWriter::Program(const std::string& title, const std::string& expect, const std::string& commands) {
  IndexComms();
  for (const shrink::RankEvents& r : ranks_) {
    for (const Event& e : r.events) {
      if ((e.kind == EventKind::kOp && IsNcclApi(r.header.ApiName(e.op.api))) || e.kind == EventKind::kGroup) {
        nccl_ = true;
      }
    }
  }
  // One function per distinct body.
  std::vector<std::string> bodies;
  std::vector<size_t> body_of(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r) {
    std::string b = RankBody(r);
    auto it = std::find(bodies.begin(), bodies.end(), b);
    body_of[r] = static_cast<size_t>(it - bodies.begin());
    if (it == bodies.end()) bodies.push_back(std::move(b));
  }
  std::ostringstream o;
  o << "/* repro.c: " << title << "\n *\n";
  o << " * Written by `replay shrink`: the calls of the smallest job it found that still\n"
    << " * fails the same way, made in order by " << ranks_.size() << (ranks_.size() == 1 ? " rank" : " ranks")
    << " with synthetic data. It needs\n"
    << " * MPI" << (nccl_ ? ", CUDA and NCCL" : "") << ", nothing of replay.\n *\n";
  std::istringstream cmds(commands);
  std::string line;
  o << " * Build and run:\n";
  while (std::getline(cmds, line)) o << " *   " << line << "\n";
  o << " *\n * Expected: ";
  for (char ch : expect) o << (ch == '\n' ? std::string("\n *   ") : std::string(1, ch));
  o << "\n */\n";
  o << "#include <mpi.h>\n";
  if (nccl_) o << "#include <cuda.h>\n#include <nccl.h>\n";
  o << "#include <stdio.h>\n#include <stdlib.h>\n\n";
  o << "static int rank;\n\n";
  bool uses_buffer = false, uses_mpi_check = false, uses_device_buffer = false;
  for (const std::string& b : bodies) {
    uses_buffer = uses_buffer || b.find("= buffer(") != std::string::npos;
    uses_mpi_check = uses_mpi_check || b.find("mpi_check(") != std::string::npos;
    uses_device_buffer = uses_device_buffer || b.find("device_buffer(") != std::string::npos;
  }
  if (uses_buffer) {
    o << "/* A buffer of `bytes` bytes; the values do not matter. */\n"
       "static void *buffer(size_t bytes) {\n"
       "  unsigned char *b = malloc(bytes > 0 ? bytes : 1);\n"
       "  for (size_t i = 0; i < bytes; ++i) b[i] = (unsigned char)((i * 131 + (size_t)rank) & 0x3f);\n"
       "  return b;\n"
       "}\n\n";
  }
  if (uses_mpi_check) {
    o << "/* An error is reported and the rank goes on, as the recorded job did. */\n"
       "static void mpi_check(int rc, const char *call) {\n"
       "  if (rc == MPI_SUCCESS) return;\n"
       "  char msg[MPI_MAX_ERROR_STRING];\n"
       "  int len = 0;\n"
       "  MPI_Error_string(rc, msg, &len);\n"
       "  fprintf(stderr, \"rank %d: %s: %s\\n\", rank, call, msg);\n"
       "}\n\n";
  }
  if (nccl_) {
    o << "static CUstream stream;\n"
         "static CUdeviceptr held[4096];\n"
         "static int nheld;\n\n"
         "static void cuda_check(CUresult rc, const char *call) {\n"
         "  if (rc == CUDA_SUCCESS) return;\n"
         "  const char *msg = NULL;\n"
         "  cuGetErrorString(rc, &msg);\n"
         "  fprintf(stderr, \"rank %d: %s: %s\\n\", rank, call, msg ? msg : \"unknown error\");\n"
         "  exit(1);\n"
         "}\n\n"
         "static void nccl_check(ncclResult_t rc, const char *call) {\n"
         "  if (rc == ncclSuccess) return;\n"
         "  fprintf(stderr, \"rank %d: %s: %s\\n\", rank, call, ncclGetErrorString(rc));\n"
         "  exit(1);\n"
         "}\n\n";
    if (uses_device_buffer) {
      o << "/* Device memory of `bytes` bytes, freed at the next synchronize(). */\n"
         "static CUdeviceptr device_buffer(size_t bytes) {\n"
         "  CUdeviceptr p;\n"
         "  cuda_check(cuMemAlloc(&p, bytes > 0 ? bytes : 1), \"cuMemAlloc\");\n"
         "  cuda_check(cuMemsetD8Async(p, 0x3c, bytes > 0 ? bytes : 1, stream), \"cuMemsetD8Async\");\n"
         "  if (nheld < (int)(sizeof held / sizeof held[0])) held[nheld++] = p;\n"
         "  return p;\n"
         "}\n\n";
    }
    o << "/* Waits for what was enqueued, as the recorded operations were waited for. */\n"
         "static void synchronize(void) {\n"
         "  cuda_check(cuStreamSynchronize(stream), \"cuStreamSynchronize\");\n"
         "  while (nheld > 0) cuMemFree(held[--nheld]);\n"
         "}\n\n";
  }
  for (size_t b = 0; b < bodies.size(); ++b) {
    o << "/* rank";
    std::string who;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (body_of[r] == b) who += (who.empty() ? " " : ", ") + std::to_string(r);
    }
    o << (who.find(',') != std::string::npos ? "s" : "") << who << " */\n";
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
