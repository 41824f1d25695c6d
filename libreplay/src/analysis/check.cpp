#include "replay/check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "analysis/check_json.h"
#include "analysis/checks.h"
#include "replay/event_format.h"
#include "util/json.h"

namespace replay {

std::string_view FindingKindName(FindingKind kind) {
  static constexpr std::string_view kNames[] = {
      "mismatch", "error", "missing_ranks", "unmatched_p2p", "never_completed",
      "nan_inf",  "outputs_differ", "device", "config", "straggler"};
  static_assert(std::size(kNames) == kFindingKindCount);
  size_t i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string NativeSite(const CallSite& s) {
  if (s.address == 0) return "";
  if (s.module.empty()) return Hex(s.address);
  std::string where = BaseName(s.module) + "+" + Hex(s.offset);
  if (s.symbol.empty()) return where;
  std::string source = s.file.empty() ? "" : " at " + BaseName(s.file) + ":" + std::to_string(s.line);
  return s.symbol + "+" + Hex(s.symbol_offset) + source + " (" + where + ")";
}

}  // namespace

std::string FormatCallSite(const CallSite& s) {
  std::string native = NativeSite(s);
  if (s.python.empty()) return native.empty() ? "unknown" : native;
  // The innermost frames say where; three are enough to tell callers apart.
  std::string text;
  for (size_t i = 0; i < s.python.size() && i < 3; ++i) {
    const SourceFrame& f = s.python[i];
    if (i > 0) text += " < ";
    text += f.function + " (" + BaseName(f.file) + ":" + std::to_string(f.line) + ")";
  }
  if (!native.empty()) text += " via " + native;
  return text;
}

namespace {

using analysis::JobView;
using analysis::RankDigest;

// Long enough that a job stopped while healthy (killed by a timeout in the
// middle of an allreduce) is not a hang, short enough for --live to name a
// hang within a second.
constexpr int64_t kDefaultMinWaitNs = 500'000'000;

int64_t RealtimeNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Reads every rank, in parallel, into `job`. Returns the ranks that could not be read.
std::vector<std::string> ReadRanks(const TraceReader& trace, const analysis::DigestOptions& digest_options,
                                   const CheckOptions& options, JobView* job) {
  const size_t n = trace.ranks().size();
  std::vector<std::optional<RankDigest>> slots(n);
  std::vector<std::string> unreadable;
  std::mutex mu;
  std::atomic<size_t> next{0};
  ProgressTally progress(trace, {}, options.progress);
  analysis::DigestOptions walk_options = digest_options;
  walk_options.progress = &progress;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      ReadOptions stream;
      stream.stream = true;
      auto reader = trace.OpenRank(i, stream);
      if (!reader.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        unreadable.push_back(trace.ranks()[i].name + ": " + reader.status().message());
        progress.RankDone();
        continue;
      }
      // Collectives the rank is done with go into the index as the rank is read.
      analysis::DigestOptions rank_options = walk_options;
      const int32_t rank = (*reader)->rank();
      const int64_t start = (*reader)->header().start_realtime_ns;
      rank_options.flush = [&](std::vector<analysis::CollEntry>& done) {
        std::lock_guard<std::mutex> lock(mu);
        job->collectives.Merge(done, rank, start);
      };
      RankDigest d = analysis::DigestRank(**reader, rank_options);
      // A payload torn at the end of a rank that did not close was written for
      // a call it did not live to record; one named but absent is damage.
      d.payload_damage = (*reader)->ReceivedBytesDamage(std::move(d.payload_refs));
      d.payload_refs = {};
      reader->reset();  // the events go; the digest stays
      std::lock_guard<std::mutex> lock(mu);
      for (const analysis::CommRecord& c : d.comms) job->lineage.Add(c, d.rank);
      job->collectives.Merge(d);
      job->p2p.Merge(d);
      for (const auto& [t, count] : d.transitions) job->transitions[t] += count;
      d.transitions.clear();
      const uint64_t events = d.events;
      slots[i] = std::move(d);
      progress.RankDone(events);
    }
  };
  int threads = options.threads > 0 ? options.threads
                                     : static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(n, 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (auto& s : slots) {
    if (s) job->digests.push_back(std::move(*s));
  }
  std::sort(job->digests.begin(), job->digests.end(),
            [](const RankDigest& a, const RankDigest& b) { return a.rank < b.rank; });
  std::sort(unreadable.begin(), unreadable.end());
  return unreadable;
}

}  // namespace

Result<CheckReport> CheckTrace(const TraceReader& trace, const CheckOptions& options) {
  auto job = std::make_unique<JobView>();
  job->options = options;
  job->now_realtime_ns = RealtimeNow();
  CheckReport report;
  report.trace = trace.dir();

  // A job still recording is checked as live even when nobody said so: what
  // its ranks are inside may finish in a moment.
  bool running = false;
  for (const RankEntry& r : trace.ranks()) running = running || RankReader::IsRunning(r.dir);
  job->live = options.live || running;
  if (running && !options.live) {
    report.notes.push_back("some ranks are still recording: checked as with --live");
  }
  report.live = job->live;
  analysis::DigestOptions digest_options;
  digest_options.now_realtime_ns = job->now_realtime_ns;
  digest_options.min_wait_ns = options.min_wait_ns >= 0 ? options.min_wait_ns : kDefaultMinWaitNs;

  // What the trace directory holds besides its ranks (the manifest: the
  // job's size, so which ranks are missing) could not be read.
  for (const TraceProblem& p : trace.problems()) {
    report.notes.push_back(p.file + ": " + p.message);
    report.unread.push_back(p.file + ": " + p.message);
  }
  std::vector<std::string> unreadable = ReadRanks(trace, digest_options, options, job.get());
  for (const std::string& u : unreadable) {
    report.notes.push_back("unreadable rank " + u);
    report.unread.push_back(u);
  }
  if (job->digests.empty()) {
    return Status::Corruption(trace.dir() + ": no rank of the trace could be read" +
                              (unreadable.empty() ? "" : " (" + unreadable.front() + ")"));
  }
  job->lineage.Finish();

  int32_t world = trace.manifest() ? trace.manifest()->world_size : -1;
  job->start_realtime_ns = INT64_MAX;
  job->end_realtime_ns = INT64_MIN;
  for (size_t i = 0; i < job->digests.size(); ++i) {
    const RankDigest& d = job->digests[i];
    job->by_rank[d.rank] = i;
    world = std::max(world, d.header.world_size);
    world = std::max(world, d.rank + 1);
    job->start_realtime_ns = std::min(job->start_realtime_ns, d.Abs(d.first_ns));
    job->end_realtime_ns = std::max(job->end_realtime_ns, d.Abs(d.last_ns));
    if (d.dropped > 0 || d.missing > 0 || d.status == RankStatus::kFailed) job->incomplete.push_back(d.rank);
    if (d.dropped > 0) {
      report.notes.push_back("rank " + std::to_string(d.rank) + " lost " + std::to_string(d.dropped) +
                             " events while recording (full ring): findings about it may be incomplete");
    }
    if (d.missing > 0) {
      report.notes.push_back("rank " + std::to_string(d.rank) + ": " + std::to_string(d.missing) +
                             " events unreadable (damaged trace)");
      report.unread.push_back("rank " + std::to_string(d.rank) + ": " + std::to_string(d.missing) + " events");
    }
    if (!d.payload_damage.empty()) {
      const std::string what = d.payload_damage.front() +
                               (d.payload_damage.size() > 1
                                    ? "; and " + std::to_string(d.payload_damage.size() - 1) + " more"
                                    : "");
      report.notes.push_back("rank " + std::to_string(d.rank) + ": its received bytes are damaged (" + what +
                             "): a re-run of it cannot be served what they held");
      report.unread.push_back("rank " + std::to_string(d.rank) + ": received bytes (" + what + ")");
    }
    if (!d.header_problem.empty()) {
      report.notes.push_back("rank " + std::to_string(d.rank) + ": its header could not be read (" + d.header_problem +
                             "): its settings are not compared, and how it ended is not known");
      report.unread.push_back("rank " + std::to_string(d.rank) + ": its header (" + d.header_problem + ")");
    }
    if (!d.header.damage.empty()) {
      report.notes.push_back("rank " + std::to_string(d.rank) + ": its header " + d.header.damage);
    }
    if (d.damaged > 0) {
      report.notes.push_back("rank " + std::to_string(d.rank) + ": " + std::to_string(d.damaged) +
                             " events hold values no recorder writes (damaged trace): they are read in part");
    }
    if (d.status == RankStatus::kFailed) {
      // The program ran on unrecorded: nothing after the last event is known.
      const std::string why = WhyRecordingStopped(d.header);
      const std::string after = d.unrecorded > 0 ? "; " + std::to_string(d.unrecorded) + " later calls were not recorded"
                                                 : "";
      report.notes.push_back("rank " + std::to_string(d.rank) + ": recording stopped after " +
                             std::to_string(d.events) + " events (" + why + ")" + after +
                             ": nothing it did after that is judged");
      report.unread.push_back("rank " + std::to_string(d.rank) + " after its event #" + std::to_string(d.events) +
                              " (recording stopped: " + why + ")");
    } else if (d.unrecorded > 0) {
      report.notes.push_back("rank " + std::to_string(d.rank) + ": " + std::to_string(d.unrecorded) +
                             " calls were not recorded (no ring slot or disk room for them): findings about it may be incomplete");
    }
  }
  job->world_size = world;
  report.world_size = world;
  for (int32_t r = 0; r < world; ++r) {
    if (job->by_rank.count(r) == 0) job->untraced.push_back(r);
  }
  if (!job->untraced.empty()) {
    report.notes.push_back("no readable trace for " +
                           std::string(job->untraced.size() == 1 ? "rank " : "ranks ") +
                           analysis::FormatRanks(job->untraced) + ": collectives are checked without them");
  }

  std::vector<analysis::RankedFinding> found;
  analysis::CheckCollectives(*job, &found);
  analysis::CheckGraphLaunches(*job, &found);
  analysis::CheckOrder(*job, &found);
  analysis::CheckPointToPoint(*job, &found);
  analysis::CheckErrors(*job, &found);
  analysis::CheckNanInf(*job, &found);
  analysis::CheckDevices(*job, &found);
  analysis::CheckConfig(*job, &found);
  analysis::CheckStragglers(*job, &found);
  std::vector<analysis::RankedFinding> endings;
  analysis::CheckEndings(*job, found, &endings);
  std::move(endings.begin(), endings.end(), std::back_inserter(found));
  std::stable_sort(found.begin(), found.end(), [](const analysis::RankedFinding& a, const analysis::RankedFinding& b) {
    if (a.finding.kind != b.finding.kind) return a.finding.kind < b.finding.kind;
    if (a.score != b.score) return a.score > b.score;
    return a.time < b.time;
  });
  for (auto& f : found) {
    Finding out = std::move(static_cast<Finding&>(f.finding));
    out.data = JsonText(f.finding.facts);
    report.findings.push_back(std::move(out));
  }

  analysis::Narrator narrator(*job);
  for (const RankDigest& d : job->digests) {
    RankState s;
    s.rank = d.rank;
    s.status = analysis::StatusWord(d.status);
    if (d.header.close_reason != CloseReason::kNone) s.close_reason = std::string(CloseReasonName(d.header.close_reason));
    s.signal = d.fatal_signal;
    s.blocked = std::any_of(d.blocked.begin(), d.blocked.end(), [](const auto& b) { return b.stuck; });
    s.doing = narrator.Doing(d.rank);
    s.events = d.events;
    report.ranks.push_back(std::move(s));
  }
  for (int32_t r : job->untraced) {
    RankState s;
    s.rank = r;
    s.status = "untraced";
    s.doing = narrator.Doing(r);
    report.ranks.push_back(std::move(s));
  }
  std::sort(report.ranks.begin(), report.ranks.end(), [](const RankState& a, const RankState& b) { return a.rank < b.rank; });
  return report;
}

nlohmann::json CallSiteToJson(const CallSite& s) {
  nlohmann::json j = {{"text", FormatCallSite(s)}, {"address", Hex(s.address)}, {"module", s.module},
                      {"offset", Hex(s.offset)}, {"symbol", s.symbol}};
  if (!s.file.empty()) {
    j["file"] = s.file;
    j["line"] = s.line;
  }
  if (!s.python.empty()) {
    j["python"] = nlohmann::json::array();
    for (const SourceFrame& f : s.python) {
      j["python"].push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
    }
  }
  return j;
}

nlohmann::json FindingToJson(const Finding& f) {
  nlohmann::json j;
  j["kind"] = std::string(FindingKindName(f.kind));
  j["title"] = f.title;
  j["details"] = f.details;
  j["categories"] = f.categories;
  j["fix"] = f.fix;
  j["ranks"] = f.ranks;
  if (f.comm) {
    j["comm"] = {{"id", Hex(f.comm->id)}, {"name", f.comm->name}, {"members", f.comm->members}};
  }
  if (f.seq != 0) j["seq"] = f.seq;
  if (!f.op.empty()) j["op"] = f.op;
  if (f.call_site) j["call_site"] = CallSiteToJson(*f.call_site);
  j["data"] = ParseJsonObject(f.data);
  return j;
}

nlohmann::json CheckReportToJson(const CheckReport& r) {
  nlohmann::json j;
  j["trace"] = r.trace;
  j["live"] = r.live;
  j["world_size"] = r.world_size;
  j["findings"] = nlohmann::json::array();
  for (const Finding& f : r.findings) j["findings"].push_back(FindingToJson(f));
  j["ranks"] = nlohmann::json::array();
  for (const RankState& s : r.ranks) {
    nlohmann::json x = {{"rank", s.rank}, {"status", s.status}, {"blocked", s.blocked}, {"doing", s.doing},
                        {"events", s.events}};
    if (!s.close_reason.empty()) x["close_reason"] = s.close_reason;
    if (s.signal != 0) x["signal"] = s.signal;
    j["ranks"].push_back(x);
  }
  j["notes"] = r.notes;
  if (!r.unread.empty()) j["unread"] = r.unread;
  return j;
}

std::string CheckReportJson(const CheckReport& report, int indent) {
  return JsonText(CheckReportToJson(report), indent);
}

}  // namespace replay
