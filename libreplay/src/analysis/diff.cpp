#include "replay/diff.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "analysis/checks.h"
#include "analysis/diff_json.h"
#include "replay/event_format.h"
#include "trace/event_json.h"
#include "trace/python_sites.h"
#include "util/hash.h"

namespace replay {

bool DiffReport::diverged() const {
  if (!only_in_a.empty() || !only_in_b.empty()) return true;
  return std::any_of(ranks.begin(), ranks.end(), [](const RankDiff& r) { return r.diverged; });
}

namespace {

// Settings that differ from run to run of the same job by design: the job's
// identity, per-process paths and ports, besides those that differ by rank.
bool IsPerRunSetting(const std::string& key) {
  if (analysis::IsPerRankSetting(key)) return true;
  static const char* const kParts[] = {"JOBID", "JOB_ID", "NAMESPACE", "URI", "TMPDIR", "SESSION", "PORT",
                                       "_NONCE", "TOKEN", "HNP", "PMIX_SERVER", "STEP_ID", "BASE_PATH",
                                       "FILE_LOCATION", "UUID", "REPLAY_DIR"};
  std::string upper = key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::any_of(std::begin(kParts), std::end(kParts), [&](const char* p) { return upper.find(p) != std::string::npos; });
}

// Info facts that describe the process rather than what it did.
bool IsVolatileInfo(std::string_view key) {
  for (std::string_view p : {"pid", "host", "job", "time", "uuid", "path", "port"}) {
    if (key.find(p) != std::string_view::npos) return true;
  }
  return false;
}

// How one rank of one trace is compared: call sites as (module name, offset),
// API ids through the other trace's table.
class RankSide {
 public:
  RankSide(const RankReader& reader, const RankHeader* reference) : reader_(reader) {
    for (const Module& m : reader.header().modules) {
      std::string base = m.path.substr(m.path.rfind('/') == std::string::npos ? 0 : m.path.rfind('/') + 1);
      mods_.push_back({m.base, m.size, Hash64(base.data(), base.size())});
    }
    std::sort(mods_.begin(), mods_.end(), [](const Mod& a, const Mod& b) { return a.base < b.base; });
    const auto& names = reader.header().api_names;
    api_.resize(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      api_[i] = static_cast<uint16_t>(i);
      if (reference != nullptr) {
        auto it = std::find(reference->api_names.begin(), reference->api_names.end(), names[i]);
        api_[i] = it == reference->api_names.end() ? 0xffff : static_cast<uint16_t>(it - reference->api_names.begin());
      }
    }
    for (const Event& e : reader.events()) {
      if (e.kind == EventKind::kDrop) continue;
      if (e.kind == EventKind::kInfo && e.info_key() == kPythonSiteKey) {
        // A site is compared where it is used, by its frames and native site.
        if (auto site = DecodePythonSite(e.info_value())) {
          const uint64_t id = site->id;
          const uint64_t native = Site(site->native);
          site->id = site->native = 0;
          std::string text = EncodePythonSite(*site);
          python_sites_[id] = HashCombine(Hash64(text.data(), text.size()), native);
        }
        continue;
      }
      if (e.kind == EventKind::kInfo && IsVolatileInfo(e.info_key())) continue;
      // Clock readings differ from run to run by nature, in value and number.
      if (e.kind == EventKind::kEntropy && IsClock(e.entropy.source)) continue;
      threads_[e.thread].push_back(&e);
    }
  }

  const RankReader& reader() const { return reader_; }
  const std::map<uint32_t, std::vector<const Event*>>& threads() const { return threads_; }

  uint64_t Site(uint64_t address) const {
    if (address == 0) return 0;
    if (IsPythonSite(address)) {
      auto it = python_sites_.find(address & ~kPythonSiteTag);
      return it == python_sites_.end() ? address : it->second;
    }
    auto it = std::upper_bound(mods_.begin(), mods_.end(), address, [](uint64_t a, const Mod& m) { return a < m.base; });
    if (it != mods_.begin() && address - (it - 1)->base < (it - 1)->size) {
      return HashCombine((it - 1)->name_hash, address - (it - 1)->base);
    }
    return address;
  }
  uint16_t Api(uint16_t api) const { return api < api_.size() ? api_[api] : api; }

  // A copy with what legitimately differs between runs cleared.
  Event Normalized(const Event& e, bool sites) const {
    Event n = e;
    n.index = 0;
    n.time_ns = 0;
    n.thread = 0;
    n.call_site = sites ? Site(e.call_site) : 0;
    switch (e.kind) {
      case EventKind::kOp:
        n.op.api = Api(e.op.api);
        n.op.send_buf = n.op.recv_buf = n.op.stream = 0;
        break;
      case EventKind::kReturn: n.ret.api = Api(e.ret.api); break;
      case EventKind::kCompletion: n.completion.api = Api(e.completion.api); break;
      case EventKind::kTest: n.test.api = Api(e.test.api); break;
      case EventKind::kCommCreate:
        n.comm_create.api = Api(e.comm_create.api);
        n.comm_create.handle = 0;
        break;
      case EventKind::kCommFree: n.comm_free.api = Api(e.comm_free.api); break;
      case EventKind::kGroup: n.group.api = Api(e.group.api); break;
      case EventKind::kSeed: n.seed.state = 0; break;
      case EventKind::kCuda:
        n.cuda.stream = n.cuda.event = n.cuda.graph = 0;
        if (e.cuda.op == CudaOp::kStreamWaitEvent) n.cuda.other = 0;
        break;
      case EventKind::kSignal: n.signal.address = 0; break;
      default: break;
    }
    return n;
  }

 private:
  struct Mod {
    uint64_t base, size, name_hash;
  };
  const RankReader& reader_;
  std::vector<Mod> mods_;
  std::vector<uint16_t> api_;
  std::map<uint32_t, std::vector<const Event*>> threads_;
  std::unordered_map<uint64_t, uint64_t> python_sites_;  // id -> hash of its frames and native site
};

DiffEvent View(const Event& e, const RankHeader& h) { return {e.index, e.time_ns, FormatEvent(e, h), EventJson(e, h)}; }

// JSON fields that differ, besides those that always do.
std::vector<std::string> DifferingFields(const nlohmann::json& a, const nlohmann::json& b) {
  static const std::set<std::string> kIgnored = {"index", "time_ns", "thread", "call_site", "send_buf",
                                                 "recv_buf", "stream", "handle", "state", "address", "event", "graph"};
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  std::vector<std::string> out;
  for (const std::string& k : keys) {
    if (kIgnored.count(k)) continue;
    if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) out.push_back(k);
  }
  return out;
}

// A phrase for what differs, in the terms of the program.
std::string Describe(const Event& a, const Event& b, const std::vector<std::string>& fields, const RankHeader& ha) {
  auto has = [&](const char* f) { return std::find(fields.begin(), fields.end(), f) != fields.end(); };
  if (a.kind != b.kind) {
    return "a different event: " + std::string(EventKindName(a.kind)) + " in A, " + std::string(EventKindName(b.kind)) + " in B";
  }
  switch (a.kind) {
    case EventKind::kEntropy:
      return std::string(EntropySourceName(a.entropy.source)) + " returned different bytes";
    case EventKind::kSeed:
      return std::string(SeedSourceName(a.seed.source)) + " was seeded with a different value";
    case EventKind::kOp:
      if (has("api") || has("op")) return "a different call";
      if (has("send_hash") && fields.size() <= 3) return ha.ApiName(a.op.api) + " sent different data";
      break;
    case EventKind::kReturn:
    case EventKind::kCompletion:
      if (has("source")) return "a wildcard receive matched a different sender";
      if (has("recv_hash")) return "received different data";
      if (has("rc")) return "a different return code";
      break;
    case EventKind::kTest:
      return "a test/probe/wait-any had a different outcome";
    default:
      break;
  }
  if (fields.empty()) return "the call was made from a different call site";
  std::string s = "different ";
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i];
  return s;
}

RankDiff DiffRank(const RankReader& ra, const RankReader& rb, const DiffOptions& options) {
  RankSide a(ra, nullptr);
  RankSide b(rb, &ra.header());
  RankDiff d;
  d.rank = ra.rank();
  d.events_a = ra.events().size();
  d.events_b = rb.events().size();
  std::vector<uint32_t> threads;
  for (const auto& [t, v] : a.threads()) threads.push_back(t);
  for (const auto& [t, v] : b.threads()) {
    if (!a.threads().count(t)) threads.push_back(t);
  }
  static const std::vector<const Event*> kNone;
  auto events_of = [](const RankSide& s, uint32_t t) -> const std::vector<const Event*>& {
    auto it = s.threads().find(t);
    return it == s.threads().end() ? kNone : it->second;
  };
  for (uint32_t t : threads) {
    const auto& ea = events_of(a, t);
    const auto& eb = events_of(b, t);
    size_t k = 0;
    while (k < ea.size() && k < eb.size() &&
           a.Normalized(*ea[k], options.compare_call_sites) == b.Normalized(*eb[k], options.compare_call_sites)) {
      ++k;
    }
    if (k == ea.size() && k == eb.size()) continue;
    // Earliest in the run: A's event, or B's where A has ended.
    int64_t time = k < ea.size() ? ea[k]->time_ns : eb[k]->time_ns;
    int64_t realtime = k < ea.size() ? ra.header().start_realtime_ns + time : rb.header().start_realtime_ns + time;
    if (d.diverged && time >= d.time_ns) continue;
    RankDiff x;
    x.rank = d.rank;
    x.events_a = d.events_a;
    x.events_b = d.events_b;
    x.diverged = true;
    x.thread = t;
    x.matched = k;
    x.time_ns = time;
    x.realtime_ns = realtime;
    size_t from = k > static_cast<size_t>(options.context) ? k - static_cast<size_t>(options.context) : 0;
    for (size_t i = from; i < k; ++i) x.before.push_back(View(*ea[i], ra.header()));
    if (k < ea.size()) x.a = View(*ea[k], ra.header());
    if (k < eb.size()) x.b = View(*eb[k], rb.header());
    for (size_t i = k + 1; i < ea.size() && i <= k + static_cast<size_t>(options.context); ++i) x.after_a.push_back(View(*ea[i], ra.header()));
    for (size_t i = k + 1; i < eb.size() && i <= k + static_cast<size_t>(options.context); ++i) x.after_b.push_back(View(*eb[i], rb.header()));
    if (x.a && x.b) {
      nlohmann::json ja = EventToJson(a.Normalized(*ea[k], false), ra.header());
      nlohmann::json jb = EventToJson(b.Normalized(*eb[k], false), ra.header());
      x.fields = DifferingFields(ja, jb);
      if (options.compare_call_sites && a.Site(ea[k]->call_site) != b.Site(eb[k]->call_site)) x.fields.push_back("call_site");
      x.what = Describe(*ea[k], *eb[k], x.fields, ra.header());
    } else {
      x.what = std::string("trace ") + (x.a ? "B" : "A") + " ends here; " + (x.a ? "A" : "B") + " goes on";
    }
    d = std::move(x);
  }
  return d;
}

// Appends "env KEY: 'x' in A, 'y' in B" for each setting that differs.
void CompareSettings(const RankHeader& a, const RankHeader& b, std::vector<std::string>* out) {
  auto compare = [&](const KeyValues& x, const KeyValues& y, const char* what) {
    std::map<std::string, std::string> mx(x.begin(), x.end()), my(y.begin(), y.end());
    std::set<std::string> keys;
    for (auto& [k, v] : mx) keys.insert(k);
    for (auto& [k, v] : my) keys.insert(k);
    for (const std::string& k : keys) {
      if (IsPerRunSetting(k)) continue;
      auto ix = mx.find(k), iy = my.find(k);
      std::string vx = ix == mx.end() ? "<unset>" : "'" + EnvValueText(k, ix->second) + "'";
      std::string vy = iy == my.end() ? "<unset>" : "'" + EnvValueText(k, iy->second) + "'";
      if (vx != vy) out->push_back(std::string(what) + " " + k + ": " + vx + " in A, " + vy + " in B");
    }
  };
  compare(a.environment, b.environment, "env");
  compare(a.versions, b.versions, "version");
}

}  // namespace

Result<DiffReport> DiffTraces(const TraceReader& ta, const TraceReader& tb, const DiffOptions& options) {
  DiffReport report;
  report.trace_a = ta.dir();
  report.trace_b = tb.dir();
  std::map<int32_t, size_t> ia, ib;
  for (size_t i = 0; i < ta.ranks().size(); ++i) ia[ta.ranks()[i].rank] = i;
  for (size_t i = 0; i < tb.ranks().size(); ++i) ib[tb.ranks()[i].rank] = i;
  auto wanted = [&](int32_t r) {
    return options.ranks.empty() || std::find(options.ranks.begin(), options.ranks.end(), r) != options.ranks.end();
  };
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<int32_t> pair_ranks;
  for (auto& [r, i] : ia) {
    if (!wanted(r)) continue;
    auto it = ib.find(r);
    if (it == ib.end()) {
      report.only_in_a.push_back(r);
    } else {
      pairs.emplace_back(i, it->second);
      pair_ranks.push_back(r);
    }
  }
  for (auto& [r, i] : ib) {
    if (wanted(r) && !ia.count(r)) report.only_in_b.push_back(r);
  }
  for (const auto& [t, side] : {std::pair{&ta, "A"}, std::pair{&tb, "B"}}) {
    for (const TraceProblem& p : t->problems()) report.unread.push_back(std::string(side) + ": " + p.file + ": " + p.message);
  }
  std::vector<std::optional<RankDiff>> results(pairs.size());
  std::map<std::string, analysis::RankSet> settings;  // difference -> ranks
  std::vector<std::string> notes;
  std::vector<int32_t> not_compared;
  std::mutex mu;
  std::atomic<size_t> next{0};
  ReadProgress progress;
  progress.ranks = pairs.size();
  size_t readable = 0;
  auto work = [&] {
    for (size_t i = next++; i < pairs.size(); i = next++) {
      auto ra = ta.OpenRank(pairs[i].first);
      auto rb = tb.OpenRank(pairs[i].second);
      std::optional<RankDiff> d;
      std::vector<std::string> local_settings;
      std::string note;
      uint64_t events = 0;
      std::vector<std::string> damaged;
      for (const auto& [r, side] : {std::pair{&ra, "A"}, std::pair{&rb, "B"}}) {
        if (!r->ok()) continue;
        for (const std::string& p : (**r)->ReceivedBytesDamage()) {
          damaged.push_back(std::string(side) + ": rank " + std::to_string(pair_ranks[i]) + ": received bytes: " + p);
        }
      }
      if (ra.ok() && rb.ok() && (!(*ra)->header_ok() || !(*rb)->header_ok())) {
        // Call sites resolve through the header's modules, settings are in it.
        DiffOptions events_only = options;
        events_only.compare_call_sites = false;
        events = (*ra)->events().size() + (*rb)->events().size();
        d = DiffRank(**ra, **rb, events_only);
        note = "rank " + std::to_string(pair_ranks[i]) + ": call sites and settings not compared: its header in " +
               (!(*ra)->header_ok() ? "A" : "B") + " could not be read";
      } else if (ra.ok() && rb.ok()) {
        events = (*ra)->events().size() + (*rb)->events().size();
        d = DiffRank(**ra, **rb, options);
        CompareSettings((*ra)->header(), (*rb)->header(), &local_settings);
      } else {
        note = "rank " + std::to_string(pair_ranks[i]) + " not compared: " +
               (!ra.ok() ? "A: " + ra.status().message() : "B: " + rb.status().message());
      }
      std::lock_guard<std::mutex> lock(mu);
      results[i] = std::move(d);
      if (results[i]) ++readable;
      for (const std::string& x : local_settings) settings[x].Add(pair_ranks[i]);
      for (std::string& x : damaged) report.unread.push_back(std::move(x));
      if (!note.empty()) {
        notes.push_back(note);
        not_compared.push_back(pair_ranks[i]);
      }
      ++progress.ranks_done;
      progress.events_done += events;
      if (options.progress) options.progress(progress);
    }
  };
  int threads = options.threads > 0 ? options.threads
                                     : static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(pairs.size(), 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (!pairs.empty() && readable == 0) {
    return Status::Corruption("no rank could be read from both traces" + (notes.empty() ? "" : ": " + notes.front()));
  }
  for (auto& r : results) {
    if (r) report.ranks.push_back(std::move(*r));
  }
  int64_t earliest = INT64_MAX;
  for (const RankDiff& r : report.ranks) {
    if (r.diverged && r.realtime_ns < earliest) {
      earliest = r.realtime_ns;
      report.first_rank = r.rank;
    }
  }
  for (const auto& [what, ranks] : settings) {
    std::vector<int32_t> v = ranks.ToVector();
    report.settings.push_back((v.size() == 1 ? "rank " : "ranks ") + analysis::FormatRanks(v) + " " + what);
  }
  std::sort(notes.begin(), notes.end());
  report.notes = std::move(notes);
  std::sort(not_compared.begin(), not_compared.end());
  report.not_compared = std::move(not_compared);
  if (pairs.empty()) report.notes.push_back("no rank is in both traces");
  return report;
}

nlohmann::json DiffReportToJson(const DiffReport& r) {
  auto ev = [](const DiffEvent& e) { return nlohmann::json::parse(e.json, nullptr, false); };
  nlohmann::json j;
  j["a"] = r.trace_a;
  j["b"] = r.trace_b;
  j["diverged"] = r.diverged();
  j["first_rank"] = r.first_rank ? nlohmann::json(*r.first_rank) : nlohmann::json(nullptr);
  j["only_in_a"] = r.only_in_a;
  j["only_in_b"] = r.only_in_b;
  j["ranks"] = nlohmann::json::array();
  for (const RankDiff& d : r.ranks) {
    nlohmann::json x = {{"rank", d.rank}, {"diverged", d.diverged}, {"events_a", d.events_a}, {"events_b", d.events_b}};
    if (d.diverged) {
      x["thread"] = d.thread;
      x["matched"] = d.matched;
      x["time_ns"] = d.time_ns;
      x["realtime_ns"] = d.realtime_ns;
      x["what"] = d.what;
      x["fields"] = d.fields;
      x["before"] = nlohmann::json::array();
      for (const DiffEvent& e : d.before) x["before"].push_back(ev(e));
      x["event_a"] = d.a ? ev(*d.a) : nlohmann::json(nullptr);
      x["event_b"] = d.b ? ev(*d.b) : nlohmann::json(nullptr);
      x["after_a"] = nlohmann::json::array();
      for (const DiffEvent& e : d.after_a) x["after_a"].push_back(ev(e));
      x["after_b"] = nlohmann::json::array();
      for (const DiffEvent& e : d.after_b) x["after_b"].push_back(ev(e));
    }
    j["ranks"].push_back(x);
  }
  j["settings"] = r.settings;
  j["notes"] = r.notes;
  if (!r.not_compared.empty()) j["not_compared"] = r.not_compared;
  if (!r.unread.empty()) j["unread"] = r.unread;
  return j;
}

std::string DiffReportJson(const DiffReport& report, int indent) {
  return JsonText(DiffReportToJson(report), indent);
}

}  // namespace replay
