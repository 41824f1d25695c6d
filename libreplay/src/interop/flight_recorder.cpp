// Flight Recorder dumps to and from traces; see replay/flight_recorder.h and
// docs/flight-recorder.md for the mapping.
#include "replay/flight_recorder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "analysis/call_site.h"
#include "interop/pickle.h"
#include "interop/timeline.h"
#include "interop/trace_builder.h"
#include "replay/event_format.h"
#include "trace/read_progress.h"
#include "util/file_system.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/mapped_file.h"

namespace replay {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxDumpBytes = 4ull << 30;
// The version of the dump format written (FlightRecorder.hpp's version_val).
constexpr const char* kExportVersion = "2.10";
// FR's default process-group timeout, assumed where an entry has none.
constexpr int64_t kDefaultTimeoutMs = 600000;

// ---------------------------------------------------------------------------
// Types: c10::ScalarType names as FR writes them.

struct DtypeName {
  DataType type;
  const char* name;
  uint32_t size;
};
constexpr DtypeName kDtypes[] = {
    {DataType::kFloat32, "Float", 4},      {DataType::kFloat64, "Double", 8},
    {DataType::kFloat16, "Half", 2},       {DataType::kBfloat16, "BFloat16", 2},
    {DataType::kInt8, "Char", 1},          {DataType::kUint8, "Byte", 1},
    {DataType::kInt16, "Short", 2},        {DataType::kUint16, "UInt16", 2},
    {DataType::kInt32, "Int", 4},          {DataType::kUint32, "UInt32", 4},
    {DataType::kInt64, "Long", 8},         {DataType::kUint64, "UInt64", 8},
    {DataType::kBool, "Bool", 1},          {DataType::kComplex64, "ComplexFloat", 8},
    {DataType::kComplex128, "ComplexDouble", 16}, {DataType::kFp8E4M3, "Float8_e4m3fn", 1},
    {DataType::kFp8E5M2, "Float8_e5m2", 1}, {DataType::kByte, "Byte", 1},
};

DataType DtypeFromName(const std::string& name, uint32_t* size) {
  for (const DtypeName& d : kDtypes) {
    if (name == d.name) {
      *size = d.size;
      return d.type;
    }
  }
  *size = 0;
  return DataType::kUnknown;
}

const char* DtypeToName(DataType t) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return nullptr;
}

// Operation names after "nccl:" and our kinds. Several FR names map to one kind;
// ToFr uses the first listed for a kind.
struct FrOp {
  const char* name;
  OpKind kind;
};
constexpr FrOp kFrOps[] = {
    {"all_reduce", OpKind::kAllreduce},
    {"allreduce", OpKind::kAllreduce},
    {"allreduce_coalesced", OpKind::kAllreduce},
    {"all_reduce_coalesced", OpKind::kAllreduce},
    {"barrier", OpKind::kBarrier},
    {"all_reduce_barrier", OpKind::kBarrier},
    {"broadcast", OpKind::kBcast},
    {"_broadcast_oop", OpKind::kBcast},
    {"reduce", OpKind::kReduce},
    {"_reduce_oop", OpKind::kReduce},
    {"all_gather", OpKind::kAllgather},
    {"_all_gather_base", OpKind::kAllgather},
    {"all_gather_base", OpKind::kAllgather},
    {"all_gather_single", OpKind::kAllgather},
    {"all_gather_into_tensor_coalesced", OpKind::kAllgather},
    {"ALLGATHER_coalesced", OpKind::kAllgather},
    {"allgather", OpKind::kAllgather},
    {"all_gather_v", OpKind::kAllgatherv},
    {"reduce_scatter", OpKind::kReduceScatterBlock},
    {"_reduce_scatter_base", OpKind::kReduceScatterBlock},
    {"reduce_scatter_single", OpKind::kReduceScatterBlock},
    {"reduce_scatter_tensor_coalesced", OpKind::kReduceScatterBlock},
    {"REDUCE_SCATTER_coalesced", OpKind::kReduceScatterBlock},
    {"reduce_scatter_v", OpKind::kAlltoallw},
    {"gather", OpKind::kGather},
    {"scatter", OpKind::kScatter},
    {"all_to_all", OpKind::kAlltoallv},
    {"all_to_all_single", OpKind::kAlltoallv},
    {"all_to_all_v_single", OpKind::kAlltoallv},
    {"alltoall", OpKind::kAlltoallv},
    {"alltoall_base", OpKind::kAlltoallv},
    {"split", OpKind::kCommCreate},
    {"new_window", OpKind::kCommCreate},
    {"send", OpKind::kSend},
    {"recv", OpKind::kRecv},
};

// "nccl:send 0->1" -> type "send", meta "0->1".
void SplitProfilingName(const std::string& profiling_name, std::string* type, std::string* meta) {
  std::string rest = profiling_name;
  size_t colon = rest.find(':');
  if (colon != std::string::npos) rest = rest.substr(colon + 1);
  size_t space = rest.find(' ');
  *type = rest.substr(0, space);
  *meta = space == std::string::npos ? "" : rest.substr(space + 1);
}

// ---------------------------------------------------------------------------
// Reading dumps

// A double from a dump as an integer in [lo, hi]; NaN is lo.
int64_t ClampToInt(double v, int64_t lo, int64_t hi) {
  if (!(v >= static_cast<double>(lo))) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

int64_t IntOf(const json& j, const char* key, int64_t fallback = 0) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_number_integer() || it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_float()) return ClampToInt(it->get<double>(), INT64_MIN / 2, INT64_MAX / 2);
  if (it->is_boolean()) return it->get<bool>() ? 1 : 0;
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    return end != s.c_str() ? v : fallback;
  }
  return fallback;
}

double FloatOf(const json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

std::string StrOf(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null()) return "";
  return it->dump();
}

bool BoolOf(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && ((it->is_boolean() && it->get<bool>()) || (it->is_number() && it->get<double>() != 0));
}

// Ranks as FR writes them: the text "[0, 1, 2]", or a list.
std::vector<int32_t> RanksOf(const json& v) {
  std::vector<int32_t> out;
  if (v.is_array()) {
    for (const json& r : v) {
      if (r.is_number()) out.push_back(r.get<int32_t>());
    }
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    for (size_t i = 0; i < s.size();) {
      if (std::isdigit(static_cast<unsigned char>(s[i]))) {
        size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        out.push_back(static_cast<int32_t>(std::strtol(s.substr(i, j - i).c_str(), nullptr, 10)));
        i = j;
      } else {
        ++i;
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Elements of each tensor's shape, summed.
int64_t Numel(const json& sizes) {
  if (!sizes.is_array()) return 0;
  // Saturates instead of overflowing on shapes no tensor has.
  constexpr int64_t kMax = int64_t{1} << 62;
  int64_t total = 0;
  for (const json& shape : sizes) {
    if (!shape.is_array()) continue;
    int64_t n = 1;
    for (const json& d : shape) {
      int64_t dim = !d.is_number()      ? 0
                    : d.is_number_float() ? ClampToInt(d.get<double>(), 0, kMax)
                                          : std::clamp<int64_t>(d.get<int64_t>(), 0, kMax);
      n = dim != 0 && n > kMax / dim ? kMax : n * dim;
    }
    total = std::min(kMax, total + n);
  }
  return total;
}

std::string FirstString(const json& list) {
  if (list.is_array() && !list.empty() && list.front().is_string()) return list.front().get<std::string>();
  return "";
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The name without a .json/.pkl/.pickle extension.
std::string Stem(const std::string& name) {
  for (const char* ext : {".json", ".pkl", ".pickle"}) {
    size_t n = std::strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return name.substr(0, name.size() - n);
  }
  return name;
}

// The rank a dump file is of: the number its name ends in (FR writes <prefix><rank>).
int32_t RankFromName(const std::string& path, std::string* prefix) {
  std::string stem = Stem(BaseName(path));
  size_t end = stem.size();
  size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(stem[start - 1]))) --start;
  if (start == end || end - start > 9) return -1;
  if (prefix != nullptr) *prefix = stem.substr(0, start);
  return static_cast<int32_t>(std::strtol(stem.substr(start).c_str(), nullptr, 10));
}

Result<json> LoadDump(const std::string& path) {
  REPLAY_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  auto b = f.bytes();
  if (b.size() > kMaxDumpBytes) return Status::InvalidArgument(path + " is larger than a Flight Recorder dump can be");
  std::string_view bytes(reinterpret_cast<const char*>(b.data()), b.size());
  json doc;
  if (interop::LooksLikePickle(bytes)) {
    REPLAY_ASSIGN_OR_RETURN(doc, interop::ReadPickle(bytes, path));
  } else {
    size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || bytes[first] != '{') {
      return Status::NotATrace(path + " is not a Flight Recorder dump (neither a pickle nor a JSON document)");
    }
    doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (doc.is_discarded()) return Status::Corruption(path + " is not valid JSON");
  }
  if (!doc.is_object() || (!doc.contains("entries") && !doc.contains("pg_config"))) {
    return Status::NotATrace(path + " is not a Flight Recorder dump: it has no \"entries\" or \"pg_config\"");
  }
  if (doc.contains("entries") && !doc["entries"].is_array()) {
    return Status::Corruption(path + ": \"entries\" is not a list");
  }
  return doc;
}

struct Pg {
  std::string name;
  std::string desc;
  std::vector<int32_t> ranks;  // sorted global ranks; empty when unknown
  uint64_t id = 0;
  std::string label;  // what the communicator is called
};

uint64_t PgId(const std::string& name, const std::vector<int32_t>& ranks) {
  uint64_t h = Hash64(name.data(), name.size(), 0xf119);
  for (int32_t r : ranks) h = HashCombine(h, static_cast<uint64_t>(r));
  return h | 1;
}

std::string PgLabel(const std::string& name, const std::string& desc) {
  return "pg " + name + (desc.empty() || desc == "undefined" ? "" : ":" + desc);
}

class ApiTable {
 public:
  uint16_t Id(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint16_t>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::map<std::string, uint16_t> ids_;
  std::vector<std::string> names_;
};

// One operation of a rank, from one entry or a coalesced group of them.
struct FrOpRecord {
  std::string api;
  OpKind kind = OpKind::kOther;
  bool p2p = false;
  const Pg* pg = nullptr;
  uint64_t seq = 0;
  int32_t peer = kNoPeer;  // group-local rank
  int64_t count = 0;
  int64_t recv_count = 0;
  DataType dtype = DataType::kUnknown;
  uint32_t dtype_size = 0;
  DataType recv_dtype = DataType::kUnknown;
  int64_t created_ns = 0;
  int64_t completed_ns = -1;
  int64_t timeout_ms = kDefaultTimeoutMs;
  // From the entry's frames, and from what replay's own exports add
  // (docs/flight-recorder.md, "replay"): the recorded call, its thread, and
  // whether it blocked or the rank waited for it when the trace ends.
  std::vector<SourceFrame> python;  // innermost first
  uint64_t call_site = 0;           // native return address
  uint32_t thread = 0;
  bool blocking = false;
  bool waited = false;
};

// A CloseReason by its name; kNone for one that names none.
CloseReason CloseReasonNamed(const std::string& name) {
  for (int i = 0; i < 16; ++i) {
    auto r = static_cast<CloseReason>(i);
    if (CloseReasonName(r) == name) return r;
  }
  return CloseReason::kNone;
}

// A hex number ("0x1a2b") from a dump; 0 when it is not one.
uint64_t HexOf(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return 0;
  return std::strtoull(it->get_ref<const std::string&>().c_str(), nullptr, 16);
}

struct RankDump {
  std::string file;
  int32_t rank = -1;
  json doc;
  // What replay's own export adds ("replay"); null in PyTorch's dumps.
  const json* replay() const {
    auto it = doc.find("replay");
    return it != doc.end() && it->is_object() ? &*it : nullptr;
  }
};

class Importer {
 public:
  explicit Importer(std::vector<RankDump> dumps) : dumps_(std::move(dumps)) {}

  Result<FlightRecorderImport> Run(const std::string& dest) {
    FlightRecorderImport summary;
    // Process groups: the union of every rank's pg_config, by name and members.
    for (const RankDump& d : dumps_) {
      auto cfg = d.doc.find("pg_config");
      if (cfg == d.doc.end() || !cfg->is_object()) continue;
      for (auto it = cfg->begin(); it != cfg->end(); ++it) {
        if (!it->is_object()) continue;
        std::string name = it->contains("name") ? StrOf(*it, "name") : it.key();
        Pg pg{name, StrOf(*it, "desc"), RanksOf(it->value("ranks", json())), 0, ""};
        const json* recorded = Recorded(d, name);
        pg.id = recorded != nullptr && HexOf(*recorded, "id") != 0 ? HexOf(*recorded, "id") : PgId(pg.name, pg.ranks);
        pg.label = PgLabel(pg.name, pg.desc);
        if (pgs_.count({name, pg.ranks}) == 0) pgs_[{name, pg.ranks}] = pg;
        by_rank_name_[{d.rank, name}] = pgs_[{name, pg.ranks}];
        for (int32_t r : pg.ranks) world_ = std::max(world_, r + 1);
      }
    }
    // Time origin and the other job-wide facts.
    int64_t t0 = INT64_MAX;
    int64_t latest = 0;
    bool zero_seq = false;
    for (const RankDump& d : dumps_) {
      world_ = std::max(world_, d.rank + 1);
      if (summary.version.empty()) summary.version = StrOf(d.doc, "version");
      for (const json& e : d.doc.value("entries", json::array())) {
        if (!e.is_object()) continue;
        int64_t t = std::clamp<int64_t>(IntOf(e, "time_created_ns"), 0, INT64_MAX / 4);
        if (t > 0) t0 = std::min(t0, t);
        for (const char* k : {"time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns"}) {
          latest = std::max(latest, std::clamp<int64_t>(IntOf(e, k), 0, INT64_MAX / 4));
        }
        std::string type, meta;
        SplitProfilingName(StrOf(e, "profiling_name"), &type, &meta);
        if (!IsP2p(e, type) && type != "coalesced" && IntOf(e, "collective_seq_id") == 0) zero_seq = true;
        ++summary.entries;
      }
    }
    if (t0 == INT64_MAX) t0 = 1;
    seq_offset_ = zero_seq ? 1 : 0;

    // Ranks: operations first (they may name process groups the config lacks).
    std::vector<std::vector<FrOpRecord>> ops(dumps_.size());
    for (size_t i = 0; i < dumps_.size(); ++i) ops[i] = Operations(dumps_[i], &summary);
    // The dump was taken when FR's watchdog timed out: no earlier than the
    // timeout of every operation still in progress.
    int64_t dumped = std::max(latest, t0);
    for (const auto& list : ops) {
      for (const FrOpRecord& o : list) {
        if (o.completed_ns < 0) dumped = std::max(dumped, o.created_ns + o.timeout_ms * 1000000);
      }
    }

    Uuid uuid{};
    uint64_t h1 = Hash64(summary.version.data(), summary.version.size(), static_cast<uint64_t>(t0));
    uint64_t h2 = HashCombine(h1, dumps_.size());
    std::memcpy(uuid.data(), &h1, 8);
    std::memcpy(uuid.data() + 8, &h2, 8);
    uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);
    uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);

    // Every rank lists every API name, so that a name means the same id everywhere.
    for (size_t i = 0; i < dumps_.size(); ++i) {
      for (const FrOpRecord& o : ops[i]) apis_.Id(o.api);
    }
    for (const RankDump& d : dumps_) {
      for (const auto& [key, pg] : pgs_) apis_.Id(LabelOf(d, pg));
    }
    const uint16_t wait_api = apis_.Id(kWaitApi);

    JobManifest m;
    m.trace_uuid = uuid;
    m.created_realtime_ns = t0;
    m.level = Level::kMeta;
    m.world_size = world_;
    m.recorder = "flight recorder " + summary.version + " (imported by replay)";
    for (const RankDump& d : dumps_) m.command.push_back(d.file);
    if (!dumps_.empty() && dumps_.front().replay() != nullptr) m.host = StrOf(*dumps_.front().replay(), "host");
    REPLAY_RETURN_IF_ERROR(interop::WriteTraceManifest(dest, m));

    for (size_t i = 0; i < dumps_.size(); ++i) {
      const RankDump& d = dumps_[i];
      RankHeader h;
      h.trace_uuid = uuid;
      h.rank = d.rank;
      h.world_size = world_;
      h.start_realtime_ns = t0;
      h.level = Level::kMeta;
      // What replay's own export kept of the recorded rank: where it ran, what
      // it had loaded (to resolve its call sites), when its trace ends.
      const json* replay = d.replay();
      int64_t closed = dumped;
      CloseReason reason = CloseReason::kNone;
      if (replay != nullptr) {
        h.host = StrOf(*replay, "host");
        h.pid = static_cast<int32_t>(std::clamp<int64_t>(IntOf(*replay, "pid"), 0, INT32_MAX));
        auto modules = replay->find("modules");
        if (modules != replay->end() && modules->is_array()) {
          for (const json& mod : *modules) {
            if (mod.is_object()) h.modules.push_back({StrOf(mod, "path"), HexOf(mod, "base"), HexOf(mod, "size")});
          }
        }
        int64_t end = std::clamp<int64_t>(IntOf(*replay, "end_ns"), 0, INT64_MAX / 4);
        if (end > 0) closed = std::max(end, t0);
        int64_t start = std::clamp<int64_t>(IntOf(*replay, "start_ns"), 0, INT64_MAX / 4);
        if (start > 0 && start <= t0) h.start_realtime_ns = start;
        reason = CloseReasonNamed(StrOf(*replay, "close_reason"));
      }
      h.versions.push_back({"flight_recorder", StrOf(d.doc, "version")});
      std::string lib = d.doc.contains("comm_lib_version") ? StrOf(d.doc, "comm_lib_version") : StrOf(d.doc, "nccl_version");
      if (!lib.empty()) h.versions.push_back({"comm_lib", lib});
      h.command_line = {d.file};
      h.api_names = apis_.names();
      interop::RankTraceBuilder b(h);

      // Communicators: the groups this rank is in, and those its entries name.
      std::set<uint64_t> announced;
      auto announce = [&](const Pg& pg) {
        if (!announced.insert(pg.id).second) return;
        CommCreateEvent c{};
        c.comm = pg.id;
        c.api = apis_.Id(LabelOf(d, pg));
        c.size = static_cast<int32_t>(pg.ranks.size());
        auto me = std::find(pg.ranks.begin(), pg.ranks.end(), d.rank);
        c.rank = me == pg.ranks.end() ? -1 : static_cast<int32_t>(me - pg.ranks.begin());
        c.device = -1;
        Event e = Event::Make(c);
        e.list.assign(pg.ranks.begin(), pg.ranks.end());
        b.Add(std::move(e), t0);
      };
      for (const auto& [key, pg] : by_rank_name_) {
        if (key.first == d.rank && std::find(pg.ranks.begin(), pg.ranks.end(), d.rank) != pg.ranks.end() &&
            ParentOf(d, pg) == nullptr) {
          announce(pg);
        }
      }
      for (const FrOpRecord& o : ops[i]) announce(*o.pg);

      // Operations, each enqueued (a non-blocking call that returns at once)
      // and completed when FR saw it complete; those still in flight are
      // waited for at the end, by a thread of their own.
      struct Timed {
        int64_t t;
        size_t order;
        Event e;
      };
      std::vector<Timed> timed;
      std::vector<int64_t> unfinished;
      int64_t wait_from = INT64_MAX;
      std::map<std::tuple<uint64_t, int32_t, bool>, uint64_t> channels;
      std::map<std::pair<uint64_t, std::vector<SourceFrame>>, uint64_t> sites;  // -> tagged call site
      uint64_t request = 0;
      for (const FrOpRecord& o : ops[i]) {
        ++request;
        uint64_t call_site = o.call_site;
        if (!o.python.empty()) {
          auto [it, fresh] = sites.try_emplace({o.call_site, o.python}, kPythonSiteTag | (sites.size() + 1));
          if (fresh) {
            PythonSite site{it->second & ~kPythonSiteTag, o.call_site, o.python};
            timed.push_back({t0, timed.size(), Event::MakeInfo(kPythonSiteKey, EncodePythonSite(site))});
          }
          call_site = it->second;
        }
        OpEvent op{};
        op.api = apis_.Id(o.api);
        op.kind = o.kind;
        op.flags = o.blocking ? 0 : op_flags::kNonBlocking;
        op.comm = o.pg->id;
        op.seq = o.p2p ? 0 : o.seq;
        op.count = o.count;
        op.dtype = o.dtype;
        op.dtype_size = o.dtype_size;
        op.bytes = static_cast<uint64_t>(o.count) * o.dtype_size;
        op.root = -1;
        op.peer = o.p2p ? o.peer : kNoPeer;
        op.recv_peer = kNoPeer;
        op.recv_count = o.recv_count;
        op.recv_dtype = o.recv_dtype;
        op.request = request;
        if (o.p2p && o.peer >= 0) {
          int32_t world_peer = static_cast<size_t>(o.peer) < o.pg->ranks.size() ? o.pg->ranks[static_cast<size_t>(o.peer)] : o.peer;
          op.peer_seq = ++channels[{o.pg->id, world_peer, o.kind == OpKind::kSend}];
        }
        auto at = [&](Event e) {
          e.thread = o.thread;
          e.call_site = call_site;
          return e;
        };
        timed.push_back({o.created_ns, timed.size(), at(Event::Make(op))});
        if (o.blocking) {
          // A blocking call returns when it completes, or never.
          op.request = 0;
          timed.back().e.op.request = 0;
          if (o.completed_ns >= 0) {
            ReturnEvent ret{};
            ret.api = op.api;
            ret.comm = op.comm;
            ret.seq = op.seq;
            ret.peer_seq = op.peer_seq;
            ret.source = o.kind == OpKind::kRecv ? o.peer : -1;
            ret.recv_count = o.recv_count;
            timed.push_back({o.completed_ns, timed.size(), at(Event::Make(ret))});
          }
          continue;
        }
        ReturnEvent ret{};
        ret.api = op.api;
        ret.flags = op_flags::kNonBlocking;
        ret.comm = op.comm;
        ret.seq = op.seq;
        ret.peer_seq = op.peer_seq;
        ret.request = request;
        ret.source = -1;
        timed.push_back({o.created_ns, timed.size(), at(Event::Make(ret))});
        if (o.completed_ns >= 0) {
          CompletionEvent c{};
          c.request = request;
          c.api = op.api;
          c.flags = op_flags::kNonBlocking;
          c.comm = op.comm;
          c.seq = op.seq;
          c.peer_seq = op.peer_seq;
          c.source = o.kind == OpKind::kRecv ? o.peer : -1;
          c.recv_count = o.recv_count;
          timed.push_back({o.completed_ns, timed.size(), at(Event::Make(c))});
        } else if (replay == nullptr || o.waited) {
          // PyTorch's dumps: the GPU stream waits for what it was given. Replay's
          // exports say which operations the rank was waiting for.
          unfinished.push_back(static_cast<int64_t>(request));
          wait_from = std::min(wait_from, o.created_ns);
        }
      }
      std::stable_sort(timed.begin(), timed.end(), [](const Timed& x, const Timed& y) {
        return x.t != y.t ? x.t < y.t : x.order < y.order;
      });
      for (Timed& t : timed) b.Add(std::move(t.e), t.t);
      if (!unfinished.empty()) {
        OpEvent w{};
        w.api = wait_api;
        w.kind = OpKind::kWait;
        w.count = static_cast<int64_t>(unfinished.size());
        w.peer = kNoPeer;
        w.recv_peer = kNoPeer;
        w.root = -1;
        Event e = Event::Make(w);
        e.thread = 1;
        e.list = unfinished;
        b.Add(std::move(e), wait_from);
      }
      if (reason == CloseReason::kNone) reason = unfinished.empty() ? CloseReason::kExit : CloseReason::kAbort;
      REPLAY_RETURN_IF_ERROR(b.Write(dest, reason, closed));
    }
    summary.ranks = dumps_.size();
    summary.notes = std::move(notes_);
    return summary;
  }

 private:
  static constexpr const char* kWaitApi = "GPU stream";

  // What a group is called: in replay's exports, the communicator's own name
  // ("WORLD", "split(WORLD, color=1)"); else "pg NAME:DESC".
  static std::string LabelOf(const RankDump& d, const Pg& pg) {
    const json* recorded = Recorded(d, pg.name);
    std::string name = recorded != nullptr ? StrOf(*recorded, "name") : "";
    return name.empty() ? pg.label : name;
  }

  // The communicator group `name` stands for, as replay's export recorded it
  // ({"name", "id"}); null in PyTorch's dumps.
  static const json* Recorded(const RankDump& d, const std::string& name) {
    const json* replay = d.replay();
    if (replay == nullptr) return nullptr;
    auto comms = replay->find("comms");
    if (comms == replay->end() || !comms->is_object()) return nullptr;
    auto it = comms->find(name);
    return it != comms->end() && it->is_object() ? &*it : nullptr;
  }

  static bool IsP2p(const json& e, const std::string& type) {
    return BoolOf(e, "is_p2p") || type == "send" || type == "recv";
  }

  // The group a pair group of replay's export stands in for; null for any other.
  const Pg* ParentOf(const RankDump& d, const Pg& pg) {
    const json* replay = d.replay();
    if (replay == nullptr) return nullptr;
    auto pairs = replay->find("p2p_groups");
    if (pairs == replay->end() || !pairs->is_object()) return nullptr;
    auto parent = pairs->find(pg.name);
    if (parent == pairs->end() || !parent->is_string()) return nullptr;
    auto it = by_rank_name_.find({d.rank, parent->get<std::string>()});
    return it == by_rank_name_.end() ? nullptr : &pgs_[{it->first.second, it->second.ranks}];
  }

  const Pg* PgOf(const RankDump& d, const json& e) {
    std::string name, desc;
    auto pgv = e.find("process_group");
    if (pgv != e.end() && pgv->is_array() && !pgv->empty()) {
      name = (*pgv)[0].is_string() ? (*pgv)[0].get<std::string>() : JsonText((*pgv)[0]);
      if (pgv->size() > 1 && (*pgv)[1].is_string()) desc = (*pgv)[1].get<std::string>();
    } else {
      name = std::to_string(IntOf(e, "pg_id"));
    }
    auto it = by_rank_name_.find({d.rank, name});
    if (it != by_rank_name_.end()) return &pgs_[{name, it->second.ranks}];
    // A group the dump's pg_config does not list: members unknown.
    auto [pit, inserted] = pgs_.try_emplace({name, {}}, Pg{name, desc, {}, PgId(name, {}), PgLabel(name, desc)});
    if (inserted) notes_.push_back("process group " + name + " is not in the pg_config of rank " + std::to_string(d.rank) + "; its members are unknown");
    return &pit->second;
  }

  FrOpRecord Record(const RankDump& d, const json& e, const std::string& type, const std::string& meta) {
    FrOpRecord o;
    o.api = StrOf(e, "profiling_name");
    size_t space = o.api.find(' ');
    if (space != std::string::npos) o.api = o.api.substr(0, space);  // "nccl:send 0->1" -> "nccl:send"
    if (o.api.empty()) o.api = "unknown";
    o.kind = OpKind::kAlltoallw;  // unknown collectives: matched on the kind alone
    bool known = false;
    for (const FrOp& f : kFrOps) {
      if (type == f.name) {
        o.kind = f.kind;
        known = true;
        break;
      }
    }
    if (!known && type != "coalesced") unknown_types_.insert(type);
    o.p2p = IsP2p(e, type);
    if (o.p2p && o.kind != OpKind::kSend && o.kind != OpKind::kRecv) o.kind = OpKind::kSend;
    o.pg = PgOf(d, e);
    o.seq = static_cast<uint64_t>(IntOf(e, "collective_seq_id")) + seq_offset_;
    o.count = Numel(e.value("input_sizes", json()));
    o.recv_count = Numel(e.value("output_sizes", json()));
    o.dtype = DtypeFromName(FirstString(e.value("input_dtypes", json())), &o.dtype_size);
    uint32_t recv_size = 0;
    o.recv_dtype = DtypeFromName(FirstString(e.value("output_dtypes", json())), &recv_size);
    if (o.dtype == DataType::kUnknown) {
      o.dtype = o.recv_dtype;
      o.dtype_size = recv_size;
    }
    // Times are bounded so that sums of them and of timeouts cannot overflow.
    o.created_ns = std::clamp<int64_t>(IntOf(e, "time_created_ns"), 0, INT64_MAX / 4);
    o.timeout_ms = IntOf(e, "timeout_ms", kDefaultTimeoutMs);
    if (o.timeout_ms <= 0) o.timeout_ms = kDefaultTimeoutMs;
    o.timeout_ms = std::min<int64_t>(o.timeout_ms, int64_t{1} << 40);  // 35 years
    const std::string state = StrOf(e, "state");
    int64_t completed = std::clamp<int64_t>(IntOf(e, "time_discovered_completed_ns"), 0, INT64_MAX / 4);
    if (state == "completed" || completed > 0) {
      if (completed <= 0) {
        double ms = FloatOf(e, "duration_ms", 0);
        completed = o.created_ns + ClampToInt(ms * 1e6, 0, INT64_MAX / 4);
      }
      o.completed_ns = std::max(completed, o.created_ns);
    }
    if (o.p2p) {
      // "send 1->2": local ranks, sender first; "recv 2<-1": receiver first.
      size_t arrow = meta.find(o.kind == OpKind::kSend ? "->" : "<-");
      if (arrow != std::string::npos) {
        o.peer = static_cast<int32_t>(std::strtol(meta.c_str() + arrow + 2, nullptr, 10));
      }
      // replay's exports put a pair's messages on a group of the two: back on
      // the communicator they were sent on, with the peer's rank in it.
      if (const Pg* parent = ParentOf(d, *o.pg)) {
        if (o.peer >= 0 && static_cast<size_t>(o.peer) < o.pg->ranks.size()) {
          int32_t world = o.pg->ranks[static_cast<size_t>(o.peer)];
          auto at = std::find(parent->ranks.begin(), parent->ranks.end(), world);
          o.peer = at == parent->ranks.end() ? kNoPeer : static_cast<int32_t>(at - parent->ranks.begin());
        }
        o.pg = parent;
      }
    }
    // Frames: PyTorch's are Python frames (with C++ ones under
    // TORCH_FR_CPP_STACK), innermost first; replay's exports end with the
    // native call site, which their "replay" part gives as an address.
    const json* extra = Extra(d, e);
    size_t python = SIZE_MAX;
    if (extra != nullptr) {
      o.call_site = HexOf(*extra, "call_site");
      python = static_cast<size_t>(std::clamp<int64_t>(IntOf(*extra, "python_frames"), 0, 1 << 20));
      o.blocking = BoolOf(*extra, "blocking");
      o.waited = BoolOf(*extra, "waited");
      o.thread = static_cast<uint32_t>(std::clamp<int64_t>(IntOf(e, "thread_id"), 0, 1 << 20));
      std::string api = StrOf(*extra, "api");
      if (!api.empty()) o.api = api;
    }
    auto frames = e.find("frames");
    if (frames != e.end() && frames->is_array()) {
      for (const json& f : *frames) {
        if (o.python.size() >= std::min(python, kPythonSiteFrames)) break;
        if (!f.is_object()) continue;
        o.python.push_back({StrOf(f, "name"), StrOf(f, "filename"),
                            static_cast<int32_t>(std::clamp<int64_t>(IntOf(f, "line"), 0, INT32_MAX))});
      }
    }
    return o;
  }

  // The "replay" part's facts of entry `e`, found by its record id.
  static const json* Extra(const RankDump& d, const json& e) {
    const json* replay = d.replay();
    if (replay == nullptr) return nullptr;
    auto list = replay->find("entries");
    int64_t id = IntOf(e, "record_id", -1);
    if (list == replay->end() || !list->is_array() || id < 0 || static_cast<uint64_t>(id) >= list->size()) return nullptr;
    const json& x = (*list)[static_cast<size_t>(id)];
    return x.is_object() ? &x : nullptr;
  }

  std::vector<FrOpRecord> Operations(const RankDump& d, FlightRecorderImport* summary) {
    std::vector<const json*> entries;  // into d.doc, which outlives them
    auto list = d.doc.find("entries");
    if (list != d.doc.end() && list->is_array()) {
      for (const json& e : *list) {
        if (e.is_object()) entries.push_back(&e);
      }
    }
    std::stable_sort(entries.begin(), entries.end(), [](const json* a, const json* b) {
      return IntOf(*a, "record_id") < IntOf(*b, "record_id");
    });
    std::vector<FrOpRecord> out;
    // Collectives coalesced into one launch share their sequence number;
    // they are one operation here.
    std::vector<FrOpRecord> group;
    bool group_has_marker = false;
    auto flush = [&] {
      if (group.empty()) return;
      FrOpRecord merged = group.front();
      for (size_t i = 1; i < group.size(); ++i) {
        const FrOpRecord& o = group[i];
        if (o.kind != merged.kind) merged.kind = OpKind::kAlltoallw;
        merged.count += o.count;
        merged.recv_count += o.recv_count;
        merged.completed_ns = merged.completed_ns < 0 || o.completed_ns < 0 ? -1 : std::max(merged.completed_ns, o.completed_ns);
      }
      if (group.size() > 1 || group_has_marker) merged.api += " (coalesced)";
      out.push_back(std::move(merged));
      group.clear();
      group_has_marker = false;
    };
    for (const json* e : entries) {
      std::string type, meta;
      SplitProfilingName(StrOf(*e, "profiling_name"), &type, &meta);
      if (IsP2p(*e, type)) {
        flush();
        if (type == "coalesced") continue;  // the end of a batch of sends and receives
        out.push_back(Record(d, *e, type, meta));
        continue;
      }
      const Pg* pg = PgOf(d, *e);
      uint64_t seq = static_cast<uint64_t>(IntOf(*e, "collective_seq_id")) + seq_offset_;
      if (!group.empty() && (group.front().pg != pg || group.front().seq != seq)) flush();
      if (type == "coalesced") {
        // Closes the group of the collectives before it; alone it ends a batch
        // of point-to-point operations, which carry their own entries.
        if (!group.empty()) {
          group_has_marker = true;
          FrOpRecord marker = Record(d, *e, type, meta);
          group.back().completed_ns = marker.completed_ns < 0 ? -1 : group.back().completed_ns;
          flush();
        }
        continue;
      }
      group.push_back(Record(d, *e, type, meta));
    }
    flush();
    for (const std::string& t : unknown_types_) {
      std::string note = "operation type \"" + t + "\" is unknown; compared by type only";
      if (std::find(summary->notes.begin(), summary->notes.end(), note) == summary->notes.end()) summary->notes.push_back(note);
    }
    return out;
  }

  std::vector<RankDump> dumps_;
  std::map<std::pair<std::string, std::vector<int32_t>>, Pg> pgs_;
  std::map<std::pair<int32_t, std::string>, Pg> by_rank_name_;
  std::set<std::string> unknown_types_;
  std::vector<std::string> notes_;
  ApiTable apis_;
  int32_t world_ = 0;
  uint64_t seq_offset_ = 0;
};

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

bool LooksLikeFlightRecorderDump(const std::string& path) {
  if (!IsFile(path)) return false;
  auto f = MappedFile::Open(path);
  if (!f.ok()) return false;
  auto b = f->bytes();
  std::string_view head(reinterpret_cast<const char*>(b.data()), std::min<size_t>(b.size(), 1 << 16));
  if (interop::LooksLikePickle(head)) {
    return head.find("entries") != std::string_view::npos || head.find("pg_config") != std::string_view::npos ||
           head.find("version") != std::string_view::npos;
  }
  size_t first = head.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && head[first] == '{' &&
         (head.find("\"pg_config\"") != std::string_view::npos || head.find("\"entries\"") != std::string_view::npos);
}

Result<std::vector<std::string>> FindFlightRecorderDumps(const std::string& path) {
  if (IsFile(path)) {
    if (!LooksLikeFlightRecorderDump(path)) return Status::NotATrace(path + " is not a Flight Recorder dump");
    return std::vector<std::string>{path};
  }
  std::string dir = path;
  std::string prefix;
  bool given_prefix = false;
  if (!IsDir(path)) {
    size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
    prefix = slash == std::string::npos ? path : path.substr(slash + 1);
    given_prefix = true;
    if (!IsDir(dir)) return Status::NotFound(path + " does not exist");
  }
  // Files named <prefix><rank>, grouped by prefix; the group that reads as dumps.
  std::map<std::string, std::vector<std::string>> groups;
  for (const std::string& name : ListDir(dir)) {
    std::string p;
    if (RankFromName(name, &p) < 0) continue;
    if (given_prefix && p != prefix) continue;
    std::string full = dir + "/" + name;
    if (IsFile(full) && LooksLikeFlightRecorderDump(full)) groups[p].push_back(full);
  }
  if (groups.empty()) {
    return Status::NotFound(given_prefix ? "no Flight Recorder dumps named " + path + "<rank>"
                                         : "no Flight Recorder dumps (files named <prefix><rank>) in " + path);
  }
  if (groups.size() > 1) {
    std::string names;
    for (const auto& [p, files] : groups) names += (names.empty() ? "" : ", ") + p + "*";
    return Status::InvalidArgument(path + " holds dumps with several prefixes (" + names +
                                   "); name one: " + dir + "/<prefix>");
  }
  return groups.begin()->second;
}

Result<FlightRecorderImport> ImportFlightRecorder(const std::vector<std::string>& files, const std::string& dest) {
  if (files.empty()) return Status::InvalidArgument("no Flight Recorder dumps given");
  std::vector<RankDump> dumps;
  std::set<int32_t> seen;
  for (const std::string& f : files) {
    RankDump d;
    d.file = f;
    REPLAY_ASSIGN_OR_RETURN(d.doc, LoadDump(f));
    d.rank = d.doc.contains("rank") ? static_cast<int32_t>(IntOf(d.doc, "rank", -1)) : RankFromName(f, nullptr);
    if (d.rank < 0 && files.size() == 1) d.rank = 0;
    if (d.rank < 0) {
      return Status::InvalidArgument(f + ": cannot tell which rank it is of (Flight Recorder names dumps <prefix><rank>)");
    }
    if (!seen.insert(d.rank).second) return Status::InvalidArgument(f + ": a second dump of rank " + std::to_string(d.rank));
    dumps.push_back(std::move(d));
  }
  std::sort(dumps.begin(), dumps.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  Importer importer(std::move(dumps));
  return importer.Run(dest);
}

// ---------------------------------------------------------------------------
// Export

namespace {

// a * b, held at the int64 range: counts come from the trace, which may be damaged.
int64_t Times(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

std::string RanksText(const std::vector<int32_t>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

// The type ProcessGroupNCCL records for an operation of `kind` (profiling name
// "nccl:<type>"), of those every analyzer since dump version 2.4 knows; null
// for kinds it records nothing for (communicator creation and destruction).
// Collectives whose ranks pass different counts are written as all_to_all,
// which the analyzer compares by type and total size only.
const char* FrType(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce:
    case OpKind::kScan:
    case OpKind::kExscan: return "all_reduce";
    case OpKind::kBarrier: return "all_reduce_barrier";  // ProcessGroupNCCL::barrier: an allreduce of one float
    case OpKind::kBcast: return "broadcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllgather: return "all_gather";
    case OpKind::kReduceScatterBlock: return "reduce_scatter";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kAlltoall:
    case OpKind::kAllgatherv:
    case OpKind::kGatherv:
    case OpKind::kScatterv:
    case OpKind::kReduceScatter:
    case OpKind::kAlltoallv:
    case OpKind::kAlltoallw:
    case OpKind::kNeighborAllgather:
    case OpKind::kNeighborAllgatherv:
    case OpKind::kNeighborAlltoall:
    case OpKind::kNeighborAlltoallv:
    case OpKind::kNeighborAlltoallw: return "all_to_all";
    default: return nullptr;
  }
}

bool UnevenCollective(OpKind kind) {
  return kind == OpKind::kAllgatherv || kind == OpKind::kGatherv || kind == OpKind::kScatterv ||
         kind == OpKind::kReduceScatter || kind == OpKind::kAlltoallv || kind == OpKind::kAlltoallw ||
         kind == OpKind::kNeighborAllgatherv || kind == OpKind::kNeighborAlltoallv ||
         kind == OpKind::kNeighborAlltoallw || kind == OpKind::kNeighborAllgather ||
         kind == OpKind::kNeighborAlltoall;
}

// A process group as one rank writes it.
struct ExportPg {
  std::string name;            // "0" for WORLD, the communicator identity otherwise
  std::string desc;            // "default_pg" for WORLD, the lineage name otherwise
  std::vector<int32_t> ranks;  // global ranks, ascending
  size_t local_id = 0;         // pg_id: the order this rank first used it in
  uint64_t collective_seq = 0;  // the last collective's sequence number
  uint64_t p2p_seq = 0;
  uint64_t op_id = 0;
  uint64_t last_enqueued = 0, last_started = 0, last_completed = 0;

  int Local(int32_t world) const {
    auto it = std::lower_bound(ranks.begin(), ranks.end(), world);
    return it == ranks.end() || *it != world ? -1 : static_cast<int>(it - ranks.begin());
  }
};

// The frames of a call site as FR writes a stack: innermost first, as
// {name, filename, line}: the Python frames, then the native call site.
json FramesOf(const CallSite& site, size_t* python_frames) {
  json frames = json::array();
  for (const SourceFrame& f : site.python) {
    frames.push_back({{"name", f.function}, {"filename", f.file}, {"line", f.line}});
  }
  *python_frames = site.python.size();
  if (site.address != 0) {
    std::string name = site.symbol.empty() ? (site.module.empty() ? Hex(site.address) : BaseName(site.module) + "+" + Hex(site.offset))
                                           : site.symbol;
    std::string file = !site.file.empty() ? site.file : site.module;
    frames.push_back({{"name", name}, {"filename", file}, {"line", site.file.empty() ? 0 : site.line}});
  }
  return frames;
}

class RankDumpWriter {
 public:
  RankDumpWriter(const interop::RankTimeline& r, const std::vector<std::string>& apis,
                 analysis::SymbolResolver* symbols, bool as_json)
      : r_(r), apis_(apis), symbols_(*symbols), json_(as_json) {}

  json Run() {
    waited_.insert(r_.waited.begin(), r_.waited.end());
    for (size_t i = 0; i < r_.ops.size(); ++i) {
      const interop::TimelineOp& o = r_.ops[i];
      ExportPg* pg = Pg(o.comm);
      if (pg == nullptr) continue;
      if (o.collective()) {
        Collective(i, o, pg);
      } else if ((o.kind == OpKind::kSend || o.kind == OpKind::kRecv || o.kind == OpKind::kMrecv) && o.peer >= 0) {
        PointToPoint(i, o, pg);
      }
    }
    EndBatch();
    return Document();
  }

 private:
  // The group of communicator `comm` if this rank writes one for it: it has
  // more than one member and this rank is one of them.
  ExportPg* Pg(uint64_t comm) {
    auto found = pgs_.find(comm);
    if (found != pgs_.end()) return found->second.ranks.empty() ? nullptr : &found->second;
    ExportPg& pg = pgs_[comm];
    auto c = r_.comms.find(comm);
    if (c == r_.comms.end() || c->second.members.size() < 2) return nullptr;
    std::vector<int32_t> sorted = c->second.members;
    std::sort(sorted.begin(), sorted.end());
    if (!std::binary_search(sorted.begin(), sorted.end(), r_.rank)) return nullptr;
    const bool world = c->second.name == "WORLD";
    char id[24];
    std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(comm));
    pg.name = world ? "0" : id;
    pg.desc = world ? "default_pg" : c->second.name;
    pg.ranks = std::move(sorted);
    pg.local_id = order_.size();
    order_.push_back(comm);
    return &pg;
  }

  const char* Dtype(const interop::TimelineOp& o, int64_t* in, int64_t* out) {
    const char* dtype = DtypeToName(o.dtype);
    if (dtype != nullptr) return dtype;
    // No c10 type: bytes.
    if (o.bytes != 0 && o.count != 0) {
      int64_t scale = std::max<int64_t>(1, static_cast<int64_t>(o.bytes) / std::max<int64_t>(1, o.count));
      *in = Times(*in, scale);
      *out = Times(*out, scale);
    }
    return "Byte";
  }

  void Collective(size_t i, const interop::TimelineOp& o, ExportPg* pg) {
    const char* type = FrType(o.kind);
    if (type == nullptr) return;
    EndBatch();
    const int64_t size = static_cast<int64_t>(pg->ranks.size());
    const bool root = o.root >= 0 && static_cast<size_t>(o.root) < pg->ranks.size() && pg->ranks[static_cast<size_t>(o.root)] == r_.rank;
    int64_t in = o.count, out = o.count;
    bool no_in = false, no_out = false;  // an empty tensor list, as PyTorch passes off the root
    switch (o.kind) {
      case OpKind::kBarrier: in = out = 1; break;
      case OpKind::kAllgather: out = Times(o.count, size); break;
      case OpKind::kReduceScatterBlock: in = Times(o.count, size); break;
      case OpKind::kAlltoall:
        in = Times(o.count, size);
        out = Times(o.recv_count > 0 ? o.recv_count : o.count, size);
        break;
      case OpKind::kGather:
        out = Times(o.count, size);
        no_out = !root;
        break;
      case OpKind::kScatter:
        in = Times(o.count, size);
        no_in = !root;
        break;
      default:
        if (UnevenCollective(o.kind)) in = out = o.count;  // each rank its own count, both ways
        break;
    }
    const char* dtype = o.kind == OpKind::kBarrier ? "Float" : Dtype(o, &in, &out);
    pg->collective_seq = o.seq;
    ++pg->op_id;
    json e = Entry(o, pg, std::string("nccl:") + type, false);
    e["input_sizes"] = no_in ? json::array() : json::array({json::array({in})});
    e["input_dtypes"] = no_in ? json::array() : json::array({dtype});
    e["output_sizes"] = no_out ? json::array() : json::array({json::array({out})});
    e["output_dtypes"] = no_out ? json::array() : json::array({dtype});
    Add(std::move(e), i, o);
    pg->last_enqueued = std::max(pg->last_enqueued, o.seq);
    pg->last_started = std::max(pg->last_started, o.seq);
    if (o.end_ns >= 0) pg->last_completed = std::max(pg->last_completed, o.seq);
  }

  // Sends and receives go on a group of their two ranks, as ProcessGroupNCCL
  // runs them on a communicator of the two (its "low:high" key): PyTorch's
  // analyzer matches a send with its receive only in a group of two, and
  // numbers them apart from the group's collectives only there.
  ExportPg* PairPg(uint64_t comm, const ExportPg& parent, int32_t a, int32_t b) {
    const int32_t low = std::min(a, b), high = std::max(a, b);
    auto key = std::make_tuple(comm, low, high);
    auto it = pairs_.find(key);
    if (it != pairs_.end()) return &it->second;
    ExportPg& pg = pairs_[key];
    pg.name = parent.name + ":" + std::to_string(low) + "-" + std::to_string(high);
    pg.desc = parent.desc + " (" + std::to_string(low) + "," + std::to_string(high) + ")";
    pg.ranks = {low, high};
    pg.local_id = order_.size() + pair_order_.size();
    pair_order_.push_back(key);
    return &pg;
  }

  void PointToPoint(size_t i, const interop::TimelineOp& o, ExportPg* parent) {
    if (parent->Local(o.peer) < 0 || o.peer == r_.rank) return;
    ExportPg* pg = PairPg(o.comm, *parent, r_.rank, o.peer);
    const int me = pg->Local(r_.rank);
    const int peer = pg->Local(o.peer);
    // Sends and receives of one NCCL group are one coalesced launch: one
    // p2p_seq_id on each pair, closed by a "nccl:coalesced" entry.
    if (o.group == 0 || o.group != batch_group_) EndBatch();
    if (o.group == 0) {
      ++pg->p2p_seq;
    } else {
      batch_group_ = o.group;
      Batch& b = batch_[pg];
      if (b.ops++ == 0) ++pg->p2p_seq;
      b.start = std::max(b.start, o.start_ns);
      b.done = b.done && o.end_ns >= 0;
      b.end = std::max(b.end, o.end_ns);
      b.thread = o.thread;
    }
    ++pg->op_id;
    const bool send = o.kind == OpKind::kSend;
    std::string name = send ? "nccl:send " + std::to_string(me) + "->" + std::to_string(peer)
                            : "nccl:recv " + std::to_string(me) + "<-" + std::to_string(peer);
    int64_t in = o.count, out = o.count;
    const char* dtype = Dtype(o, &in, &out);
    json e = Entry(o, pg, name, true);
    // ProcessGroupNCCL records the one tensor as input and output both.
    e["input_sizes"] = json::array({json::array({in})});
    e["input_dtypes"] = json::array({dtype});
    e["output_sizes"] = json::array({json::array({out})});
    e["output_dtypes"] = json::array({dtype});
    Add(std::move(e), i, o);
  }

  // Closes the batches of grouped sends and receives with their
  // "nccl:coalesced" entries, one per pair.
  void EndBatch() {
    for (auto& [pg, b] : batch_) {
      interop::TimelineOp marker;
      marker.thread = b.thread;
      marker.start_ns = b.start;
      marker.end_ns = b.done ? b.end : -1;
      json e = Entry(marker, pg, "nccl:coalesced", true);
      e["input_sizes"] = json::array();
      e["input_dtypes"] = json::array();
      e["output_sizes"] = json::array();
      e["output_dtypes"] = json::array();
      e["frames"] = json::array();
      entries_.push_back(std::move(e));
      extras_.push_back({{"api", "nccl:coalesced"}});
    }
    batch_.clear();
    batch_group_ = 0;
  }

  // The fields every entry has, as ProcessGroupNCCL fills them with
  // TORCH_NCCL_ENABLE_TIMING (a start time and a duration).
  json Entry(const interop::TimelineOp& o, const ExportPg* pg, const std::string& profiling, bool p2p) {
    const bool done = o.end_ns >= 0;
    json e;
    e["record_id"] = entries_.size();
    e["pg_id"] = pg->local_id;
    e["process_group"] = json::array({pg->name, pg->desc});
    e["thread_name"] = "replay thread " + std::to_string(o.thread);
    e["thread_id"] = std::to_string(o.thread);
    e["collective_seq_id"] = pg->collective_seq;
    e["p2p_seq_id"] = pg->p2p_seq;
    e["op_id"] = pg->op_id;
    e["profiling_name"] = profiling;
    e["time_created_ns"] = o.start_ns;
    if (done) e["duration_ms"] = static_cast<double>(o.end_ns - o.start_ns) / 1e6;
    e["state"] = done ? "completed" : "started";
    e["time_discovered_started_ns"] = o.start_ns;
    e["time_discovered_completed_ns"] = done ? json(o.end_ns) : (json_ ? json(0) : json(nullptr));
    e["retired"] = done;
    e["timeout_ms"] = kDefaultTimeoutMs;
    e["is_p2p"] = p2p;
    return e;
  }

  void Add(json e, size_t i, const interop::TimelineOp& o) {
    json extra = {{"api", o.api < apis_.size() ? apis_[o.api] : std::string()}};
    if (!o.nonblocking) extra["blocking"] = true;
    if (waited_.count(i) != 0) extra["waited"] = true;
    e["frames"] = json::array();
    if (o.call_site != 0) {
      auto cached = sites_.find(o.call_site);
      if (cached == sites_.end()) {
        CallSite site = symbols_.Resolve(o.call_site, r_.header.modules, r_.python_sites);
        size_t python = 0;
        json frames = FramesOf(site, &python);
        cached = sites_.emplace(o.call_site, std::make_tuple(std::move(frames), python, site.address)).first;
      }
      e["frames"] = std::get<0>(cached->second);
      extra["call_site"] = Hex(std::get<2>(cached->second));
      if (std::get<1>(cached->second) > 0) extra["python_frames"] = std::get<1>(cached->second);
    }
    entries_.push_back(std::move(e));
    extras_.push_back(std::move(extra));
  }

  json Document() {
    json pg_config = json::object();
    json pg_status = json::object();
    std::vector<const ExportPg*> all;
    for (uint64_t comm : order_) all.push_back(&pgs_.at(comm));
    for (const auto& key : pair_order_) all.push_back(&pairs_.at(key));
    for (const ExportPg* each : all) {
      const ExportPg& pg = *each;
      pg_config[pg.name] = {{"name", pg.name}, {"desc", pg.desc}, {"ranks", RanksText(pg.ranks)}};
      json st = {{"last_enqueued_collective", pg.last_enqueued},
                 {"last_started_collective", pg.last_started},
                 {"last_completed_collective", pg.last_completed}};
      if (json_) {
        for (auto& v : st) v = std::to_string(v.get<uint64_t>());
      }
      pg_status[std::to_string(pg.local_id)] = st;
    }
    std::string comm_lib;
    for (const auto& [k, v] : r_.header.versions) {
      if (k == "nccl") comm_lib = v;
    }
    json doc = {{"version", kExportVersion}, {"comm_lib_version", comm_lib}, {"pg_config", pg_config},
                {"pg_status", pg_status}};
    if (!json_ || !entries_.empty()) doc["entries"] = std::move(entries_);
    // What FR has no field for and replay reads back (docs/flight-recorder.md).
    json modules = json::array();
    for (const Module& m : r_.header.modules) modules.push_back({{"path", m.path}, {"base", Hex(m.base)}, {"size", Hex(m.size)}});
    json comms = json::object();
    for (uint64_t comm : order_) comms[pgs_.at(comm).name] = {{"name", r_.comms.at(comm).name}, {"id", Hex(comm)}};
    json pairs = json::object();
    for (const auto& [key, pg] : pairs_) pairs[pg.name] = pgs_.at(std::get<0>(key)).name;
    doc["replay"] = {{"rank", r_.rank},
                     {"host", r_.host},
                     {"pid", r_.pid},
                     {"status", r_.status},
                     {"close_reason", std::string(CloseReasonName(r_.header.close_reason))},
                     {"start_ns", r_.start_ns},
                     {"end_ns", r_.end_ns},
                     {"comms", comms},
                     {"p2p_groups", pairs},
                     {"modules", modules},
                     {"entries", extras_}};
    return doc;
  }

  const interop::RankTimeline& r_;
  const std::vector<std::string>& apis_;
  analysis::SymbolResolver& symbols_;
  const bool json_;
  std::map<uint64_t, ExportPg> pgs_;
  std::vector<uint64_t> order_;  // groups written, by pg_id
  std::set<size_t> waited_;
  json entries_ = json::array();
  json extras_ = json::array();
  std::unordered_map<uint64_t, std::tuple<json, size_t, uint64_t>> sites_;  // call site -> frames, Python frames, address
  std::map<std::tuple<uint64_t, int32_t, int32_t>, ExportPg> pairs_;  // (comm, low, high)
  std::vector<std::tuple<uint64_t, int32_t, int32_t>> pair_order_;
  // The NCCL group of sends and receives being written, per pair.
  struct Batch {
    size_t ops = 0;
    int64_t start = 0;
    int64_t end = -1;
    bool done = true;
    uint32_t thread = 0;
  };
  std::map<ExportPg*, Batch> batch_;
  uint32_t batch_group_ = 0;
};

}  // namespace

Result<std::vector<std::string>> ExportFlightRecorder(const TraceReader& trace, const std::string& out_dir,
                                                      const FlightRecorderExportOptions& options) {
  REPLAY_RETURN_IF_ERROR(FileSystem::Default()->CreateDirs(out_dir, 0700));
  std::set<int32_t> wanted(options.ranks.begin(), options.ranks.end());
  std::vector<size_t> chosen;
  for (size_t i = 0; i < trace.ranks().size(); ++i) {
    if (wanted.empty() || wanted.count(trace.ranks()[i].rank) != 0) chosen.push_back(i);
  }
  ProgressTally progress(trace, chosen, options.progress);
  analysis::SymbolResolver symbols;
  std::vector<std::string> apis;
  std::vector<std::string> written;
  // A rank at a time: read as a stream, written, forgotten.
  for (size_t i : chosen) {
    ReadOptions stream;
    stream.stream = true;
    auto reader = trace.OpenRank(i, stream);
    if (!reader.ok()) {
      progress.RankDone();
      continue;
    }
    interop::RankTimeline r = interop::ScanRank(**reader, &apis);
    const uint64_t events = (*reader)->header().event_count;
    reader->reset();
    json doc = RankDumpWriter(r, apis, &symbols, options.json).Run();
    std::string path = out_dir + "/" + options.prefix + std::to_string(r.rank) + (options.json ? ".json" : "");
    std::string bytes = options.json ? JsonText(doc, 1) : interop::WritePickle(doc, {"process_group"});
    REPLAY_RETURN_IF_ERROR(FileSystem::Default()->WriteAtomic(path, bytes));
    written.push_back(path);
    progress.Events(events);
    progress.RankDone();
  }
  if (written.empty()) return Status::NotFound(trace.dir() + ": no rank to export");
  return written;
}

}  // namespace replay
