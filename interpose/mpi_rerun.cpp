// Re-running a rank of an MPI job: every MPI call answered from the recording
// (one rank alone), or made for real and held to the recorded choices (every
// rank). The session, and how a re-run stops, are in replay/session.h.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "mpi_buffers.h"
#include "mpi_record.h"
#include "replay/event_format.h"
#include "replay/session.h"
#include "replay/topology.h"

namespace replay::interpose {
namespace mpi {
namespace {

using rerun::Site;
using rerun::Stop;
using rerun::Verdict;

// Field-by-field comparison of what this run would record with what the
// recording has; empty when they agree. Addresses, times and call sites differ
// between runs by nature and are not compared.
// From a checkpoint mark the program starts its counters (sequence numbers,
// request ids) afresh while the recording's go on, so they are not compared.
std::string CompareOps(const rerun::Session& session, const OpEvent& now, const OpEvent& then,
                       const std::vector<int64_t>& now_list, const std::vector<int64_t>& then_list) {
  const bool counters = !session.from_mark();
  std::ostringstream d;
  auto field = [&](const char* name, auto a, auto b) {
    if (a != b) d << "; " << name << " " << a << " (recorded " << b << ")";
  };
  field("operation", OpKindName(now.kind), OpKindName(then.kind));
  if (now.comm != then.comm) d << "; communicator " << Hex(now.comm) << " (recorded " << Hex(then.comm) << ")";
  if (counters) {
    field("sequence number", now.seq, then.seq);
    field("peer sequence number", now.peer_seq, then.peer_seq);
    field("request", now.request, then.request);
  }
  field("count", now.count, then.count);
  field("datatype", DataTypeName(now.dtype), DataTypeName(then.dtype));
  field("datatype size", now.dtype_size, then.dtype_size);
  if (now.dtype_sig != then.dtype_sig) d << "; derived datatype differs";
  field("reduction", RedOpName(now.redop), RedOpName(then.redop));
  field("root", now.root, then.root);
  field("peer", now.peer, then.peer);
  field("tag", now.tag, then.tag);
  if (now_list != then_list) d << "; per-rank counts differ";
  bool hashed = (now.flags & op_flags::kHasSendHash) && (then.flags & op_flags::kHasSendHash);
  if (hashed && (now.send_hash != then.send_hash || now.send_nan != then.send_nan || now.send_inf != then.send_inf)) {
    d << "; the data sent differs: fingerprint " << Hex(now.send_hash) << " (recorded " << Hex(then.send_hash)
      << ")";
    if (now.send_nan != then.send_nan) d << ", " << now.send_nan << " NaN (recorded " << then.send_nan << ")";
    if (now.send_inf != then.send_inf) d << ", " << now.send_inf << " Inf (recorded " << then.send_inf << ")";
  }
  std::string s = d.str();
  return s.empty() ? s : s.substr(2);
}

[[noreturn]] void Diverged(const Oracle& o, const Event& recorded, uint64_t call_site, const std::string& api,
                           const std::string& what) {
  Stop(Verdict::kDiverged, "the program diverges from the recording at event #" + std::to_string(recorded.index) +
                               ": " + api + " (" + Site(call_site) + "): " + what + ". Recorded: " +
                               o.Describe(recorded));
}

void SetStatus(MPI_Status* st, int source, int tag, int64_t count, MPI_Datatype type, bool cancelled) {
  if (st == nullptr || st == MPI_STATUS_IGNORE) return;
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  st->MPI_ERROR = MPI_SUCCESS;
  const MpiAbi& abi = Abi();
  if (type != nullptr && count >= 0 && count <= INT32_MAX) {
    abi.Status_set_elements(st, type, static_cast<int>(count));
  }
  abi.Status_set_cancelled(st, cancelled ? 1 : 0);
}

// Writes a recorded payload into a region; a missing payload stops the run.
void Fill(const Oracle& o, const Region& r, uint64_t hash, uint64_t size, MPI_Comm comm, const Event& at) {
  if (r.empty() || size == 0) return;
  auto bytes = o.Payload(hash);
  if (!bytes.ok()) {
    Stop(Verdict::kFailed, "the bytes received at event #" + std::to_string(at.index) + " are not in the trace: " +
                               bytes.status().message());
  }
  Scatter(r, *bytes, comm);
}

template <typename Fn>
Fn Real(ApiId api) {
  return reinterpret_cast<Fn>(RealMpi(api));
}

int QueryDone(void*, MPI_Status* status) {
  Abi().Status_set_elements(status, Abi().datatype_byte, 0);
  Abi().Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}
int FreeDone(void*) { return MPI_SUCCESS; }
int CancelDone(void*, int) { return MPI_SUCCESS; }

// A real request of its own that is already complete: what the program holds
// in place of a request to a peer that is not there (a generalized request, so
// that every one is distinct). Waiting on it frees it.
void NullRequest(MPI_Request* req, bool /*recv*/) {
  const MpiAbi& abi = Abi();
  abi.Grequest_start(QueryDone, FreeDone, CancelDone, nullptr, req);
  abi.Grequest_complete(*req);
}

}  // namespace

bool Scatter(const Region& r, std::string_view bytes, MPI_Comm comm) {
  const MpiAbi& abi = Abi();
  size_t pos = 0;
  bool complete = true;
  r.ForEach([&](const Piece& p) {
    const TypeInfo& t = TypeOf(p.type);
    size_t n = static_cast<size_t>(p.count) * t.size;
    size_t left = bytes.size() - std::min(pos, bytes.size());
    if (left < n) complete = false;
    if (left == 0) return;
    if (t.contiguous) {
      std::memcpy(const_cast<void*>(p.buf), bytes.data() + pos, std::min(n, left));
      pos += std::min(n, left);
    } else {
      int position = 0;
      if (left < n || p.count > INT32_MAX) return;
      abi.Unpack(bytes.data() + pos, static_cast<int>(n), &position, const_cast<void*>(p.buf),
                 static_cast<int>(p.count), p.type, comm);
      pos += static_cast<size_t>(position);
    }
  });
  return complete;
}

int Call::Serve() noexcept {
  try {
    switch (shape_) {
      case Shape::kQuery:
        return ServeQuery();
      case Shape::kTopo:
        return ServeTopology();
      case Shape::kGroup:
        return ServeGroup();
      case Shape::kComplete:
        return ServeComplete();
      case Shape::kProbe:
        if (flag != nullptr) return ServeProbe();
        return ServeOp();
      case Shape::kTypeFree: {
        if (type_ptr != nullptr) DoEnter();
        return Real<int (*)(MPI_Datatype*)>(api_)(type_ptr);
      }
      case Shape::kRequestFree: {
        MPI_Request h = reqs != nullptr ? *reqs : nullptr;
        if (h != nullptr) ctx_.requests->Complete(reinterpret_cast<uint64_t>(h), /*free_persistent=*/true);
        return Real<int (*)(MPI_Request*)>(api_)(reqs);
      }
      default:
        return ServeOp();
    }
  } catch (const std::exception& e) {
    Stop(Verdict::kFailed, std::string("internal error while serving ") + ApiName(api_) + ": " + e.what());
  }
}

int Call::ServeQuery() {
  CommState* cs = ctx_.comms->Find(Handle(comm));
  if (cs == nullptr || int_out == nullptr) {
    return Real<int (*)(MPI_Comm, int*)>(api_)(comm, int_out);
  }
  switch (api_) {
    case kApi_MPI_Comm_rank: *int_out = cs->rank; break;
    case kApi_MPI_Comm_size: *int_out = cs->size; break;
    default: *int_out = cs->remote_size; break;
  }
  return MPI_SUCCESS;
}

namespace {

// The virtual topologies of the stand-in communicators, by handle.
std::mutex g_topologies_mu;
std::unordered_map<uint64_t, Topology>& Topologies() {
  static auto* t = new std::unordered_map<uint64_t, Topology>();
  return *t;
}

std::optional<Topology> TopologyOf(MPI_Comm comm) {
  std::lock_guard<std::mutex> lock(g_topologies_mu);
  auto it = Topologies().find(Handle(comm));
  if (it == Topologies().end()) return std::nullopt;
  return it->second;
}

void CopyOut(const std::vector<int>& from, int max, int* to) {
  for (size_t i = 0; to != nullptr && i < from.size() && static_cast<int>(i) < max; ++i) to[i] = from[i];
}

}  // namespace

bool VirtualNeighborCounts(MPI_Comm comm, int rank, int* in, int* out) {
  std::optional<Topology> t = TopologyOf(comm);
  if (!t) return false;
  switch (t->kind) {
    case Topology::Kind::kCart: *in = *out = 2 * static_cast<int>(t->dims.size()); break;
    case Topology::Kind::kGraph: *in = *out = static_cast<int>(t->Neighbors(rank).size()); break;
    case Topology::Kind::kDistGraph:
      *in = static_cast<int>(t->sources.size());
      *out = static_cast<int>(t->destinations.size());
      break;
    case Topology::Kind::kNone: return false;
  }
  return true;
}

// The topology a creating call gives its new communicator, from the call's
// own arguments (the same in the re-run as in the recording, or the call
// diverged); a distributed graph's neighbours from the recording, where MPI
// worked them out from every rank's edges.
void Call::NoteTopology(MPI_Comm created, const ServedCall& served) {
  std::optional<Topology> t;
  for (const Event* e : served.infos) {
    if (e->info_key() == kDistGraphInfoKey) t = Topology::ParseDistGraph(e->info_value());
  }
  if (!t) {
    switch (api_) {
      case kApi_MPI_Cart_create: t = Topology::Cart(topo_n, topo_a, topo_b); break;
      case kApi_MPI_Cart_sub:
        if (auto parent = TopologyOf(comm)) t = Topology::CartSub(*parent, topo_a);
        break;
      case kApi_MPI_Graph_create: t = Topology::Graph(topo_n, topo_a, topo_b); break;
      case kApi_MPI_Dist_graph_create_adjacent: t = Topology::DistGraph(topo_n, topo_a, topo_m, topo_b); break;
      default: break;
    }
  }
  if (!t) return;
  std::lock_guard<std::mutex> lock(g_topologies_mu);
  Topologies()[Handle(created)] = std::move(*t);
}

int Call::ServeTopology() {
  CommState* cs = ctx_.comms->Find(Handle(comm));
  if (cs == nullptr) return ForwardTopology();
  std::optional<Topology> t = TopologyOf(comm);
  if (api_ == kApi_MPI_Topo_test) {
    if (topo_out[0] != nullptr) {
      *topo_out[0] = !t ? MPI_UNDEFINED
                        : t->kind == Topology::Kind::kCart    ? MPI_CART
                        : t->kind == Topology::Kind::kGraph   ? MPI_GRAPH
                                                              : MPI_DIST_GRAPH;
    }
    return MPI_SUCCESS;
  }
  if (!t) return MPI_ERR_TOPOLOGY;
  const int me = cs->rank;
  switch (api_) {
    case kApi_MPI_Cartdim_get: *topo_out[0] = static_cast<int>(t->dims.size()); break;
    case kApi_MPI_Cart_get:
      CopyOut(t->dims, topo_n, topo_out[0]);
      CopyOut(t->periods, topo_n, topo_out[1]);
      CopyOut(t->Coords(me), topo_n, topo_out[2]);
      break;
    case kApi_MPI_Cart_rank: {
      int r = t->RankAt(topo_a);
      if (r < 0) return MPI_ERR_ARG;
      *topo_out[0] = r;
      break;
    }
    case kApi_MPI_Cart_coords: CopyOut(t->Coords(topo_n), topo_m, topo_out[0]); break;
    case kApi_MPI_Cart_shift: t->Shift(me, topo_n, topo_m, MPI_PROC_NULL, topo_out[0], topo_out[1]); break;
    case kApi_MPI_Graphdims_get:
      *topo_out[0] = static_cast<int>(t->index.size());
      *topo_out[1] = static_cast<int>(t->edges.size());
      break;
    case kApi_MPI_Graph_get:
      CopyOut(t->index, topo_n, topo_out[0]);
      CopyOut(t->edges, topo_m, topo_out[1]);
      break;
    case kApi_MPI_Graph_neighbors_count: *topo_out[0] = static_cast<int>(t->Neighbors(topo_n).size()); break;
    case kApi_MPI_Graph_neighbors: CopyOut(t->Neighbors(topo_n), topo_m, topo_out[0]); break;
    case kApi_MPI_Dist_graph_neighbors_count:
      *topo_out[0] = static_cast<int>(t->sources.size());
      *topo_out[1] = static_cast<int>(t->destinations.size());
      *topo_out[2] = t->weighted ? 1 : 0;
      break;
    case kApi_MPI_Dist_graph_neighbors:
      CopyOut(t->sources, topo_n, topo_out[0]);
      CopyOut(t->destinations, topo_m, topo_out[2]);
      if (t->weighted) {
        CopyOut(t->source_weights, topo_n, topo_out[1]);
        CopyOut(t->destination_weights, topo_m, topo_out[3]);
      }
      break;
    default: return ForwardTopology();
  }
  return MPI_SUCCESS;
}

// A communicator the session does not know: MPI answers.
int Call::ForwardTopology() {
  using I = int*;
  switch (api_) {
    case kApi_MPI_Topo_test:
    case kApi_MPI_Cartdim_get: return Real<int (*)(MPI_Comm, I)>(api_)(comm, topo_out[0]);
    case kApi_MPI_Cart_get: return Real<int (*)(MPI_Comm, int, I, I, I)>(api_)(comm, topo_n, topo_out[0], topo_out[1], topo_out[2]);
    case kApi_MPI_Cart_rank: return Real<int (*)(MPI_Comm, const int*, I)>(api_)(comm, topo_a, topo_out[0]);
    case kApi_MPI_Cart_coords: return Real<int (*)(MPI_Comm, int, int, I)>(api_)(comm, topo_n, topo_m, topo_out[0]);
    case kApi_MPI_Cart_shift: return Real<int (*)(MPI_Comm, int, int, I, I)>(api_)(comm, topo_n, topo_m, topo_out[0], topo_out[1]);
    case kApi_MPI_Graphdims_get: return Real<int (*)(MPI_Comm, I, I)>(api_)(comm, topo_out[0], topo_out[1]);
    case kApi_MPI_Graph_get: return Real<int (*)(MPI_Comm, int, int, I, I)>(api_)(comm, topo_n, topo_m, topo_out[0], topo_out[1]);
    case kApi_MPI_Graph_neighbors_count: return Real<int (*)(MPI_Comm, int, I)>(api_)(comm, topo_n, topo_out[0]);
    case kApi_MPI_Graph_neighbors: return Real<int (*)(MPI_Comm, int, int, I)>(api_)(comm, topo_n, topo_m, topo_out[0]);
    case kApi_MPI_Dist_graph_neighbors_count:
      return Real<int (*)(MPI_Comm, I, I, I)>(api_)(comm, topo_out[0], topo_out[1], topo_out[2]);
    case kApi_MPI_Dist_graph_neighbors:
      return Real<int (*)(MPI_Comm, int, I, I, int, I, I)>(api_)(comm, topo_n, topo_out[0], topo_out[1], topo_m,
                                                                  topo_out[2], topo_out[3]);
    default: return MPI_ERR_INTERN;
  }
}

namespace {

// The groups of a rank re-run alone: each a real group of this singleton
// process (so that every handle is distinct and valid), standing for the
// recorded members it holds, in world ranks and group order. The empty group
// is MPI_GROUP_EMPTY, as MPI makes it.
std::mutex g_groups_mu;
std::unordered_map<uint64_t, std::vector<int32_t>>& Groups() {
  static auto* g = new std::unordered_map<uint64_t, std::vector<int32_t>>();
  return *g;
}

uint64_t Handle(MPI_Group g) { return reinterpret_cast<uint64_t>(g); }

// The members a group stands for; null when the group is none the re-run made.
std::optional<std::vector<int32_t>> GroupMembers(MPI_Group g) {
  if (g == Abi().group_empty) return std::vector<int32_t>{};
  std::lock_guard<std::mutex> lock(g_groups_mu);
  auto it = Groups().find(Handle(g));
  if (it == Groups().end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> Needed(MPI_Group g, const char* api) {
  std::optional<std::vector<int32_t>> m = GroupMembers(g);
  if (!m) {
    Stop(Verdict::kFailed, std::string(api) +
                               " was given a group that no communicator of the re-run made; a rank re-run alone "
                               "answers group operations on the groups of recorded communicators only");
  }
  return *m;
}

MPI_Group NewGroup(std::vector<int32_t> members) {
  const MpiAbi& abi = Abi();
  if (members.empty()) return abi.group_empty;
  MPI_Group self = abi.group_null, made = abi.group_null;
  abi.Comm_group(abi.comm_self, &self);
  const int zero = 0;
  Real<int (*)(MPI_Group, int, const int*, MPI_Group*)>(kApi_MPI_Group_incl)(self, 1, &zero, &made);
  abi.Group_free(&self);
  std::lock_guard<std::mutex> lock(g_groups_mu);
  Groups()[Handle(made)] = std::move(members);
  return made;
}

int IndexIn(const std::vector<int32_t>& members, int32_t world_rank) {
  auto it = std::find(members.begin(), members.end(), world_rank);
  return it == members.end() ? MPI_UNDEFINED : static_cast<int>(it - members.begin());
}

bool Contains(const std::vector<int32_t>& members, int32_t world_rank) {
  return IndexIn(members, world_rank) != MPI_UNDEFINED;
}

// The group ranks MPI_Group_range_incl and _excl name: each triplet (first,
// last, stride) from first to last inclusive; empty when one leaves the group.
std::optional<std::vector<int>> RangeRanks(int n, const int* triplets, int size) {
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    const int first = triplets[3 * i], last = triplets[3 * i + 1], stride = triplets[3 * i + 2];
    if (stride == 0 || first < 0 || first >= size || last < 0 || last >= size) return std::nullopt;
    if ((stride > 0 && first > last) || (stride < 0 && first < last)) return std::nullopt;
    for (int r = first; stride > 0 ? r <= last : r >= last; r += stride) ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

int Call::ServeGroup() {
  const MpiAbi& abi = Abi();
  const char* api = ApiName(api_);
  auto made = [&](std::vector<int32_t> members) {
    *group_out = NewGroup(std::move(members));
    return MPI_SUCCESS;
  };
  switch (api_) {
    case kApi_MPI_Comm_group: {
      CommState* cs = ctx_.comms->Find(Handle(comm));
      if (cs == nullptr) return Real<int (*)(MPI_Comm, MPI_Group*)>(api_)(comm, group_out);
      const size_t n = std::min(cs->members.size(), static_cast<size_t>(std::max(cs->size, 0)));
      return made(std::vector<int32_t>(cs->members.begin(), cs->members.begin() + static_cast<ptrdiff_t>(n)));
    }
    case kApi_MPI_Group_free: {
      if (group_out == nullptr) return MPI_ERR_ARG;
      if (*group_out != abi.group_empty) {
        std::lock_guard<std::mutex> lock(g_groups_mu);
        Groups().erase(Handle(*group_out));
      }
      return Real<int (*)(MPI_Group*)>(api_)(group_out);
    }
    case kApi_MPI_Group_size: *int_out = static_cast<int>(Needed(group, api).size()); return MPI_SUCCESS;
    case kApi_MPI_Group_rank: *int_out = IndexIn(Needed(group, api), session_->oracle().world_rank()); return MPI_SUCCESS;
    case kApi_MPI_Group_translate_ranks: {
      const std::vector<int32_t> from = Needed(group, api), to = Needed(group2, api);
      for (int i = 0; i < topo_n; ++i) {
        const int r = topo_a[i];
        if (r == MPI_PROC_NULL) {
          topo_out[0][i] = MPI_PROC_NULL;
          continue;
        }
        if (r < 0 || r >= static_cast<int>(from.size())) return MPI_ERR_RANK;
        topo_out[0][i] = IndexIn(to, from[static_cast<size_t>(r)]);
      }
      return MPI_SUCCESS;
    }
    case kApi_MPI_Group_compare: {
      std::vector<int32_t> a = Needed(group, api), b = Needed(group2, api);
      if (a == b) {
        *int_out = MPI_IDENT;
      } else {
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        *int_out = a == b ? MPI_SIMILAR : MPI_UNEQUAL;
      }
      return MPI_SUCCESS;
    }
    case kApi_MPI_Group_incl:
    case kApi_MPI_Group_excl: {
      const std::vector<int32_t> from = Needed(group, api);
      std::vector<bool> named(from.size(), false);
      std::vector<int32_t> members;
      for (int i = 0; i < topo_n; ++i) {
        const int r = topo_a[i];
        if (r < 0 || r >= static_cast<int>(from.size()) || named[static_cast<size_t>(r)]) return MPI_ERR_RANK;
        named[static_cast<size_t>(r)] = true;
        members.push_back(from[static_cast<size_t>(r)]);
      }
      if (api_ == kApi_MPI_Group_excl) {
        members.clear();
        for (size_t r = 0; r < from.size(); ++r) {
          if (!named[r]) members.push_back(from[r]);
        }
      }
      return made(std::move(members));
    }
    case kApi_MPI_Group_range_incl:
    case kApi_MPI_Group_range_excl: {
      const std::vector<int32_t> from = Needed(group, api);
      std::optional<std::vector<int>> ranks = RangeRanks(topo_n, topo_a, static_cast<int>(from.size()));
      if (!ranks) return MPI_ERR_RANK;
      std::vector<bool> named(from.size(), false);
      std::vector<int32_t> members;
      for (int r : *ranks) {
        if (named[static_cast<size_t>(r)]) return MPI_ERR_RANK;
        named[static_cast<size_t>(r)] = true;
        members.push_back(from[static_cast<size_t>(r)]);
      }
      if (api_ == kApi_MPI_Group_range_excl) {
        members.clear();
        for (size_t r = 0; r < from.size(); ++r) {
          if (!named[r]) members.push_back(from[r]);
        }
      }
      return made(std::move(members));
    }
    case kApi_MPI_Group_union:
    case kApi_MPI_Group_intersection:
    case kApi_MPI_Group_difference: {
      const std::vector<int32_t> a = Needed(group, api), b = Needed(group2, api);
      std::vector<int32_t> members;
      if (api_ == kApi_MPI_Group_union) {
        members = a;
        for (int32_t m : b) {
          if (!Contains(a, m)) members.push_back(m);
        }
      } else {
        const bool keep = api_ == kApi_MPI_Group_intersection;
        for (int32_t m : a) {
          if (Contains(b, m) == keep) members.push_back(m);
        }
      }
      return made(std::move(members));
    }
    default:
      return MPI_ERR_INTERN;
  }
}

int Call::ServeOp() {
  Oracle& o = session_->oracle();
  const MpiAbi& abi = Abi();
  const std::string api = ApiName(api_);
  // What the recorder would record on entry (captured, not written).
  if (shape_ != Shape::kInit) DoEnter();
  const ServedCall served = session_->Serve(api, CallForm::kOp, kind_, call_site_);
  const Event& rec_op = *served.first;
  if (shape_ != Shape::kInit && !emitted_.empty() && emitted_[0].kind == EventKind::kOp) {
    std::string diff = CompareOps(*session_, emitted_[0].op, rec_op.op, emitted_[0].list, rec_op.list);
    if (!diff.empty()) Diverged(o, rec_op, call_site_, api, diff);
  }
  if (served.ret == nullptr) {
    Stop(Verdict::kRecordingEnded, "the program reached " + o.Describe(rec_op) + " (" + Site(call_site_) +
                                       "), which rank " + std::to_string(o.world_rank()) +
                                       " entered in the recording and never returned from");
  }
  const ReturnEvent& ret = served.ret->ret;
  const int rc = ret.rc;

  switch (shape_) {
    case Shape::kInit: {
      int real_rc = api_ == kApi_MPI_Init
                        ? Real<int (*)(int*, char***)>(api_)(argc, argv)
                        : Real<int (*)(int*, char***, int, int*)>(api_)(argc, argv, required, provided);
      if (real_rc != MPI_SUCCESS) return real_rc;
      for (const Event* e : served.created) {
        const CommCreateEvent& cc = e->comm_create;
        MPI_Comm h = (cc.flags & comm_flags::kWorld) ? abi.comm_world : abi.comm_self;
        ctx_.comms->Insert(Handle(h), cc.comm, cc.size, cc.rank,
                           std::vector<int32_t>(e->list.begin(), e->list.end()));
      }
      return rc;
    }
    case Shape::kFinalize:
      Real<int (*)()>(api_)();
      return rc;
    case Shape::kAbort:
      Stop(Verdict::kRecordingEnded, "the program called MPI_Abort(" + std::to_string(errorcode) +
                                         ") where the recording did (event #" + std::to_string(rec_op.index) + ")");
    case Shape::kCommNew:
    case Shape::kCommGroup:
    case Shape::kCommInter: {
      if (newcomm == nullptr) return rc;
      if (served.created.empty()) {
        *newcomm = abi.comm_null;
      } else {
        const Event& e = *served.created.front();
        const CommCreateEvent& cc = e.comm_create;
        Real<int (*)(MPI_Comm, MPI_Comm*)>(kApi_MPI_Comm_dup)(abi.comm_self, newcomm);
        int remote = 0;
        if (cc.flags & comm_flags::kInter) remote = cc.size;  // the remote size is not recorded; the local one stands in
        ctx_.comms->Insert(Handle(*newcomm), cc.comm, cc.size, cc.rank,
                           std::vector<int32_t>(e.list.begin(), e.list.end()), remote);
        if (topology) NoteTopology(*newcomm, served);
      }
      if (req != nullptr) {
        NullRequest(req, false);
        PendingOp p;
        p.request_id = rec_op.op.request;
        p.kind = OpKind::kCommCreate;
        ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), p);
      }
      return rc;
    }
    case Shape::kCommFree: {
      if (freecomm != nullptr && *freecomm != abi.comm_null) {
        MPI_Comm h = *freecomm;
        Real<int (*)(MPI_Comm*)>(kApi_MPI_Comm_free)(freecomm);
        ctx_.comms->Remove(Handle(h));
        std::lock_guard<std::mutex> lock(g_topologies_mu);
        Topologies().erase(Handle(h));
      }
      return rc;
    }
    case Shape::kSend:
    case Shape::kCancel:
      return rc;
    case Shape::kIsend:
    case Shape::kIrecv:
    case Shape::kPersistentInit:
    case Shape::kMrecv: {
      bool is_recv = kind_ == OpKind::kRecv || kind_ == OpKind::kMrecv;
      if (shape_ == Shape::kMrecv && message != nullptr) *message = abi.message_null;
      if (req == nullptr) {  // blocking MPI_Mrecv
        Region r;
        r.Add(rbuf, ret.recv_count, rtype);
        Fill(o, r, ret.payload_hash, ret.payload_size, comm, *served.ret);
        SetStatus(status_, ret.source, ret.tag, ret.recv_count, rtype, false);
        return rc;
      }
      if (shape_ == Shape::kPersistentInit) {
        // A persistent request to nobody: starting it completes at once.
        using InitFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
        Real<InitFn>(is_recv ? kApi_MPI_Recv_init : kApi_MPI_Send_init)(
            nullptr, 0, abi.datatype_byte, MPI_PROC_NULL, 0, abi.comm_self, req);
      } else {
        NullRequest(req, is_recv);
      }
      PendingOp p;
      p.request_id = rec_op.op.request;
      p.api = api_;
      p.kind = is_recv ? OpKind::kRecv : OpKind::kSend;
      p.comm = rec_op.op.comm;
      p.comm_handle = Handle(comm);
      p.peer = peer;
      p.tag = tag;
      p.persistent = shape_ == Shape::kPersistentInit;
      p.active = !p.persistent;
      p.is_recv = is_recv;
      p.recv_buf = reinterpret_cast<uint64_t>(rbuf);
      p.recv_count = rcount;
      p.recv_type = reinterpret_cast<uint64_t>(rtype);
      p.send_buf = reinterpret_cast<uint64_t>(sbuf);
      p.send_count = scount;
      p.send_type = reinterpret_cast<uint64_t>(stype);
      ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), p);
      return rc;
    }
    case Shape::kStart: {
      // DoEnter numbered each start and captured one op per request.
      std::vector<const Event*> recorded = {&rec_op};
      recorded.insert(recorded.end(), served.more_ops.begin(), served.more_ops.end());
      size_t n = 0;
      for (const Event& e : emitted_) {
        if (e.kind != EventKind::kOp) continue;
        if (n >= recorded.size()) Diverged(o, rec_op, call_site_, api, "more requests started than recorded");
        std::string diff = CompareOps(*session_, e.op, recorded[n]->op, e.list, recorded[n]->list);
        if (!diff.empty()) Diverged(o, *recorded[n], call_site_, api, diff);
        ++n;
      }
      Real<int (*)(int, MPI_Request*)>(kApi_MPI_Startall)(nreq, reqs);
      return rc;
    }
    case Shape::kRecv:
    case Shape::kSendrecv: {
      Region r;
      r.Add(rbuf, ret.recv_count, rtype);
      Fill(o, r, ret.payload_hash, ret.payload_size, comm, *served.ret);
      SetStatus(status_, ret.source, ret.tag, ret.recv_count, rtype, false);
      if ((shape_ == Shape::kSendrecv ? source : peer) == kAnySource && ret.source >= 0) {
        if (CommState* cs = ctx_.comms->Find(Handle(comm))) cs->NextRecv(ret.source);
      }
      return rc;
    }
    case Shape::kProbe: {
      if (!served.tests.empty()) {
        const TestEvent& t = served.tests.front()->test;
        SetStatus(status_, t.source, t.tag, t.count, abi.datatype_byte, false);
        if (message != nullptr) {  // MPI_Mprobe: the message the MPI_Mrecv after it takes
          *message = abi.message_no_proc;
          NoteMatchedMessage(*message, t.source, t.tag);
        }
      }
      return rc;
    }
    case Shape::kRma:
      return ServeRma(rc, rec_op, *served.ret);
    case Shape::kColl: {
      if (req != nullptr) {
        NullRequest(req, true);
        if (!pending_) pending_ = std::make_unique<PendingOp>();
        pending_->request_id = rec_op.op.request;
        ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), *pending_);
        return rc;
      }
      Fill(o, recv_region_, ret.payload_hash, ret.payload_size, comm, *served.ret);
      return rc;
    }
    default:
      return rc;
  }
}

// One-sided calls of a rank alone: its windows are windows of this singleton
// process over the same memory (real handles), the data calls do nothing, and
// each synchronisation writes back what the rank saw there in the recording.
int Call::ServeRma(int rc, const Event& recorded_op, const Event& recorded_return) {
  const MpiAbi& abi = Abi();
  switch (api_) {
    case kApi_MPI_Win_create: {
      using Fn = int (*)(void*, MPI_Aint, int, MPI_Info, MPI_Comm, MPI_Win*);
      if (int real_rc = Real<Fn>(api_)(win_base, win_size, disp_unit, info, abi.comm_self, win_out); real_rc != 0) {
        return real_rc;
      }
      break;
    }
    case kApi_MPI_Win_allocate: {
      using Fn = int (*)(MPI_Aint, int, MPI_Info, MPI_Comm, void*, MPI_Win*);
      if (int real_rc = Real<Fn>(api_)(win_size, disp_unit, info, abi.comm_self, win_baseptr, win_out); real_rc != 0) {
        return real_rc;
      }
      break;
    }
    case kApi_MPI_Win_free:
      Real<int (*)(MPI_Win*)>(api_)(win_out);
      break;
    case kApi_MPI_Rput:
    case kApi_MPI_Rget:
      // A request that completes at once; its wait fills what the read got.
      if (req != nullptr && rc == MPI_SUCCESS) {
        NullRequest(req, api_ == kApi_MPI_Rget);
        ctx_.requests->Put(reinterpret_cast<uint64_t>(*req), RmaRequest(recorded_op.op.request));
      }
      return rc;
    default:
      break;
  }
  NoteRma(rc);
  Region r;
  if (rc == MPI_SUCCESS && WindowSync(api_, win, &r)) {
    const ReturnEvent& ret = recorded_return.ret;
    Fill(session_->oracle(), r, ret.payload_hash, ret.payload_size, abi.comm_self, recorded_return);
  }
  return rc;
}

int Call::ServeProbe() {
  const ServedCall served = session_->Serve(ApiName(api_), CallForm::kTest, OpKind::kOther, call_site_);
  const TestEvent& t = served.first->test;
  *flag = t.flag ? 1 : 0;
  if (t.flag) {
    SetStatus(status_, t.source, t.tag, t.count, Abi().datatype_byte, false);
    if (message != nullptr) {
      *message = Abi().message_no_proc;
      NoteMatchedMessage(*message, t.source, t.tag);
    }
  }
  return t.rc;
}

int Call::ServeComplete() {
  Oracle& o = session_->oracle();
  const MpiAbi& abi = Abi();
  const std::string api = ApiName(api_);
  DoEnter();  // remembers the handles; for blocking waits captures the op
  const bool blocking = BlockingWait();
  const ServedCall served =
      session_->Serve(api, blocking ? CallForm::kOp : CallForm::kTest, OpKind::kOther, call_site_);
  if (blocking && !session_->from_mark() && !emitted_.empty() && emitted_[0].list != served.first->list) {
    Diverged(o, *served.first, call_site_, api, "it waits for other requests than recorded");
  }
  if (blocking && served.ret == nullptr) {
    Stop(Verdict::kRecordingEnded, "the program reached " + o.Describe(*served.first) + " (" +
                                       Site(call_site_) + "), where rank " + std::to_string(o.world_rank()) +
                                       " waited in the recording and never returned");
  }
  const TestEvent* outcome = nullptr;
  if (!served.tests.empty()) outcome = &served.tests.front()->test;
  if (!blocking && served.first->kind == EventKind::kTest) outcome = &served.first->test;

  // Complete, as recorded, the requests the recording completed.
  const int n = static_cast<int>(t_saved.size());
  auto status_for = [&](int i, int slot) -> MPI_Status* {
    if (statuses_ != nullptr) return statuses_ + slot;
    return i >= 0 ? status_ : nullptr;
  };
  int completed_slot = 0;
  for (const Event* ce : served.completions) {
    const CompletionEvent& c = ce->completion;
    int found = -1;
    for (int i = 0; i < n && found < 0; ++i) {
      if (t_saved[static_cast<size_t>(i)] == abi.request_null) continue;
      auto p = ctx_.requests->Get(reinterpret_cast<uint64_t>(t_saved[static_cast<size_t>(i)]));
      if (p && p->request_id == c.request) found = i;
    }
    if (found < 0) {
      Diverged(o, *ce, call_site_, api, "the recording completes request " + std::to_string(c.request) +
                                          ", which the program did not pass");
    }
    MPI_Request h = t_saved[static_cast<size_t>(found)];
    auto p = ctx_.requests->Complete(reinterpret_cast<uint64_t>(h));
    Region r;
    MPI_Comm pc = reinterpret_cast<MPI_Comm>(p->comm_handle);
    if (p->is_recv && (p->kind == OpKind::kRecv || p->kind == OpKind::kMrecv)) {
      r.Add(reinterpret_cast<const void*>(p->recv_buf), c.recv_count, reinterpret_cast<MPI_Datatype>(p->recv_type));
    } else {
      for (const auto& piece : p->recv_pieces) {
        r.Add(reinterpret_cast<const void*>(piece[0]), static_cast<int64_t>(piece[1]),
              reinterpret_cast<MPI_Datatype>(piece[2]));
      }
    }
    if (!c.cancelled) Fill(o, r, c.payload_hash, c.payload_size, pc, *ce);
    // A wildcard receive numbers its message by the source it matched, as the
    // recording did when it completed; later receives from that source count on.
    if (p->is_recv && p->peer == kAnySource && c.source >= 0) {
      if (CommState* cs = ctx_.comms->Find(p->comm_handle)) cs->NextRecv(c.source);
    }
    // Free (or deactivate) the stand-in request, then describe the completion.
    int slot = api_ == kApi_MPI_Waitsome || api_ == kApi_MPI_Testsome ? completed_slot : found;
    MPI_Status scratch;
    Real<int (*)(MPI_Request*, MPI_Status*)>(kApi_MPI_Wait)(&reqs[found], &scratch);
    MPI_Status* st = status_for(found, slot);
    if (p->kind == OpKind::kRecv || p->kind == OpKind::kMrecv) {
      SetStatus(st, c.source, c.tag, c.recv_count, reinterpret_cast<MPI_Datatype>(p->recv_type), c.cancelled);
    } else if (st != nullptr) {
      SetStatus(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, nullptr, c.cancelled);
    }
    ++completed_slot;
  }
  if (flag != nullptr && outcome != nullptr) *flag = outcome->flag ? 1 : 0;
  if (index != nullptr && outcome != nullptr) *index = outcome->index < 0 ? MPI_UNDEFINED : outcome->index;
  if (outcount != nullptr && outcome != nullptr) {
    const std::vector<int64_t>& list = served.tests.empty() ? served.first->list : served.tests.front()->list;
    for (size_t j = 0; j < list.size() && indices != nullptr; ++j) indices[j] = static_cast<int>(list[j]);
    // MPI says "undefined" when no request was active, which the program's own
    // request array tells as well now as it did then.
    bool any_active = false;
    for (MPI_Request r : t_saved) any_active = any_active || r != abi.request_null;
    *outcount = any_active ? static_cast<int>(list.size()) : MPI_UNDEFINED;
  }
  if (blocking) return served.ret->ret.rc;
  return outcome != nullptr ? outcome->rc : MPI_SUCCESS;
}

}  // namespace mpi
}  // namespace replay::interpose

// ---------------------------------------------------------------------------
// Whole-job re-run (--all): real communication, forced to recorded choices.

namespace replay::interpose::mpi {

namespace {

CallForm FormOf(Shape shape, bool blocking_wait, bool has_flag) {
  if (shape == Shape::kComplete) return blocking_wait ? CallForm::kOp : CallForm::kTest;
  if (shape == Shape::kProbe && has_flag) return CallForm::kTest;
  return CallForm::kOp;
}

bool Records(Shape shape) {
  return shape != Shape::kTypeFree && shape != Shape::kRequestFree && !Unrecorded(shape);
}

// Whether what a call received differs from what it received when recorded:
// its fingerprint, and its NaN count where both counted the same elements.
template <typename Body>
bool ReceivedDiffers(const Body& now, const Body& then) {
  if ((now.flags & op_flags::kHasRecvHash) == 0 || (then.flags & op_flags::kHasRecvHash) == 0) return false;
  const bool alike = (now.flags & op_flags::kRecvSampled) == (then.flags & op_flags::kRecvSampled);
  return now.recv_hash != then.recv_hash || (alike && now.recv_nan != then.recv_nan);
}

std::string CompareReturn(const ReturnEvent& now, const ReturnEvent& then) {
  std::ostringstream d;
  if (now.rc != then.rc) d << "; returned " << now.rc << " (recorded " << then.rc << ")";
  if (now.source != then.source) d << "; matched source " << now.source << " (recorded " << then.source << ")";
  if (ReceivedDiffers(now, then)) {
    d << "; the data received differs: fingerprint " << Hex(now.recv_hash) << " (recorded " << Hex(then.recv_hash)
      << ")";
    if (now.recv_nan != then.recv_nan) d << ", " << now.recv_nan << " NaN (recorded " << then.recv_nan << ")";
  }
  std::string s = d.str();
  return s.empty() ? s : s.substr(2);
}

std::string CompareCompletion(const CompletionEvent& now, const CompletionEvent& then) {
  std::ostringstream d;
  if (now.source != then.source) d << "; matched source " << now.source << " (recorded " << then.source << ")";
  if (ReceivedDiffers(now, then)) {
    d << "; the data received differs: fingerprint " << Hex(now.recv_hash) << " (recorded " << Hex(then.recv_hash)
      << ")";
  }
  std::string s = d.str();
  return s.empty() ? s : s.substr(2);
}

}  // namespace

void Call::Prepare() {
  if (served_ || !Records(shape_)) {
    if (!served_) DoEnter();
    return;
  }
  DoEnter();
  if (session_->OffRecording()) return;
  Oracle& o = session_->oracle();
  const std::string api = ApiName(api_);
  auto s = o.Serve(session_->ThreadNumber(), api, FormOf(shape_, BlockingWait(), flag != nullptr), kind_);
  if (!s.ok()) {
    // Where the program departed: the call the recording holds next, or its
    // last event when it has none.
    const Event* at = o.Upcoming(session_->ThreadNumber());
    if (at == nullptr && !o.events().empty()) at = &o.events().back();
    if (at != nullptr) session_->NoteDivergence(*at, s.status().message() + " (" + Site(call_site_) + ")");
    session_->LeaveRecording(s.status().message());
    return;
  }
  served_ = std::make_unique<ServedCall>(std::move(s).value());
  session_->NoteServed(*served_->first);
  if (!emitted_.empty() && emitted_[0].kind == EventKind::kOp && served_->first->kind == EventKind::kOp) {
    std::string diff =
        CompareOps(*session_, emitted_[0].op, served_->first->op, emitted_[0].list, served_->first->list);
    if (!diff.empty()) {
      session_->NoteDivergence(*served_->first, "the program called " + api + " (" + Site(call_site_) + "): " + diff +
                                                    ". Recorded: " + o.Describe(*served_->first));
    }
  }
}

void Call::Finish(int rc) {
  size_t before = emitted_.size();
  DoLeave(rc);
  if (!served_ || session_->OffRecording()) return;
  const std::string api = ApiName(api_);
  for (size_t i = before; i < emitted_.size(); ++i) {
    const Event& e = emitted_[i];
    std::string diff;
    const Event* against = nullptr;
    if (e.kind == EventKind::kReturn && served_->ret != nullptr) {
      against = served_->ret;
      diff = CompareReturn(e.ret, against->ret);
    } else if (e.kind == EventKind::kCompletion) {
      for (const Event* c : served_->completions) {
        if (c->completion.request == e.completion.request) against = c;
      }
      if (against == nullptr) {
        against = served_->first;
        diff = "completed request " + std::to_string(e.completion.request) + ", which the recording did not here";
      } else {
        diff = CompareCompletion(e.completion, against->completion);
      }
    }
    if (!diff.empty()) {
      session_->NoteDivergence(*against, "the program called " + api + " (" + Site(call_site_) + "): " + diff +
                                             ". Recorded: " + session_->oracle().Describe(*against));
    }
  }
}

bool Call::Forced() noexcept {
  try {
    const bool any_source = peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG;
    bool force = false;
    switch (shape_) {
      case Shape::kRecv:
      case Shape::kIrecv:
        force = any_source;
        break;
      case Shape::kSendrecv:
        force = source == MPI_ANY_SOURCE || rtag == MPI_ANY_TAG;
        break;
      case Shape::kProbe:
        force = any_source || flag != nullptr;
        break;
      case Shape::kComplete:
        force = api_ != kApi_MPI_Wait && api_ != kApi_MPI_Waitall;
        break;
      default:
        break;
    }
    if (!force) return false;
    Prepare();
    forced_rc_ = ForceCall();
    Finish(forced_rc_);
    return true;
  } catch (...) {
    return false;
  }
}

int Call::ForceCall() {
  const MpiAbi& abi = Abi();
  const bool have = served_ != nullptr;
  using RecvFn = int (*)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*);
  using IrecvFn = int (*)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
  using WaitFn = int (*)(MPI_Request*, MPI_Status*);
  using WaitallFn = int (*)(int, MPI_Request*, MPI_Status*);
  using ProbeFn = int (*)(int, int, MPI_Comm, MPI_Status*);
  using MprobeFn = int (*)(int, int, MPI_Comm, MPI_Message*, MPI_Status*);
  auto wait = [&](int i, MPI_Status* st) { return Real<WaitFn>(kApi_MPI_Wait)(&reqs[i], st); };
  const TestEvent* outcome = nullptr;
  if (have && !served_->tests.empty()) outcome = &served_->tests.front()->test;
  if (have && served_->first->kind == EventKind::kTest) outcome = &served_->first->test;

  switch (shape_) {
    case Shape::kRecv: {
      int src = peer, tg = tag;
      if (have && served_->ret != nullptr && served_->ret->ret.source >= 0) {
        src = served_->ret->ret.source;
        tg = served_->ret->ret.tag;
      }
      return Real<RecvFn>(api_)(rbuf, rcount, rtype, src, tg, comm, status_);
    }
    case Shape::kIrecv: {
      int src = peer, tg = tag;
      const Event* done = have ? session_->oracle().FindCompletion(served_->first->op.request) : nullptr;
      if (done != nullptr && done->completion.source >= 0) {
        src = done->completion.source;
        tg = done->completion.tag;
      }
      return Real<IrecvFn>(api_)(rbuf, rcount, rtype, src, tg, comm, req);
    }
    case Shape::kSendrecv: {
      int src = source, tg = rtag;
      if (have && served_->ret != nullptr && served_->ret->ret.source >= 0) {
        src = served_->ret->ret.source;
        tg = served_->ret->ret.tag;
      }
      if (api_ == kApi_MPI_Sendrecv) {
        using Fn = int (*)(const void*, int, MPI_Datatype, int, int, void*, int, MPI_Datatype, int, int, MPI_Comm,
                           MPI_Status*);
        return Real<Fn>(api_)(sbuf, scount, stype, peer, tag, rbuf, rcount, rtype, src, tg, comm, status_);
      }
      using Fn = int (*)(void*, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Status*);
      return Real<Fn>(api_)(rbuf, rcount, rtype, peer, tag, src, tg, comm, status_);
    }
    case Shape::kProbe: {
      int src = peer, tg = tag;
      if (outcome != nullptr && outcome->flag && outcome->source >= 0) {
        src = outcome->source;
        tg = outcome->tag;
      }
      if (flag != nullptr) {
        // A poll: the recorded answer. When it was yes, wait for that message.
        if (outcome != nullptr && !outcome->flag) {
          *flag = 0;
          return outcome->rc;
        }
        *flag = 1;
        if (message != nullptr) return Real<MprobeFn>(kApi_MPI_Mprobe)(src, tg, comm, message, status_);
        return Real<ProbeFn>(kApi_MPI_Probe)(src, tg, comm, status_);
      }
      if (message != nullptr) return Real<MprobeFn>(api_)(src, tg, comm, message, status_);
      return Real<ProbeFn>(api_)(src, tg, comm, status_);
    }
    case Shape::kComplete: {
      bool any_active = false;
      for (int i = 0; i < nreq; ++i) any_active = any_active || reqs[i] != abi.request_null;
      if (!have || outcome == nullptr) {
        // Off the recording: complete as MPI likes.
        switch (api_) {
          case kApi_MPI_Test: return Real<int (*)(MPI_Request*, int*, MPI_Status*)>(api_)(reqs, flag, status_);
          case kApi_MPI_Testall:
            return Real<int (*)(int, MPI_Request*, int*, MPI_Status*)>(api_)(nreq, reqs, flag, statuses_);
          case kApi_MPI_Waitany:
            return Real<int (*)(int, MPI_Request*, int*, MPI_Status*)>(api_)(nreq, reqs, index, status_);
          case kApi_MPI_Testany:
            return Real<int (*)(int, MPI_Request*, int*, int*, MPI_Status*)>(api_)(nreq, reqs, index, flag, status_);
          default:
            return Real<int (*)(int, MPI_Request*, int*, int*, MPI_Status*)>(api_)(nreq, reqs, outcount, indices,
                                                                                  statuses_);
        }
      }
      switch (api_) {
        case kApi_MPI_Test:
          *flag = outcome->flag ? 1 : 0;
          return outcome->flag ? wait(0, status_) : MPI_SUCCESS;
        case kApi_MPI_Testall:
          *flag = outcome->flag ? 1 : 0;
          return outcome->flag ? Real<WaitallFn>(kApi_MPI_Waitall)(nreq, reqs, statuses_) : MPI_SUCCESS;
        case kApi_MPI_Waitany:
        case kApi_MPI_Testany: {
          if (flag != nullptr) *flag = outcome->flag ? 1 : 0;
          int idx = outcome->index;
          *index = MPI_UNDEFINED;
          if (!outcome->flag || idx < 0 || idx >= nreq) return MPI_SUCCESS;
          *index = idx;
          return wait(idx, status_);
        }
        default: {  // Waitsome, Testsome
          const std::vector<int64_t>& list =
              served_->tests.empty() ? served_->first->list : served_->tests.front()->list;
          int rc = MPI_SUCCESS;
          int k = 0;
          for (int64_t idx : list) {
            if (idx < 0 || idx >= nreq) continue;
            int r = wait(static_cast<int>(idx), statuses_ + k);
            if (r != MPI_SUCCESS) rc = r;
            indices[k++] = static_cast<int>(idx);
          }
          *outcount = any_active ? k : MPI_UNDEFINED;
          return rc;
        }
      }
    }
    default:
      return MPI_ERR_INTERN;
  }
}

}  // namespace replay::interpose::mpi
