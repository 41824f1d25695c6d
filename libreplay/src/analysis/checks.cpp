#include "analysis/checks.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <set>

#include "analysis/taxonomy.h"
#include "bundle/redact.h"
#include "replay/event_format.h"
#include "util/json.h"

namespace replay::analysis {
namespace {

std::string Ranks(const std::vector<int32_t>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + FormatRanks(ranks);
}
std::string Ranks(const RankSet& ranks) { return Ranks(ranks.ToVector()); }

bool FinishedCleanly(const RankDigest& d) { return d.FinishedCleanly(); }

bool IsPointToPoint(OpKind kind) {
  return kind == OpKind::kSend || kind == OpKind::kRecv || kind == OpKind::kSendrecv ||
         kind == OpKind::kMrecv || kind == OpKind::kProbe;
}

Draft Make(FindingKind kind) {
  Draft f;
  f.kind = kind;
  Advice a = AdviceFor(kind);
  f.categories = std::move(a.categories);
  f.fix = std::move(a.fix);
  return f;
}

// Signature groups of one collective, the expected (majority) one first: the
// most ranks; on a tie the group whose call sites did the same last time.
std::vector<const SigGroup*> OrderedGroups(const Expanded& x) {
  std::vector<const SigGroup*> g;
  for (const SigGroup& s : x.sigs) g.push_back(&s);
  std::sort(g.begin(), g.end(), [](const SigGroup* a, const SigGroup* b) {
    if (a->count != b->count) return a->count > b->count;
    if (a->changed != b->changed) return !a->changed;
    return a->first_rank < b->first_rank;
  });
  return g;
}

std::vector<std::string> DifferingFields(const CollSignature& a, const CollSignature& b) {
  std::vector<std::string> f;
  if (a.kind != b.kind) return {"op"};
  if (a.nonblocking != b.nonblocking) f.push_back("blocking");
  if (a.api != b.api) f.push_back("call");
  // MPI matches type signatures: a derived type against a count of basic
  // elements is fine when the bytes agree.
  if (a.dtype == DataType::kDerived || b.dtype == DataType::kDerived) {
    if (a.bytes != b.bytes) f.push_back("bytes");
  } else {
    if (a.count != b.count) f.push_back("count");
    if (a.dtype != b.dtype) f.push_back("dtype");
  }
  if (a.redop != b.redop) f.push_back("redop");
  if (a.root != b.root) f.push_back("root");
  if (a.recv_count != b.recv_count) f.push_back("recv_count");
  if (a.recv_dtype != b.recv_dtype) f.push_back("recv_dtype");
  if (a.counts_hash != b.counts_hash) f.push_back("counts");
  return f;
}

std::string FieldValue(const SigGroup& g, const std::string& field) {
  const CollSignature& s = g.sig;
  if (field == "op" || field == "call") return g.api_name;
  if (field == "blocking") return s.nonblocking ? "non-blocking" : "blocking";
  if (field == "count") return "count " + std::to_string(s.count);
  if (field == "bytes") return std::to_string(s.bytes) + " bytes";
  if (field == "dtype") return std::string(DataTypeName(s.dtype));
  if (field == "redop") return std::string(RedOpName(s.redop));
  if (field == "root") return "root " + std::to_string(s.root);
  if (field == "recv_count") return "receive count " + std::to_string(s.recv_count);
  if (field == "recv_dtype") return "receive type " + std::string(DataTypeName(s.recv_dtype));
  if (field == "counts") return "per-rank counts #" + Hex(s.counts_hash).substr(2, 6);
  return field;
}

std::string SigText(const SigGroup& g) {
  const CollSignature& s = g.sig;
  std::string t = g.api_name;
  if (s.count != 0 || s.dtype != DataType::kUnknown) {
    t += " count=" + std::to_string(s.count) + " " + std::string(DataTypeName(s.dtype));
  }
  if (s.redop != RedOp::kNone) t += " " + std::string(RedOpName(s.redop));
  if (s.root >= 0) t += " root=" + std::to_string(s.root);
  if (s.recv_count != 0) t += " recv_count=" + std::to_string(s.recv_count);
  return t;
}

nlohmann::json SigJson(const SigGroup& g) {
  const CollSignature& s = g.sig;
  return {{"ranks", g.ranks.ToVector()},
          {"api", g.api_name},
          {"op", std::string(OpKindName(s.kind))},
          {"blocking", !s.nonblocking},
          {"count", s.count},
          {"dtype", std::string(DataTypeName(s.dtype))},
          {"bytes", s.bytes},
          {"redop", std::string(RedOpName(s.redop))},
          {"root", s.root},
          {"recv_count", s.recv_count}};
}

// Later findings of the same kind on one communicator are usually its
// consequences (a skipped call shifts every later sequence number); they are
// counted into the first one instead of reported.
class PerComm {
 public:
  // True the first time for `comm`: the caller then reports its finding at
  // `index`. Later calls are counted into that finding.
  bool Take(uint64_t comm, size_t index) {
    auto [it, fresh] = first_.try_emplace(comm, index);
    if (!fresh) ++later_[comm];
    return fresh;
  }
  void Annotate(std::vector<RankedFinding>* out, const std::string& what) const {
    for (const auto& [comm, n] : later_) {
      Draft& f = (*out)[first_.at(comm)].finding;
      f.facts["later"] = n;
      f.details.push_back("and " + std::to_string(n) + " later " + what + " on this communicator");
    }
  }

 private:
  std::unordered_map<uint64_t, size_t> first_;
  std::unordered_map<uint64_t, uint64_t> later_;
};

}  // namespace

const RankDigest* JobView::Rank(int32_t rank) const {
  auto it = by_rank.find(rank);
  return it == by_rank.end() ? nullptr : &digests[it->second];
}

std::string StatusWord(RankStatus status) {
  switch (status) {
    case RankStatus::kComplete: return "complete";
    case RankStatus::kSalvaged: return "salvaged";
    case RankStatus::kRunning: return "running";
    case RankStatus::kFailed: return "failed";
  }
  return "unknown";
}

bool IsPerRankSetting(const std::string& key) {
  static const char* const kPerRankParts[] = {"RANK", "PID", "VPID", "_LOCALID", "NODEID", "NODENAME",
                                              "HOSTNAME", "VISIBLE_DEVICES", "TOPOLOGY_ADDR", "GTIDS"};
  std::string upper = key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* part : kPerRankParts) {
    if (upper.find(part) != std::string::npos) return true;
  }
  static const char* const kPerProcess[] = {"OMPI_FILE_LOCATION", "PMIX_ID", "PMIX_SERVER_URI", "PMIX_SERVER_TMPDIR",
                                            "PMIX_SYSTEM_TMPDIR", "OMPI_MCA_orte_ess_node_rank",
                                            "OMPI_MCA_pmix_server_uri", "OMPI_COMM_WORLD_NODE_RANK",
                                            "mpi.world_rank", "launcher.local_rank"};
  for (const char* p : kPerProcess) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return false;
}

Expanded Expand(const JobView& job, const CollKey& key, const CollSummary& s) {
  Expanded x;
  for (const RankDigest& d : job.digests) {
    auto it = d.last_seq.find(key.comm);
    if (it != d.last_seq.end() && it->second >= key.seq) x.entered.Add(d.rank);
  }
  auto rest = [&](RankSet others) {  // entered ranks not in `others`
    RankSet r;
    for (int32_t rank : x.entered.ToVector()) {
      if (!others.Has(rank)) r.Add(rank);
    }
    return r;
  };
  auto name = [&](SigGroup* g) {
    const RankDigest* d = job.Rank(g->first_rank);
    g->api_name = d != nullptr ? d->Api(g->api) : "api#" + std::to_string(g->api);
  };
  RankSet others;
  for (const SigGroup& g : s.other_sigs()) others.Merge(g.ranks);
  if (s.sig.count > 0) {
    SigGroup g;
    g.sig = job.collectives.Signature(s.sig.hash);
    g.hash = s.sig.hash;
    g.count = s.sig.count;
    g.changed = s.sig.changed;
    g.first_rank = s.sig.first_rank;
    g.api = s.sig.api;
    g.call_site = s.sig.call_site;
    g.ranks = rest(others);
    x.sigs.push_back(std::move(g));
  }
  for (const SigGroup& g : s.other_sigs()) x.sigs.push_back(g);
  for (SigGroup& g : x.sigs) name(&g);
  if (s.out.count > 0) {
    // Ranks with an output: those that finished it (all of them, at level hash).
    RankSet not_first = s.stuck();
    not_first.Merge(s.in_progress());
    not_first.Merge(s.pending());
    for (const OutGroup& o : s.other_outs()) not_first.Merge(o.ranks);
    x.outs.push_back(OutGroup{s.out.hash, s.out.count, rest(not_first)});
  }
  for (const OutGroup& o : s.other_outs()) x.outs.push_back(o);
  if (s.pred.count > 0) {
    RankSet claimed;
    for (const PredClaim& p : s.other_preds()) claimed.Merge(p.ranks);
    x.preds.push_back(PredClaim{s.pred.comm, s.pred.seq, s.pred.count, rest(claimed)});
  }
  for (const PredClaim& p : s.other_preds()) x.preds.push_back(p);
  return x;
}

// ---------------------------------------------------------------------------
// Narrator

std::string Narrator::Call(const OpenCall& c, const RankDigest& d) const {
  std::string s = d.Api(c.api);
  if (c.kind == OpKind::kWait || c.kind == OpKind::kFinalize || c.kind == OpKind::kInit) return s;
  if (IsCollective(c.kind) && c.comm != 0) {
    return s + " on " + job_.lineage.Name(c.comm) + " #" + std::to_string(c.seq);
  }
  if (IsPointToPoint(c.kind)) {
    s += c.is_send ? " to " : " from ";
    s += c.peer == kAnySource ? "any rank" : "rank " + std::to_string(c.peer);
    s += c.tag == kAnyTag && !c.is_send ? " (any tag)" : " (tag " + std::to_string(c.tag) + ")";
    if (c.comm != 0) s += " on " + job_.lineage.Name(c.comm);
    return s;
  }
  if (c.comm != 0) s += " on " + job_.lineage.Name(c.comm);
  return s;
}

nlohmann::json Narrator::CallJson(const OpenCall& c, const RankDigest& d, bool returned) const {
  nlohmann::json j = {{"api", d.Api(c.api)}, {"op", std::string(OpKindName(c.kind))}, {"returned", returned},
                      {"entered_ns", c.enter_ns}};
  if (c.comm != 0) {
    j["comm"] = Hex(c.comm);
    j["comm_name"] = job_.lineage.Name(c.comm);
  }
  if (c.seq != 0) j["seq"] = c.seq;
  if (IsPointToPoint(c.kind)) {
    j["peer"] = c.peer;
    j["tag"] = c.tag;
  }
  if (!returned && Waited(d, c.enter_ns) >= 0) j["waited_ns"] = Waited(d, c.enter_ns);
  if (c.call_site != 0) j["call_site"] = FormatCallSite(Site(d.rank, c.call_site));
  return j;
}

int64_t Narrator::Waited(const RankDigest& d, int64_t enter_ns) const {
  int64_t until = -1;
  if (job_.live && d.status == RankStatus::kRunning) {
    until = job_.now_realtime_ns;
  } else if (d.fatal_signal != 0) {
    until = d.Abs(d.signal_ns);
  } else if (d.header.close_realtime_ns > 0) {
    until = d.header.close_realtime_ns;
  }
  return until < 0 ? -1 : std::max<int64_t>(0, until - d.Abs(enter_ns));
}

std::string Narrator::WaitPhrase(const RankDigest& d, int64_t enter_ns) const {
  int64_t waited = Waited(d, enter_ns);
  if (waited >= 0) return "for " + HumanDuration(waited);
  return "since " + HumanDuration(enter_ns) + " into its run";
}

std::string Narrator::Doing(int32_t rank) const {
  const RankDigest* d = job_.Rank(rank);
  if (d == nullptr) return "no trace was recorded for it";
  std::string death;
  if (d->fatal_signal != 0) {
    death = (IsCrashSignal(d->fatal_signal) ? "crashed with " : "killed by ") + SignalName(d->fatal_signal);
  } else if (d->aborted) {
    death = "called MPI_Abort";
  } else if (d->status == RankStatus::kSalvaged) {
    death = "killed without a recorded signal (SIGKILL or similar; trace salvaged)";
  }
  if (d->status == RankStatus::kFailed && death.empty()) {
    // Where its trace ends is where recording stopped, not where the rank did.
    std::string where;
    if (!d->blocked.empty()) {
      where = " inside " + Call(d->blocked.front().call, *d);
    } else if (d->last_call) {
      where = " after " + Call(*d->last_call, *d) + (d->last_call_returned ? " returned" : "");
    }
    return "its recording stopped" + where + " (" + WhyRecordingStopped(d->header) + "); it ran on unrecorded";
  }
  if (!d->blocked.empty()) {
    const BlockedCall& b = d->blocked.front();
    std::string s = (b.enqueued ? "enqueued " : b.stuck ? "blocked in " : "in ") + Call(b.call, *d);
    if (!b.waits_for.empty()) {
      s += " for ";
      for (size_t i = 0; i < b.waits_for.size() && i < 2; ++i) s += (i ? ", " : "") + Call(b.waits_for[i], *d);
      if (b.waits_for.size() > 2) s += " and " + std::to_string(b.waits_for.size() - 2) + " more";
    }
    s += " " + WaitPhrase(*d, b.call.enter_ns);
    if (b.stuck) s += b.enqueued ? ", never completed" : ", never returned";
    if (death.empty() && d->status == RankStatus::kComplete && d->header.close_reason == CloseReason::kExit &&
        d->mpi_init && !d->mpi_finalize) {
      // Made to exit while it waited: its launcher gone, or a thread of its own.
      death = "exited without calling MPI_Finalize";
    }
    if (!death.empty()) s += "; then " + death;
    return s;
  }
  std::string last;
  if (d->last_call) last = Call(*d->last_call, *d) + (d->last_call_returned ? " returned" : " (inside it)");
  if (!death.empty()) {
    return death + (last.empty() ? "" : " after " + last + (d->last_call_returned ? ", outside any communication call" : ""));
  }
  switch (d->status) {
    case RankStatus::kComplete:
      if (d->header.close_reason == CloseReason::kFinalize) return "finished (MPI_Finalize)";
      if (d->header.close_reason == CloseReason::kExit && d->mpi_init && !d->mpi_finalize) {
        return "exited without calling MPI_Finalize" + (last.empty() ? "" : ", after " + last);
      }
      return "exited (" + std::string(CloseReasonName(d->header.close_reason)) + ")";
    case RankStatus::kRunning:
      return "running, outside any communication call" + (last.empty() ? "" : "; last: " + last);
    case RankStatus::kFailed:  // told above
    case RankStatus::kSalvaged:
      break;
  }
  return "its trace ends" + (last.empty() ? "" : " after " + last);
}

nlohmann::json Narrator::DoingJson(int32_t rank) const {
  nlohmann::json j = {{"rank", rank}, {"doing", Doing(rank)}};
  const RankDigest* d = job_.Rank(rank);
  if (d == nullptr) {
    j["status"] = "untraced";
    return j;
  }
  j["status"] = StatusWord(d->status);
  if (d->header.close_reason != CloseReason::kNone) j["close_reason"] = std::string(CloseReasonName(d->header.close_reason));
  if (d->fatal_signal != 0) j["signal"] = SignalName(d->fatal_signal);
  if (!d->blocked.empty()) {
    const BlockedCall& b = d->blocked.front();
    j["blocked_in"] = CallJson(b.call, *d, false);
    j["blocked_in"]["stuck"] = b.stuck;
    if (!b.waits_for.empty()) {
      j["blocked_in"]["waits_for"] = nlohmann::json::array();
      for (const OpenCall& w : b.waits_for) j["blocked_in"]["waits_for"].push_back(CallJson(w, *d, false));
    }
  } else if (d->last_call) {
    j["last_call"] = CallJson(*d->last_call, *d, d->last_call_returned);
  }
  return j;
}

CommRef Narrator::Comm(uint64_t id) const {
  CommRef c;
  c.id = id;
  c.name = job_.lineage.Name(id);
  c.members = job_.lineage.Members(id);
  return c;
}

CallSite Narrator::Site(int32_t rank, uint64_t address) const {
  const RankDigest* d = job_.Rank(rank);
  if (d == nullptr || address == 0) {
    CallSite s;
    s.address = IsPythonSite(address) ? 0 : address;
    return s;
  }
  return job_.symbols.Resolve(address, d->header.modules, d->python_sites);
}

int Narrator::Deviation(int32_t rank) const {
  const RankDigest* d = job_.Rank(rank);
  if (d == nullptr) return 0;
  int n = 0;
  for (uint64_t t : d->recent_transitions) {
    auto it = job_.transitions.find(t);
    if (it != job_.transitions.end() && it->second == 1) ++n;
  }
  return n;
}

// ---------------------------------------------------------------------------
// Collectives: mismatched arguments, missing ranks, calls that never
// completed, outputs that differ.

namespace {

struct CollContext {
  const JobView& job;
  Narrator n;
  CollKey key;
  const CollSummary& s;
  const Expanded& x;
  const std::vector<int32_t>& members;
  const SigGroup& reference;  // the call most ranks made
  std::string what;           // "MPI_Allreduce on dup(WORLD) #3"
};

// "ranks 0,2 never returned; rank 3 crashed with SIGABRT inside it; rank 1 returned"
std::string Outcome(const CollContext& c) {
  std::vector<int32_t> stuck, died, done, pending;
  for (int32_t r : c.x.entered.ToVector()) {
    const RankDigest* d = c.job.Rank(r);
    if (c.s.stuck().Has(r) || c.s.in_progress().Has(r)) {
      (d != nullptr && (d->fatal_signal != 0 && IsCrashSignal(d->fatal_signal)) ? died : stuck).push_back(r);
    } else if (c.s.pending().Has(r)) {
      pending.push_back(r);
    } else {
      done.push_back(r);
    }
  }
  std::vector<std::string> parts;
  if (!stuck.empty()) parts.push_back(Ranks(stuck) + " never returned");
  for (int32_t r : died) parts.push_back("rank " + std::to_string(r) + " " + c.n.Doing(r));
  if (!pending.empty()) parts.push_back(Ranks(pending) + " started it and never waited for it");
  if (!done.empty()) parts.push_back(Ranks(done) + " finished it");
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i];
  return s;
}

void SetCommon(const CollContext& c, Finding* f) {
  f->comm = c.n.Comm(c.key.comm);
  f->seq = c.key.seq;
  f->op = c.reference.api_name;
  if (c.reference.call_site != 0) f->call_site = c.n.Site(c.reference.first_rank, c.reference.call_site);
}

struct Odd {
  const SigGroup* g;
  std::vector<std::string> fields;
};

// The groups that called something else than the expected group.
std::vector<Odd> OddGroups(const std::vector<const SigGroup*>& groups) {
  std::vector<Odd> odd;
  for (size_t i = 1; i < groups.size(); ++i) {
    auto fields = DifferingFields(groups[0]->sig, groups[i]->sig);
    if (!fields.empty()) odd.push_back({groups[i], std::move(fields)});
  }
  return odd;
}

void MismatchFinding(const CollContext& c, std::vector<RankedFinding>* out) {
  std::vector<const SigGroup*> groups = OrderedGroups(c.x);
  std::vector<Odd> odd = OddGroups(groups);
  Draft f = Make(FindingKind::kMismatch);
  SetCommon(c, &f);
  RankSet culprits;
  for (const Odd& o : odd) culprits.Merge(o.g->ranks);
  f.ranks = culprits.ToVector();
  const Odd& first = odd.front();
  const std::string& field = first.fields.front();
  RankSet expected;
  for (const SigGroup* g : groups) {
    bool is_odd = std::any_of(odd.begin(), odd.end(), [&](const Odd& o) { return o.g == g; });
    if (!is_odd) expected.Merge(g->ranks);
  }
  if (field == "op") {
    f.title = "mismatched collective on " + c.job.lineage.Name(c.key.comm) + " #" + std::to_string(c.key.seq) +
              ": " + Ranks(first.g->ranks) + " call" + (first.g->ranks.Count() == 1 ? "s " : " ") + first.g->api_name +
              ", " + Ranks(expected) + " call" + (expected.Count() == 1 ? "s " : " ") + groups[0]->api_name;
  } else {
    f.title = "mismatched " + c.what + ": " + Ranks(first.g->ranks) + " pass" +
              (first.g->ranks.Count() == 1 ? "es " : " ") + FieldValue(*first.g, field) + ", " +
              Ranks(expected) + " pass" + (expected.Count() == 1 ? "es " : " ") + FieldValue(*groups[0], field);
  }
  for (const SigGroup* g : groups) f.details.push_back(Ranks(g->ranks) + ": " + SigText(*g));
  std::string outcome = Outcome(c);
  if (!outcome.empty()) f.details.push_back("then: " + outcome);
  // Where the odd rank made the call: that is the code to read first.
  if (first.g->call_site != 0) f.call_site = c.n.Site(first.g->first_rank, first.g->call_site);
  f.facts["field"] = field;
  f.facts["fields"] = first.fields;
  f.facts["groups"] = nlohmann::json::array();
  for (const SigGroup* g : groups) {
    nlohmann::json j = SigJson(*g);
    j["expected"] = !culprits.Has(g->first_rank);
    f.facts["groups"].push_back(j);
  }
  f.facts["stuck"] = c.s.stuck().ToVector();
  out->push_back({std::move(f), 0, c.s.first_enter_abs});
}

// The (communicator, seq) a rank is stuck in: the collective it is inside, or
// the first collective its wait is for.
std::optional<CollKey> StuckIn(const RankDigest& d) {
  if (d.blocked.empty()) return std::nullopt;
  const BlockedCall& b = d.blocked.front();
  if (IsCollective(b.call.kind) && b.call.comm != 0 && b.call.seq != 0) return CollKey{b.call.comm, b.call.seq};
  for (const OpenCall& w : b.waits_for) {
    if (IsCollective(w.kind) && w.comm != 0 && w.seq != 0) return CollKey{w.comm, w.seq};
  }
  return std::nullopt;
}

void MissingFinding(const CollContext& c, const std::vector<int32_t>& missing, std::vector<RankedFinding>* out) {
  Draft f = Make(FindingKind::kMissingRanks);
  SetCommon(c, &f);
  // Culprits first: ranks whose control flow just went its own way.
  std::vector<std::pair<int, int32_t>> order;
  for (int32_t r : missing) order.emplace_back(-c.n.Deviation(r), r);
  std::sort(order.begin(), order.end());
  int deviating = 0;
  for (auto& [dev, r] : order) {
    f.ranks.push_back(r);
    if (dev < 0) ++deviating;
  }
  const RankSet& entered = c.x.entered;
  std::vector<int32_t> stuck = c.s.stuck().ToVector();
  if (!stuck.empty()) {
    f.title = Ranks(missing) + " never entered " + c.what + ", which " + Ranks(stuck) +
              (stuck.size() == 1 ? " is" : " are") + " blocked in";
  } else {
    f.title = Ranks(missing) + " never entered " + c.what + ", which " + Ranks(entered) + " called";
  }
  nlohmann::json missing_json = nlohmann::json::array();
  size_t shown = 0;
  for (int32_t r : f.ranks) {
    const RankDigest* d = c.job.Rank(r);
    nlohmann::json j = c.n.DoingJson(r);
    uint64_t last = 0;
    if (d != nullptr) {
      auto it = d->last_seq.find(c.key.comm);
      if (it != d->last_seq.end()) last = it->second;
    }
    j["last_seq_on_comm"] = last;
    j["deviates"] = c.n.Deviation(r) > 0;
    missing_json.push_back(j);
    if (shown++ < 16) {
      f.details.push_back("rank " + std::to_string(r) + ": " + c.n.Doing(r) +
                          (last > 0 ? " (its last call on " + c.job.lineage.Name(c.key.comm) + " was #" +
                                          std::to_string(last) + ")"
                                    : " (it made no call on " + c.job.lineage.Name(c.key.comm) + ")"));
    }
  }
  if (f.ranks.size() > shown) f.details.push_back("... and " + std::to_string(f.ranks.size() - shown) + " more");
  // A cycle: missing ranks stuck in a collective that ranks stuck here never
  // entered. Grouped by where they are stuck.
  RankSet stuck_here = c.s.stuck();
  std::map<std::pair<uint64_t, uint64_t>, std::pair<RankSet, RankSet>> cycles;  // there -> (missing ranks, waiters)
  for (int32_t r : f.ranks) {
    const RankDigest* d = c.job.Rank(r);
    if (d == nullptr) continue;
    std::optional<CollKey> there = StuckIn(*d);
    if (!there) continue;
    const CollSummary* other = c.job.collectives.Find(there->comm, there->seq);
    if (other == nullptr) continue;
    RankSet other_entered = Expand(c.job, *there, *other).entered;
    const auto& m = c.job.lineage.Members(there->comm);
    RankSet waiters;
    for (int32_t w : stuck_here.ToVector()) {
      if (std::find(m.begin(), m.end(), w) != m.end() && !other_entered.Has(w)) waiters.Add(w);
    }
    if (waiters.Empty()) continue;
    auto& entry = cycles[{there->comm, there->seq}];
    entry.first.Add(r);
    entry.second.Merge(waiters);
  }
  nlohmann::json cycle = nlohmann::json::array();
  for (const auto& [there, ranks] : cycles) {
    const auto& [in_there, waiters] = ranks;
    std::string there_name = c.job.lineage.Name(there.first) + " #" + std::to_string(there.second);
    bool one = in_there.Count() == 1;
    f.details.push_back("deadlock: " + Ranks(in_there) + (one ? " waits" : " wait") + " in " + there_name +
                        " for " + Ranks(waiters) + ", which " + (waiters.Count() == 1 ? "waits" : "wait") +
                        " here for " + (one ? "it" : "them"));
    cycle.push_back({{"ranks", in_there.ToVector()},
                     {"waits_in", {{"comm", Hex(there.first)}, {"comm_name", c.job.lineage.Name(there.first)}, {"seq", there.second}}},
                     {"for", waiters.ToVector()}});
  }
  // When the last of them got stuck: the moment the job stopped moving.
  int64_t since = c.s.last_enter_abs;
  for (int32_t r : f.ranks) {
    const RankDigest* d = c.job.Rank(r);
    if (d != nullptr && !d->blocked.empty()) since = std::max(since, d->Abs(d->blocked.front().call.enter_ns));
  }
  f.facts["stuck_since_realtime_ns"] = since;
  f.facts["entered"] = entered.ToVector();
  f.facts["stuck"] = stuck;
  f.facts["missing"] = missing_json;
  if (!cycle.empty()) f.facts["deadlock"] = cycle;
  double fraction = c.members.empty() ? 1 : static_cast<double>(missing.size()) / c.members.size();
  double score = (deviating > 0 ? 10 : 0) + (1 - fraction);
  out->push_back({std::move(f), score, c.s.first_enter_abs});
}

void NeverCompletedFinding(const CollContext& c, std::vector<RankedFinding>* out) {
  Draft f = Make(FindingKind::kNeverCompleted);
  SetCommon(c, &f);
  std::vector<int32_t> stuck = c.s.stuck().ToVector();
  std::vector<int32_t> pending = c.s.pending().ToVector();
  f.ranks = stuck;
  f.title = c.what + " never completed: all " + std::to_string(c.members.size()) + " members entered it, " +
            Ranks(stuck) + (stuck.size() == 1 ? " is" : " are") + " still inside";
  for (size_t i = 0; i < stuck.size() && i < 16; ++i) {
    f.details.push_back("rank " + std::to_string(stuck[i]) + ": " + c.n.Doing(stuck[i]));
  }
  for (size_t i = 0; i < pending.size() && i < 16; ++i) {
    f.details.push_back("rank " + std::to_string(pending[i]) + " started it and has not waited for it: " +
                        c.n.Doing(pending[i]));
  }
  f.facts["stuck"] = stuck;
  f.facts["pending"] = pending;
  f.facts["states"] = nlohmann::json::array();
  for (int32_t r : stuck) f.facts["states"].push_back(c.n.DoingJson(r));
  // Pending members are what the others wait for: rank this lower than a
  // completion that every member is waiting on.
  out->push_back({std::move(f), pending.empty() ? 1.0 : 0.0, c.s.first_enter_abs});
}

void OutputsFinding(const CollContext& c, std::vector<RankedFinding>* out) {
  std::vector<const OutGroup*> g;
  for (const OutGroup& o : c.x.outs) g.push_back(&o);
  std::sort(g.begin(), g.end(), [](const OutGroup* a, const OutGroup* b) {
    return a->count != b->count ? a->count > b->count : a->ranks.First() < b->ranks.First();
  });
  Draft f = Make(FindingKind::kOutputsDiffer);
  SetCommon(c, &f);
  RankSet odd;
  for (size_t i = 1; i < g.size(); ++i) odd.Merge(g[i]->ranks);
  f.ranks = odd.ToVector();
  f.title = "ranks received different results from " + c.what + ": " + Ranks(odd) + " differ from " +
            Ranks(g[0]->ranks);
  f.facts["groups"] = nlohmann::json::array();
  for (const OutGroup* o : g) {
    f.details.push_back(Ranks(o->ranks) + ": fingerprint " + Hex(o->hash));
    f.facts["groups"].push_back({{"fingerprint", Hex(o->hash)}, {"ranks", o->ranks.ToVector()}});
  }
  out->push_back({std::move(f), 0, c.s.first_enter_abs});
}

}  // namespace

void CheckCollectives(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  // Ranks not all of whose calls are known: none is judged missing.
  RankSet unknown;
  for (int32_t r : job.untraced) unknown.Add(r);
  for (int32_t r : job.incomplete) unknown.Add(r);
  PerComm broken;   // mismatch, missing or never completed: one per communicator
  PerComm outputs;
  std::vector<RankedFinding> local;
  for (const CollKey& key : job.collectives.SortedKeys()) {
    const CollSummary& s = *job.collectives.Find(key.comm, key.seq);
    const CommNode* node = job.lineage.Find(key.comm);
    static const std::vector<int32_t> kNone;
    const std::vector<int32_t>& members = node != nullptr ? node->members : kNone;
    if (members.size() == 1 || (node != nullptr && node->size == 1)) continue;
    // Most collectives are fine, and seen to be so without rebuilding who
    // did what: the same call by every member, none stuck, one result.
    const bool may_mismatch = !s.other_sigs().empty();
    const bool may_miss = !members.empty() && s.entered < members.size();
    const bool may_hang = !s.stuck().Empty();
    const bool may_differ = !s.other_outs().empty();
    if (!may_mismatch && !may_miss && !may_hang && !may_differ) continue;

    Expanded x = Expand(job, key, s);
    std::vector<const SigGroup*> groups = OrderedGroups(x);
    CollContext c{job, n, key, s, x, members, *groups[0],
                  groups[0]->api_name + " on " + job.lineage.Name(key.comm) + " #" + std::to_string(key.seq)};

    const bool mismatch = may_mismatch && !OddGroups(groups).empty();
    if (mismatch && broken.Take(key.comm, local.size())) MismatchFinding(c, &local);
    if (!mismatch && !members.empty()) {
      std::vector<int32_t> missing;
      bool missing_unknown_only = true;
      for (int32_t m : members) {
        if (x.entered.Has(m)) continue;
        missing.push_back(m);
        if (!unknown.Has(m)) missing_unknown_only = false;
      }
      if (!missing.empty() && !missing_unknown_only) {
        bool report = may_hang;
        if (!report && !job.live && s.in_progress().Empty()) {
          // Nobody waits for them (a rooted or non-blocking call returned): a
          // genuine difference in calls only if the missing ranks finished.
          report = std::all_of(missing.begin(), missing.end(), [&](int32_t m) {
            const RankDigest* d = job.Rank(m);
            return d != nullptr && FinishedCleanly(*d);
          });
        }
        if (report && broken.Take(key.comm, local.size())) MissingFinding(c, missing, &local);
      } else if (missing.empty() && may_hang) {
        if (broken.Take(key.comm, local.size())) NeverCompletedFinding(c, &local);
      }
    }
    if (!mismatch && may_differ && outputs.Take(key.comm, local.size())) OutputsFinding(c, &local);
  }
  broken.Annotate(&local, "collectives are incomplete or mismatched as well");
  outputs.Annotate(&local, "collectives also gave different results");
  for (RankedFinding& f : local) out->push_back(std::move(f));
}

// ---------------------------------------------------------------------------
// CUDA graphs: a collective captured into a graph runs at each launch of the
// graph, not when it was called. Every member captures it once, so the
// collective checks see it matched; a member that launched the graph fewer
// times leaves the others waiting in a run it never starts.

void CheckGraphLaunches(const JobView& job, std::vector<RankedFinding>* out) {
  struct Seen {
    int32_t rank;
    const RankDigest* d;
    const CapturedColl* c;
  };
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Seen>> by_coll;
  for (const RankDigest& d : job.digests) {
    for (const CapturedColl& c : d.captured) by_coll[{c.comm, c.seq}].push_back({d.rank, &d, &c});
  }
  Narrator n(job);
  std::set<uint64_t> reported;  // one finding per communicator: later ones follow from it
  for (const auto& [key, seen] : by_coll) {
    if (seen.size() < 2 || reported.count(key.first) != 0) continue;
    std::map<uint64_t, std::vector<int32_t>> by_launches;  // launches -> ranks
    for (const Seen& s : seen) by_launches[s.c->launches].push_back(s.rank);
    if (by_launches.size() < 2) continue;
    reported.insert(key.first);
    const uint64_t most = by_launches.rbegin()->first;
    const std::vector<int32_t>& full = by_launches.rbegin()->second;
    std::vector<int32_t> fewer;
    for (const auto& [launches, ranks] : by_launches) {
      if (launches != most) fewer.insert(fewer.end(), ranks.begin(), ranks.end());
    }
    const Seen& ref = seen.front();
    const std::string api = ref.d->Api(ref.c->api);
    const uint64_t least = by_launches.begin()->first;
    Draft f = Make(FindingKind::kMissingRanks);
    f.comm = n.Comm(key.first);
    f.seq = key.second;
    f.op = api;
    f.ranks = fewer;
    if (ref.c->call_site != 0) f.call_site = n.Site(ref.rank, ref.c->call_site);
    f.title = api + " on " + job.lineage.Name(key.first) + " #" + std::to_string(key.second) +
              ", captured into a CUDA graph, ran " + std::to_string(most) + (most == 1 ? " time" : " times") +
              " on " + Ranks(full) + " but " + std::to_string(least) + " on " + Ranks(by_launches.begin()->second) +
              ": " + (fewer.size() == 1 ? "it never launched" : "they never launched") +
              " the graph for run " + std::to_string(least + 1);
    nlohmann::json launches = nlohmann::json::object();
    for (const auto& [count, ranks] : by_launches) {
      std::string line = Ranks(ranks) + ": " + std::to_string(count) + (count == 1 ? " launch" : " launches");
      for (int32_t r : ranks) launches[std::to_string(r)] = count;
      f.details.push_back(line);
    }
    for (size_t i = 0; i < fewer.size() && i < 16; ++i) {
      f.details.push_back("rank " + std::to_string(fewer[i]) + ": " + n.Doing(fewer[i]));
    }
    f.facts["captured"] = true;
    f.facts["launches"] = launches;
    f.facts["missing"] = fewer;
    int64_t time = 0;
    for (const Seen& s : seen) time = std::max(time, s.d->Abs(s.c->enter_ns));
    out->push_back({std::move(f), 0, time});
  }
}

// ---------------------------------------------------------------------------
// Order: two ranks that both made two blocking collectives on different
// communicators, in opposite orders. It completed only because the library
// buffered; it deadlocks when it does not.

// The predecessor claims of a summary, without their ranks.
std::vector<std::pair<uint64_t, uint64_t>> Claims(const CollSummary& s) {
  std::vector<std::pair<uint64_t, uint64_t>> c;
  if (s.pred.count > 0) c.emplace_back(s.pred.comm, s.pred.seq);
  for (const PredClaim& p : s.other_preds()) c.emplace_back(p.comm, p.seq);
  return c;
}

RankSet ClaimRanks(const Expanded& x, uint64_t comm, uint64_t seq) {
  for (const PredClaim& p : x.preds) {
    if (p.comm == comm && p.seq == seq) return p.ranks;
  }
  return {};
}

void CheckOrder(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  std::set<std::pair<uint64_t, uint64_t>> reported;
  for (const CollKey& x : job.collectives.SortedKeys()) {
    const CollSummary& sx = *job.collectives.Find(x.comm, x.seq);
    for (const auto& [pcomm, pseq] : Claims(sx)) {
      const CollSummary* sy = job.collectives.Find(pcomm, pseq);
      if (sy == nullptr) continue;
      for (const auto& [qcomm, qseq] : Claims(*sy)) {
        if (qcomm != x.comm || qseq < x.seq) continue;
        auto pair = std::minmax(x.comm, pcomm);
        if (!reported.insert(pair).second) continue;
        // On ranks P, (pcomm, pseq) came before x; on ranks Q, x (or a later
        // call on its communicator) came before (pcomm, pseq).
        Expanded ex = Expand(job, x, sx);
        Expanded ey = Expand(job, CollKey{pcomm, pseq}, *sy);
        RankSet p_ranks = ClaimRanks(ex, pcomm, pseq);
        RankSet q_ranks = ClaimRanks(ey, qcomm, qseq);
        std::string a = job.lineage.Name(x.comm) + " #" + std::to_string(x.seq);
        std::string b = job.lineage.Name(pcomm) + " #" + std::to_string(pseq);
        const SigGroup& gx = *OrderedGroups(ex)[0];
        const SigGroup& gy = *OrderedGroups(ey)[0];
        Draft f = Make(FindingKind::kMismatch);
        f.comm = n.Comm(x.comm);
        f.seq = x.seq;
        f.op = gx.api_name;
        f.ranks = q_ranks.ToVector();
        f.title = "collectives on " + job.lineage.Name(x.comm) + " and " + job.lineage.Name(pcomm) +
                  " are called in opposite orders: " + Ranks(p_ranks) + " call " + gy.api_name + " on " + b +
                  " before " + gx.api_name + " on " + a + ", " + Ranks(q_ranks) + " the other way round";
        f.details.push_back("it completed this time because the library did not make the first call wait; "
                            "with larger messages or another transport it deadlocks");
        f.facts["field"] = "order";
        f.facts["first"] = {{"comm", Hex(pcomm)}, {"comm_name", job.lineage.Name(pcomm)}, {"seq", pseq},
                           {"ranks", p_ranks.ToVector()}};
        f.facts["second"] = {{"comm", Hex(x.comm)}, {"comm_name", job.lineage.Name(x.comm)}, {"seq", x.seq},
                            {"ranks", q_ranks.ToVector()}};
        if (gx.call_site != 0) f.call_site = n.Site(gx.first_rank, gx.call_site);
        out->push_back({std::move(f), 0, sx.first_enter_abs});
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Point-to-point: a receive nobody sends to, a send nobody receives.

void CheckPointToPoint(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  std::set<std::tuple<uint64_t, int32_t, int32_t, bool>> reported;
  // A peer whose trace lacks some of its calls may have matched them there.
  RankSet incomplete;
  for (int32_t r : job.incomplete) incomplete.Add(r);
  auto emit = [&](const RankDigest& d, const OpenCall& c, int32_t from, int32_t to, const std::string& why) {
    const int32_t peer = c.is_send ? to : from;
    if (peer == kAnySource ? !incomplete.Empty() : incomplete.Has(peer)) return;
    if (!reported.insert({c.comm, from, to, c.is_send}).second) return;
    Draft f = Make(FindingKind::kUnmatchedP2p);
    f.comm = n.Comm(c.comm);
    f.op = d.Api(c.api);
    f.ranks = {d.rank};
    f.title = (c.is_send ? "unmatched send: rank " : "unmatched receive: rank ") + std::to_string(d.rank) +
              " is blocked in " + n.Call(c, d) + why;
    int32_t other = c.is_send ? to : from;
    if (other >= 0) {
      f.details.push_back("rank " + std::to_string(other) + ": " + n.Doing(other));
      f.facts["peer_state"] = n.DoingJson(other);
    }
    if (c.call_site != 0) f.call_site = n.Site(d.rank, c.call_site);
    f.facts["call"] = n.CallJson(c, d, false);
    f.facts["from"] = from;
    f.facts["to"] = to;
    out->push_back({std::move(f), 0, d.Abs(c.enter_ns)});
  };
  for (const RankDigest& d : job.digests) {
    for (const BlockedCall& b : d.blocked) {
      if (!b.stuck) continue;
      std::vector<OpenCall> calls = b.waits_for;
      if (IsPointToPoint(b.call.kind)) calls.push_back(b.call);
      for (const OpenCall& c : calls) {
        if (!IsPointToPoint(c.kind) || c.comm == 0) continue;
        if (!c.is_send) {
          if (c.peer >= 0) {
            const ChannelSummary* ch = job.p2p.Find(c.comm, c.peer, d.rank);
            int64_t waiting = ch != nullptr ? ch->Unreceived(c.tag) : 0;
            if (waiting <= 0) {
              uint64_t sent = ch != nullptr ? ch->sent : 0;
              emit(d, c, c.peer, d.rank,
                   ": rank " + std::to_string(c.peer) + " sent it " + std::to_string(sent) + " message" +
                       (sent == 1 ? "" : "s") + " on this communicator, none of them unreceived with this tag");
            }
          } else if (c.peer == kAnySource) {
            int64_t waiting = 0;
            for (const auto& [k, ch] : job.p2p.Into(c.comm, d.rank)) waiting += std::max<int64_t>(0, ch->Unreceived(c.tag));
            if (waiting <= 0) emit(d, c, kAnySource, d.rank, ": no rank has sent it a message it has not received");
          }
        } else if (c.peer >= 0) {
          const RankDigest* peer = job.Rank(c.peer);
          bool peer_receiving = false;
          if (peer != nullptr) {
            for (const BlockedCall& pb : peer->blocked) {
              std::vector<OpenCall> pcs = pb.waits_for;
              pcs.push_back(pb.call);
              for (const OpenCall& pc : pcs) {
                if (!pc.is_send && IsPointToPoint(pc.kind) && pc.comm == c.comm &&
                    (pc.peer == d.rank || pc.peer == kAnySource)) {
                  peer_receiving = true;
                }
              }
            }
          }
          if (!peer_receiving) emit(d, c, d.rank, c.peer, ": rank " + std::to_string(c.peer) + " is not receiving from it");
        }
      }
    }
  }
  // Messages left unreceived by ranks that both finished.
  for (const auto& [key, ch] : job.p2p.all()) {
    if (ch.sent <= ch.received) continue;
    const RankDigest* from = job.Rank(key.from);
    const RankDigest* to = job.Rank(key.to);
    if (from == nullptr || to == nullptr || !FinishedCleanly(*from) || !FinishedCleanly(*to)) continue;
    if (incomplete.Has(key.to) || incomplete.Has(key.from)) continue;
    if (!reported.insert({key.comm, key.from, key.to, true}).second) continue;
    Draft f = Make(FindingKind::kUnmatchedP2p);
    f.comm = n.Comm(key.comm);
    f.ranks = {key.from};
    uint64_t left = ch.sent - ch.received;
    f.title = "unmatched send: rank " + std::to_string(key.from) + " sent " + std::to_string(left) + " message" +
              (left == 1 ? "" : "s") + " to rank " + std::to_string(key.to) + " on " + job.lineage.Name(key.comm) +
              " that it never received";
    for (const auto& [tag, sent] : ch.sent_by_tag) {
      auto r = ch.received_by_tag.find(tag);
      uint64_t got = r == ch.received_by_tag.end() ? 0 : r->second;
      if (sent > got) f.details.push_back("tag " + std::to_string(tag) + ": " + std::to_string(sent) + " sent, " + std::to_string(got) + " received");
    }
    f.facts["from"] = key.from;
    f.facts["to"] = key.to;
    f.facts["sent"] = ch.sent;
    f.facts["received"] = ch.received;
    out->push_back({std::move(f), 0, job.end_realtime_ns});
  }
}

// ---------------------------------------------------------------------------
// Errors, aborts and crashes.

void CheckErrors(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  struct Group {
    std::vector<int32_t> ranks;
    const ErrorRecord* first = nullptr;
    const RankDigest* first_rank = nullptr;
  };
  std::map<std::tuple<int, int32_t, std::string>, Group> errors;
  std::map<int, std::vector<const RankDigest*>> crashes;
  for (const RankDigest& d : job.digests) {
    for (const ErrorRecord& e : d.errors) {
      if (e.source == ErrorSource::kRecorder) continue;
      Group& g = errors[{static_cast<int>(e.source), e.code, e.message}];
      if (g.ranks.empty() || g.ranks.back() != d.rank) g.ranks.push_back(d.rank);
      if (g.first == nullptr || d.Abs(e.time_ns) < g.first_rank->Abs(g.first->time_ns)) {
        g.first = &e;
        g.first_rank = &d;
      }
    }
    if (d.fatal_signal != 0 && IsCrashSignal(d.fatal_signal)) crashes[d.fatal_signal].push_back(&d);
  }
  for (auto& [key, g] : errors) {
    const ErrorRecord& e = *g.first;
    const RankDigest& d = *g.first_rank;
    bool abort = e.message.rfind("MPI_Abort", 0) == 0;
    Draft f = Make(FindingKind::kError);
    Advice a = AdviceForError(e.source, abort);
    f.categories = a.categories;
    f.fix = a.fix;
    f.ranks = g.ranks;
    std::sort(f.ranks.begin(), f.ranks.end());
    f.title = Ranks(f.ranks) + ": " + e.message;
    if (e.after) {
      f.op = d.Api(e.after->api);
      if (e.after->comm != 0) f.comm = n.Comm(e.after->comm);
      f.seq = e.after->seq;
      if (!abort) f.details.push_back("after " + n.Call(*e.after, d) + " on rank " + std::to_string(d.rank));
    }
    if (e.call_site != 0) f.call_site = n.Site(d.rank, e.call_site);
    f.facts["source"] = std::string(ErrorSourceName(e.source));
    f.facts["code"] = e.code;
    f.facts["message"] = e.message;
    f.facts["abort"] = abort;
    out->push_back({std::move(f), abort ? 1.0 : 0.0, d.Abs(e.time_ns)});
  }
  for (auto& [signo, ranks] : crashes) {
    Draft f = Make(FindingKind::kError);
    Advice a = AdviceForSignal(signo);
    f.categories = a.categories;
    f.fix = a.fix;
    const RankDigest* first = ranks.front();
    for (const RankDigest* d : ranks) {
      f.ranks.push_back(d->rank);
      if (d->Abs(d->signal_ns) < first->Abs(first->signal_ns)) first = d;
    }
    f.title = Ranks(f.ranks) + " crashed with " + SignalName(signo);
    for (const RankDigest* d : ranks) {
      if (f.details.size() >= 16) break;
      f.details.push_back("rank " + std::to_string(d->rank) + ": " + n.Doing(d->rank) +
                          (d->signal_address != 0 ? " (fault address " + Hex(d->signal_address) + ")" : "") +
                          (d->last_mark.empty() ? "" : ", after mark " + d->last_mark));
    }
    if (first->last_call) {
      const OpenCall& c = *first->last_call;
      f.op = first->Api(c.api);
      if (c.comm != 0) f.comm = n.Comm(c.comm);
      f.seq = c.seq;
      if (c.call_site != 0) f.call_site = n.Site(first->rank, c.call_site);
    }
    f.facts["signal"] = SignalName(signo);
    f.facts["signo"] = signo;
    f.facts["states"] = nlohmann::json::array();
    for (const RankDigest* d : ranks) f.facts["states"].push_back(n.DoingJson(d->rank));
    out->push_back({std::move(f), 2, first->Abs(first->signal_ns)});
  }
}

// ---------------------------------------------------------------------------
// Ranks stopped from outside.

namespace {

// How a rank ended before its program finished, in the order that makes it
// the likelier cause: killed with no signal recorded (SIGKILL, a power cut),
// exited in the middle of an MPI program (given up, or its launcher lost), or
// killed by a signal the program does not raise itself (SIGTERM, SIGINT...),
// which a launcher sends to the rest once one rank is gone.
enum class Ending { kNone, kKilled, kExited, kSignalled };

Ending EndingOf(const RankDigest& d) {
  if (d.aborted) return Ending::kNone;
  if (d.fatal_signal != 0) return IsCrashSignal(d.fatal_signal) ? Ending::kNone : Ending::kSignalled;
  if (d.status == RankStatus::kSalvaged) return Ending::kKilled;
  if (d.status == RankStatus::kComplete && d.header.close_reason == CloseReason::kExit && d.mpi_init &&
      !d.mpi_finalize) {
    return Ending::kExited;
  }
  return Ending::kNone;
}

// "killed by SIGTERM", "exited without calling MPI_Finalize".
std::string HowEnded(const RankDigest& d) {
  switch (EndingOf(d)) {
    case Ending::kKilled: return "killed without a recorded signal (SIGKILL or similar)";
    case Ending::kExited: return "exited without calling MPI_Finalize";
    case Ending::kSignalled: return "killed by " + SignalName(d.fatal_signal);
    case Ending::kNone: break;
  }
  return "ended";
}
// "rank 1 was killed by SIGTERM", "ranks 0,1 exited without calling MPI_Finalize".
std::string RanksEnded(const std::vector<int32_t>& ranks, const std::string& how) {
  bool passive = how.rfind("killed", 0) == 0;
  return Ranks(ranks) + (passive ? (ranks.size() == 1 ? " was " : " were ") : " ") + how;
}

// "inside MPI_Init", "outside any communication call".
std::string WhereEnded(const RankDigest& d) {
  if (!d.blocked.empty()) return "inside " + d.Api(d.blocked.front().call.api);
  if (!d.last_call) return "before its first recorded call";
  if (!d.last_call_returned) return "inside " + d.Api(d.last_call->api);
  return "outside any communication call";
}

// When the rank ended, as near as its trace says: the signal, or its last
// event when none was recorded.
int64_t EndedAt(const RankDigest& d) { return d.Abs(d.fatal_signal != 0 ? d.signal_ns : d.last_ns); }

}  // namespace

void CheckEndings(const JobView& job, const std::vector<RankedFinding>& found, std::vector<RankedFinding>* out) {
  // A crash or an abort brings the job down: the launcher stopping the other
  // ranks is its consequence, and that finding says so.
  bool brought_down = std::any_of(job.digests.begin(), job.digests.end(), [](const RankDigest& d) {
    return d.aborted || (d.fatal_signal != 0 && IsCrashSignal(d.fatal_signal));
  });
  if (brought_down) return;
  // A rank a finding names is told of there. A job found hung, or with an
  // error, was likely stopped for it: the ranks its launcher stopped, by a
  // signal, by making them exit or by SIGKILL while they waited in a call, are
  // then no news.
  std::set<int32_t> named;
  bool explained = false;
  for (const RankedFinding& f : found) {
    named.insert(f.finding.ranks.begin(), f.finding.ranks.end());
    FindingKind k = f.finding.kind;
    explained |= k == FindingKind::kMismatch || k == FindingKind::kMissingRanks || k == FindingKind::kUnmatchedP2p ||
                 k == FindingKind::kNeverCompleted || k == FindingKind::kError;
  }
  std::vector<const RankDigest*> ended;
  for (const RankDigest& d : job.digests) {
    Ending e = EndingOf(d);
    if (e == Ending::kNone || named.count(d.rank) != 0) continue;
    if (explained && (e != Ending::kKilled || !d.blocked.empty())) continue;
    ended.push_back(&d);
  }
  if (ended.empty()) return;
  std::stable_sort(ended.begin(), ended.end(), [](const RankDigest* a, const RankDigest* b) {
    if (EndingOf(*a) != EndingOf(*b)) return EndingOf(*a) < EndingOf(*b);
    return EndedAt(*a) < EndedAt(*b);
  });
  const RankDigest& first = *ended.front();
  const Ending ending = EndingOf(first);
  const std::string how = HowEnded(first);
  std::vector<int32_t> lead, rest;
  std::set<std::string> lead_where, rest_how;
  for (const RankDigest* d : ended) {
    if (HowEnded(*d) == how) {
      lead.push_back(d->rank);
      lead_where.insert(WhereEnded(*d));
    } else {
      rest.push_back(d->rank);
      rest_how.insert(HowEnded(*d));
    }
  }
  std::sort(lead.begin(), lead.end());
  std::sort(rest.begin(), rest.end());
  Narrator n(job);
  Draft f = Make(FindingKind::kError);
  switch (ending) {
    case Ending::kKilled:
      f.categories = {"out of memory", "program failure"};
      f.fix = "find what killed the process (SIGKILL leaves no trace in it): the kernel log for the OOM "
              "killer, the launcher's or scheduler's log; fix the memory / core setting or batch size";
      break;
    case Ending::kExited:
      f.categories = {"program failure"};
      f.fix = "the program gave up (its standard error says why) or lost its launcher (mpirun killed "
              "or gone): an MPI program should leave through MPI_Finalize, or MPI_Abort on an error";
      break;
    default:
      f.categories = {"program failure"};
      f.fix = "the signal came from outside the program: a user, the scheduler (a time limit or "
              "preemption), a watchdog or the launcher; their logs say which. A job stopped because "
              "it hung is best caught before it is stopped, with `replay check --live`";
      break;
  }
  // Ranks with no trace at all were stopped, or never started, before they
  // recorded anything: when the others were stopped by a signal, the likelier
  // cause.
  std::vector<int32_t> untraced = ending == Ending::kSignalled ? job.untraced : std::vector<int32_t>{};
  if (!untraced.empty()) {
    f.title = Ranks(untraced) + " left no trace (stopped, or never started, before its first recorded call); then ";
  }
  f.title += RanksEnded(lead, how);
  if (lead_where.size() == 1 && (ending != Ending::kExited || lead_where.begin()->rfind("inside", 0) == 0)) {
    f.title += " " + *lead_where.begin();
  }
  if (!rest.empty()) {
    f.title += "; then " + (rest_how.size() == 1 ? RanksEnded(rest, *rest_how.begin())
                                                 : Ranks(rest) + (rest.size() == 1 ? " was" : " were") + " stopped");
  }
  bool whole_job = static_cast<int32_t>(ended.size()) == job.world_size && job.world_size > 1 && rest.empty();
  if (whole_job && ending != Ending::kExited) f.title += ": the whole job was stopped from outside";
  f.facts["states"] = nlohmann::json::array();
  for (const RankDigest* d : ended) {
    f.ranks.push_back(d->rank);
    if (f.details.size() < 16) f.details.push_back("rank " + std::to_string(d->rank) + ": " + n.Doing(d->rank));
    f.facts["states"].push_back(n.DoingJson(d->rank));
  }
  for (int32_t r : untraced) {
    f.ranks.push_back(r);
    if (f.details.size() < 16) f.details.push_back("rank " + std::to_string(r) + ": " + n.Doing(r));
    f.facts["states"].push_back(n.DoingJson(r));
  }
  std::sort(f.ranks.begin(), f.ranks.end());
  if (!first.blocked.empty() || (first.last_call && !first.last_call_returned)) {
    const OpenCall& c = !first.blocked.empty() ? first.blocked.front().call : *first.last_call;
    f.op = first.Api(c.api);
    if (c.comm != 0) f.comm = n.Comm(c.comm);
    f.seq = c.seq;
    if (c.call_site != 0) f.call_site = n.Site(first.rank, c.call_site);
  }
  if (first.fatal_signal != 0) f.facts["signal"] = SignalName(first.fatal_signal);
  f.facts["first"] = untraced.empty() ? first.rank : untraced.front();
  f.facts["how"] = how;
  f.facts["whole_job"] = whole_job;
  out->push_back({std::move(f), 1, EndedAt(first)});
}

// ---------------------------------------------------------------------------
// NaN / Inf: the ranks that sent one before they had received any.

// Where what a rank had received was counted on samples only, whether a
// NaN/Inf another rank sent earlier could have reached it before its own: one
// sent into a communicator it belongs to, or to it. The job's first is never
// passed over: nothing was sent with one before it.
class NanReach {
 public:
  explicit NanReach(const JobView& job) {
    for (const RankDigest& d : job.digests) {
      for (const NanOrigin& s : d.nan_sent) {
        Note(&first_[{s.comm, s.peer}], d.Abs(s.time_ns), d.rank);
      }
    }
  }

  bool Reached(const RankDigest& d) const {
    const NanOrigin& o = *d.nan_origin;
    if (!o.after_sampled_receive) return false;
    const int64_t before = d.Abs(o.time_ns);
    for (const CommRecord& c : d.comms) {
      for (int32_t to : {kNoPeer, d.rank}) {
        auto it = first_.find({c.id, to});
        if (it != first_.end() && it->second.EarlierFromOther(before, d.rank)) return true;
      }
    }
    return false;
  }

 private:
  // The two earliest senders, so that a rank's own sending can be left out.
  struct Earliest {
    int64_t time[2] = {0, 0};
    int32_t rank[2] = {-1, -1};
    bool EarlierFromOther(int64_t before, int32_t self) const {
      for (int i = 0; i < 2; ++i) {
        if (rank[i] >= 0 && rank[i] != self) return time[i] < before;
      }
      return false;
    }
  };
  static void Note(Earliest* e, int64_t time, int32_t rank) {
    if (e->rank[0] < 0 || time < e->time[0]) {
      if (e->rank[0] != rank) {
        e->time[1] = e->time[0];
        e->rank[1] = e->rank[0];
      }
      e->time[0] = time;
      e->rank[0] = rank;
    } else if (rank != e->rank[0] && (e->rank[1] < 0 || time < e->time[1])) {
      e->time[1] = time;
      e->rank[1] = rank;
    }
  }
  std::map<std::pair<uint64_t, int32_t>, Earliest> first_;
};

void CheckNanInf(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  const NanReach reach(job);
  struct Group {
    std::vector<const RankDigest*> ranks;
    int64_t time = 0;
  };
  std::map<std::tuple<uint64_t, uint64_t, int32_t>, Group> groups;
  for (const RankDigest& d : job.digests) {
    if (!d.nan_origin || reach.Reached(d)) continue;
    const NanOrigin& o = *d.nan_origin;
    Group& g = groups[{o.comm, o.seq, o.peer}];
    int64_t t = d.Abs(o.time_ns);
    if (g.ranks.empty() || t < g.time) g.time = t;
    g.ranks.push_back(&d);
  }
  std::vector<Group*> ordered;
  for (auto& [k, g] : groups) ordered.push_back(&g);
  std::sort(ordered.begin(), ordered.end(), [](const Group* a, const Group* b) { return a->time < b->time; });
  for (size_t i = 0; i < ordered.size() && i < 3; ++i) {
    const Group& g = *ordered[i];
    const RankDigest& d = *g.ranks.front();
    const NanOrigin& o = *d.nan_origin;
    Draft f = Make(FindingKind::kNanInf);
    for (const RankDigest* r : g.ranks) f.ranks.push_back(r->rank);
    std::sort(f.ranks.begin(), f.ranks.end());
    OpenCall c;
    c.api = o.api;
    c.comm = o.comm;
    c.seq = o.seq;
    c.kind = o.seq != 0 ? OpKind::kAllreduce : OpKind::kSend;
    c.peer = o.peer;
    c.is_send = o.seq == 0;
    std::string what = o.seq != 0 ? d.Api(o.api) + " on " + job.lineage.Name(o.comm) + " #" + std::to_string(o.seq)
                                  : n.Call(c, d);
    std::string values = (o.nan != 0 ? std::to_string(o.nan) + " NaN" : "") +
                         (o.nan != 0 && o.inf != 0 ? " and " : "") +
                         (o.inf != 0 ? std::to_string(o.inf) + " Inf" : "");
    f.title = Ranks(f.ranks) + " sent " + values + " into " + what + " without having received any" +
              (i == 0 ? ": the first NaN/Inf of the job" : "");
    if (o.comm != 0) f.comm = n.Comm(o.comm);
    f.seq = o.seq;
    f.op = d.Api(o.api);
    if (!o.mark.empty()) f.details.push_back("after mark " + o.mark);
    if (o.call_site != 0) f.call_site = n.Site(d.rank, o.call_site);
    f.facts["nan"] = o.nan;
    f.facts["inf"] = o.inf;
    f.facts["mark"] = o.mark;
    f.facts["first"] = i == 0;
    if (o.peer != kNoPeer) f.facts["peer"] = o.peer;
    out->push_back({std::move(f), i == 0 ? 1.0 : 0.0, g.time});
  }
  if (!ordered.empty()) return;
  // No rank is seen sending one: the first operation whose result held one,
  // when nothing it was given was fingerprinted.
  std::map<std::pair<uint64_t, uint64_t>, Group> results;
  for (const RankDigest& d : job.digests) {
    if (!d.nan_received || d.nan_received->seq == 0) continue;
    const NanOrigin& o = *d.nan_received;
    Group& g = results[{o.comm, o.seq}];
    int64_t t = d.Abs(o.time_ns);
    if (g.ranks.empty() || t < g.time) g.time = t;
    g.ranks.push_back(&d);
  }
  const Group* first = nullptr;
  for (const auto& [k, g] : results) {
    if (first == nullptr || g.time < first->time) first = &g;
  }
  if (first == nullptr) return;
  const RankDigest& d = *first->ranks.front();
  const NanOrigin& o = *d.nan_received;
  std::vector<int32_t> received;
  for (const RankDigest* r : first->ranks) received.push_back(r->rank);
  std::sort(received.begin(), received.end());
  Draft f = Make(FindingKind::kNanInf);
  const std::string what = d.Api(o.api) + " on " + job.lineage.Name(o.comm) + " #" + std::to_string(o.seq);
  f.title = "the first NaN/Inf of the job came out of " + what + " (" + Ranks(received) +
            " received it); which rank's input held it is not known: the operation ran in place and nothing "
            "fingerprinted its input";
  f.details.push_back("NCCL tells its profiler of an operation after launching it, so the input of an in-place one "
                      "is gone by then; record with a dynamically loaded libnccl.so.2 to fingerprint it");
  if (!o.mark.empty()) f.details.push_back("after mark " + o.mark);
  f.comm = n.Comm(o.comm);
  f.seq = o.seq;
  f.op = d.Api(o.api);
  f.facts["nan"] = o.nan;
  f.facts["inf"] = o.inf;
  f.facts["mark"] = o.mark;
  f.facts["first"] = true;
  f.facts["received_by"] = received;
  f.facts["origin_known"] = false;
  out->push_back({std::move(f), 1.0, first->time});
}

// ---------------------------------------------------------------------------
// Devices: two members of one communicator on one device of one host.

void CheckDevices(const JobView& job, std::vector<RankedFinding>* out) {
  Narrator n(job);
  std::map<std::tuple<uint64_t, std::string, int32_t>, std::vector<int32_t>> users;
  for (const RankDigest& d : job.digests) {
    for (const CommRecord& c : d.comms) {
      if (c.device >= 0) users[{c.id, d.header.host, c.device}].push_back(d.rank);
    }
  }
  for (auto& [key, ranks] : users) {
    if (ranks.size() < 2) continue;
    auto& [comm, host, device] = key;
    Draft f = Make(FindingKind::kDevice);
    f.comm = n.Comm(comm);
    f.ranks = ranks;
    f.title = Ranks(ranks) + " of " + job.lineage.Name(comm) + " all use device " + std::to_string(device) +
              " on " + host;
    f.facts["host"] = host;
    f.facts["device"] = device;
    out->push_back({std::move(f), 0, job.start_realtime_ns});
  }
}

// ---------------------------------------------------------------------------
// Configuration: settings and versions that differ across ranks.

void CheckConfig(const JobView& job, std::vector<RankedFinding>* out) {
  if (job.digests.size() < 2) return;
  // key -> value -> ranks; an unset key is the value "<unset>" on that rank.
  std::map<std::string, std::map<std::string, RankSet>> values;
  bundle::Redactor redactor;
  auto shown = [&](const std::string& k, const std::string& v) {
    std::string why;
    return job.options.redact ? redactor.RedactValue(k, v, &why) : v;
  };
  RankSet all;
  for (const RankDigest& d : job.digests) {
    if (!d.header_problem.empty()) continue;  // its settings are not known
    all.Add(d.rank);
    for (const auto& [k, v] : d.header.environment) {
      if (!IsPerRankSetting(k)) values["env " + k][shown(k, v)].Add(d.rank);
    }
    for (const auto& [k, v] : d.header.versions) values["version " + k][v].Add(d.rank);
    for (const auto& [k, v] : d.info) {
      if (!IsPerRankSetting(k)) values["info " + k][shown(k, v)].Add(d.rank);
    }
  }
  Draft f = Make(FindingKind::kConfig);
  RankSet odd;
  nlohmann::json differing = nlohmann::json::array();
  for (auto& [key, by_value] : values) {
    RankSet have;
    for (auto& [v, ranks] : by_value) have.Merge(ranks);
    if (have.Count() < all.Count() && key.rfind("env ", 0) == 0) {
      RankSet unset;
      for (int32_t r : all.ToVector()) {
        if (!have.Has(r)) unset.Add(r);
      }
      by_value["<unset>"] = unset;
    }
    if (by_value.size() < 2) continue;
    std::vector<std::pair<std::string, RankSet>> sorted(by_value.begin(), by_value.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      size_t na = a.second.Count(), nb = b.second.Count();
      return na != nb ? na > nb : a.second.First() < b.second.First();
    });
    std::string line = key.substr(key.find(' ') + 1) + ":";
    nlohmann::json j = {{"source", key.substr(0, key.find(' '))}, {"key", key.substr(key.find(' ') + 1)}, {"values", nlohmann::json::array()}};
    for (size_t i = 0; i < sorted.size(); ++i) {
      line += (i ? "; " : " ") + Ranks(sorted[i].second) + " '" + sorted[i].first + "'";
      if (i > 0) odd.Merge(sorted[i].second);
      j["values"].push_back({{"value", sorted[i].first}, {"ranks", sorted[i].second.ToVector()}});
    }
    f.details.push_back(line);
    differing.push_back(j);
  }
  if (differing.empty()) return;
  f.ranks = odd.ToVector();
  f.title = "configuration differs across ranks: " + std::to_string(differing.size()) + " setting" +
            (differing.size() == 1 ? "" : "s") + " (" + Ranks(odd) + " differ from the rest)";
  f.facts["settings"] = differing;
  out->push_back({std::move(f), 0, job.start_realtime_ns});
}

// ---------------------------------------------------------------------------
// Stragglers: the last rank to arrive, consistently and by a margin.

void CheckStragglers(const JobView& job, std::vector<RankedFinding>* out) {
  const CheckOptions& o = job.options;
  std::unordered_map<int32_t, std::vector<int64_t>> margins;
  for (const CollKey& key : job.collectives.SortedKeys()) {
    const CollSummary& s = *job.collectives.Find(key.comm, key.seq);
    if (!s.blocking || s.timed < 2 || s.sig_groups() != 1 || s.min2_ns == INT64_MAX) continue;
    const auto& members = job.lineage.Members(key.comm);
    if (members.size() < 2 || s.timed != members.size()) continue;
    margins[s.min1_rank].push_back(s.min2_ns - s.min1_ns);
  }
  int64_t span = std::max<int64_t>(1, job.end_realtime_ns - job.start_realtime_ns);
  for (auto& [rank, m] : margins) {
    const RankDigest* d = job.Rank(rank);
    if (d == nullptr) continue;
    uint64_t n = d->blocking_done;
    if (m.size() < static_cast<size_t>(o.straggler_min_samples) ||
        static_cast<double>(m.size()) < o.straggler_fraction * static_cast<double>(n)) {
      continue;
    }
    std::sort(m.begin(), m.end());
    int64_t median = m[m.size() / 2];
    int64_t total = 0;
    for (int64_t x : m) total += x;
    double share = static_cast<double>(total) / static_cast<double>(span);
    if (median < o.straggler_min_margin_ns || share < o.straggler_min_share) continue;
    Draft f = Make(FindingKind::kStraggler);
    f.ranks = {rank};
    char pct[16];
    std::snprintf(pct, sizeof(pct), "%.0f%%", share * 100);
    f.title = "rank " + std::to_string(rank) + " is the last to arrive at " + std::to_string(m.size()) + " of its " +
              std::to_string(n) + " blocking collectives; the others wait for it " + HumanDuration(median) +
              " each (median), " + HumanDuration(total) + " in all (" + pct + " of the run)";
    f.facts["last_arrivals"] = m.size();
    f.facts["collectives"] = n;
    f.facts["median_wait_ns"] = median;
    f.facts["total_wait_ns"] = total;
    f.facts["share"] = share;
    f.details.push_back("host " + d->header.host);
    out->push_back({std::move(f), share, job.start_realtime_ns});
  }
}

}  // namespace replay::analysis
