// The search behind `replay shrink` (replay/shrink.h): ddmin over ranks,
// iterations, calls and counts, each candidate checked, then driven.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "replay/shrink.h"
#include "shrink/ddmin.h"
#include "shrink/finding_key.h"
#include "shrink/program.h"

namespace replay {
namespace {

using shrink::CallMatch;
using shrink::Candidate;
using shrink::FindingKey;
using shrink::Program;
using shrink::Selection;

// How long a call of a driven job must have waited to count as stuck, as
// `replay drive` reports it: the drive is stopped shortly after its timeout.
constexpr int64_t kDriveMinWaitNs = 100'000'000;
// How long every rank of a running drive must have waited before the drive
// is taken to hang for good and stopped: when it shows the finding, and when
// it shows another (a slow collective on a loaded machine must not pass for
// a hang).
constexpr int64_t kSettleNs = 1'000'000'000;
constexpr int64_t kSettleOtherNs = 5'000'000'000;
// A job of more units than kFirstTail is first tried from its last
// kFirstTail units, then kTailGrowth times as many, and so on.
constexpr size_t kFirstTail = 256;
constexpr size_t kTailGrowth = 16;

ShrinkSize SizeOf(const Candidate& c) {
  return {c.ranks.size(), c.operations, c.max_rank_operations, c.communicators};
}

class Search {
 public:
  // `targets`: the recorded findings a reduced job may show, the one picked first.
  Search(const Program& program, ShrinkDriver& driver, const ShrinkOptions& options, std::vector<FindingKey> targets)
      : program_(program),
        driver_(driver),
        options_(options),
        targets_(std::move(targets)),
        start_(std::chrono::steady_clock::now()) {}

  // Starts from the whole job; fails when its drive does not fail the same way.
  Status Start(ShrinkResult* result);
  // Reductions of one kind, by ddmin; whether any was accepted.
  bool Ranks();
  bool Iterations(ShrinkResult* result);
  bool Calls();
  bool Counts();
  // ddmin over `items`: `keeping(subset)` is the selection that keeps just
  // `subset` of them; the first that reproduces is accepted (as `what`).
  // Whether fewer items were kept.
  bool Reduce(const std::vector<size_t>& items, const std::string& what,
              const std::function<Selection(const std::vector<size_t>&)>& keeping);

  bool Stopped() const { return stopped_; }
  const Selection& best() const { return best_; }
  const Candidate& best_candidate() const { return best_candidate_; }
  size_t candidates() const { return written_; }
  size_t drives() const { return drives_; }
  const std::vector<ShrinkStep>& steps() const { return steps_; }

 private:
  struct Tried {
    Selection selection;
    Candidate candidate;
    std::string dir;
  };
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool OutOfTime() {
    if (!stopped_ && Elapsed() > options_.budget_s) stopped_ = true;
    return stopped_;
  }
  std::string Key(const Selection& s, const Candidate& c) const;
  void Log(const Tried& t, const std::string& what) const {
    if (!options_.log) return;
    char head[96];
    std::snprintf(head, sizeof(head), "%s: %zu rank%s, %zu calls: ", t.dir.substr(t.dir.rfind('/') + 1).c_str(),
                  t.candidate.ranks.size(), t.candidate.ranks.size() == 1 ? "" : "s", t.candidate.operations);
    options_.log(head + what);
  }
  // Whether the candidate's own trace still shows the finding (no drive needed to say no).
  bool Checks(const Tried& t, std::string* why);
  // Whether its drive fails the same way.
  bool DriveShows(const Tried& t, const ShrinkDriver::Outcome& o, std::string* why) const;
  // Whether its drive, still running, hangs and shows the finding already.
  bool Settled(const Candidate& c, const std::string& trace_dir);
  CallMatch DriveMatch() const {
    // NCCL calls re-issued as the MPI calls that stand for them are compared by what they do.
    return program_.nccl() && !driver_.NcclCalls() ? CallMatch::kOperation : CallMatch::kApi;
  }
  bool Same(const CheckReport& report, const Candidate& c, CallMatch match, std::string* why) const;
  // The first of `selections` that reproduces (tried in order), or -1.
  int First(const std::vector<Selection>& selections, const std::string& what);
  void Accept(Tried t, const std::string& what);

  const Program& program_;
  ShrinkDriver& driver_;
  const ShrinkOptions& options_;
  std::vector<FindingKey> targets_;
  std::chrono::steady_clock::time_point start_;
  Selection best_;
  Candidate best_candidate_;
  std::string best_dir_;
  std::string best_key_;
  std::map<std::string, bool> tried_;  // candidate key -> reproduced
  // Running drives whose ranks all wait, since when.
  std::map<std::string, std::chrono::steady_clock::time_point> waiting_since_;
  size_t written_ = 0;
  size_t drives_ = 0;
  bool stopped_ = false;
  std::vector<ShrinkStep> steps_;
};

std::string Search::Key(const Selection& s, const Candidate& c) const {
  std::string k;
  for (bool b : s.ranks) k += b ? '1' : '0';
  k += '/';
  for (size_t u = 0; u < c.live.size(); ++u) k += c.live[u] ? (s.scaled[u] ? 's' : '1') : '0';
  return k;
}

bool Search::Same(const CheckReport& report, const Candidate& c, CallMatch match, std::string* why) const {
  return shrink::MatchingTarget(report, options_.keep, targets_, c.origin, match, why) != nullptr;
}

bool Search::Checks(const Tried& t, std::string* why) {
  auto trace = TraceReader::Open(t.dir);
  if (!trace.ok()) {
    *why = trace.status().message();
    return false;
  }
  CheckOptions copt;
  copt.threads = 1;
  auto report = CheckTrace(**trace, copt);
  if (!report.ok()) {
    *why = report.status().message();
    return false;
  }
  return Same(*report, t.candidate, CallMatch::kApi, why);
}

bool Search::DriveShows(const Tried& t, const ShrinkDriver::Outcome& o, std::string* why) const {
  if (!o.status.ok()) {
    *why = o.status.message();
    return false;
  }
  auto trace = TraceReader::Open(o.trace_dir);
  if (!trace.ok()) {
    *why = "the drive left no trace of its own: " + trace.status().message();
    return false;
  }
  CheckOptions copt;
  copt.min_wait_ns = kDriveMinWaitNs;
  copt.threads = 1;
  auto report = CheckTrace(**trace, copt);
  if (!report.ok()) {
    *why = report.status().message();
    return false;
  }
  return Same(*report, t.candidate, DriveMatch(), why);
}

bool Search::Settled(const Candidate& c, const std::string& trace_dir) {
  auto trace = TraceReader::Open(trace_dir);
  if (!trace.ok() || (*trace)->ranks().size() < c.ranks.size()) return false;
  CheckOptions copt;
  copt.live = true;
  copt.min_wait_ns = kSettleNs;
  copt.threads = 1;
  auto report = CheckTrace(**trace, copt);
  if (!report.ok() || report->ranks.size() < c.ranks.size()) return false;
  bool waiting = false, starting = false;
  for (const RankState& s : report->ranks) {
    if (!s.blocked && s.status == "running") {
      waiting_since_.erase(trace_dir);
      return false;  // still on its way
    }
    waiting = waiting || s.blocked;
    starting = starting || s.doing.find("MPI_Init") != std::string::npos;
  }
  if (!waiting) return false;
  std::string why;
  if (Same(*report, c, DriveMatch(), &why)) return true;
  // A hang of another kind: it will not change either, once it has lasted
  // (MPI_Init can take long on a loaded machine, and is not a hang).
  const auto now = std::chrono::steady_clock::now();
  auto [it, first] = waiting_since_.emplace(trace_dir, now);
  return !starting && !first && now - it->second >= std::chrono::nanoseconds(kSettleOtherNs);
}

int Search::First(const std::vector<Selection>& selections, const std::string& what) {
  std::vector<std::pair<int, Tried>> queue;  // checked, waiting to be driven
  auto drive = [&]() -> int {
    if (queue.empty()) return -1;
    std::vector<std::string> dirs;
    for (auto& [i, t] : queue) dirs.push_back(t.dir);
    auto settled = [&](size_t q, const std::string& d) {
      return q < queue.size() && Settled(queue[q].second.candidate, d);
    };
    std::vector<ShrinkDriver::Outcome> outcomes = driver_.Drive(dirs, settled);
    drives_ += queue.size();
    int hit = -1;
    for (size_t q = 0; q < queue.size(); ++q) {
      std::string why;
      const bool same = q < outcomes.size() && DriveShows(queue[q].second, outcomes[q], &why);
      tried_[Key(queue[q].second.selection, queue[q].second.candidate)] = same;
      Log(queue[q].second, same ? "driven: fails the same way" : "driven: " + why);
      if (same && hit < 0) {
        hit = queue[q].first;
        Accept(std::move(queue[q].second), what);
      } else {
        std::error_code ec;
        std::filesystem::remove_all(queue[q].second.dir, ec);
      }
    }
    queue.clear();
    return hit;
  };
  for (size_t i = 0; i < selections.size(); ++i) {
    if (OutOfTime()) break;
    Tried t;
    t.selection = selections[i];
    t.candidate = program_.Materialize(t.selection);
    if (t.candidate.ranks.empty() || t.candidate.operations == 0) continue;
    const std::string key = Key(t.selection, t.candidate);
    if (key == best_key_ && queue.empty()) {
      // The job it makes is the one kept so far (what it leaves out was gone
      // already): it reproduces, and nothing changes.
      return static_cast<int>(i);
    }
    auto seen = tried_.find(key);
    if (seen != tried_.end() && !seen->second) continue;
    t.dir = options_.work_dir + "/c" + std::to_string(++written_);
    std::string why;
    if (Status w = shrink::WriteCandidate(t.candidate, program_.manifest(), t.dir); !w.ok() || !Checks(t, &why)) {
      Log(t, "checked: " + (w.ok() ? why : w.message()));
      tried_[key] = false;
      std::error_code ec;
      std::filesystem::remove_all(t.dir, ec);
      continue;
    }
    const size_t ranks = t.candidate.ranks.size();
    queue.emplace_back(static_cast<int>(i), std::move(t));
    if (queue.size() >= driver_.Parallel(ranks)) {
      int hit = drive();
      if (hit >= 0) return hit;
    }
  }
  if (OutOfTime()) {
    // What was checked but not driven is dropped: the budget is spent.
    for (auto& [i, t] : queue) {
      std::error_code ec;
      std::filesystem::remove_all(t.dir, ec);
    }
    return -1;
  }
  return drive();
}

void Search::Accept(Tried t, const std::string& what) {
  if (!best_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(best_dir_, ec);
  }
  best_ = std::move(t.selection);
  // Units no longer there stay out of later candidates.
  for (size_t u = 0; u < best_.units.size(); ++u) best_.units[u] = t.candidate.live[u];
  best_key_ = Key(best_, t.candidate);
  best_candidate_ = std::move(t.candidate);
  best_dir_ = t.dir;
  ShrinkStep step{what, best_candidate_.ranks.size(), best_candidate_.operations,
                  best_candidate_.max_rank_operations, Elapsed()};
  steps_.push_back(step);
  if (options_.progress) options_.progress(step);
}

Status Search::Start(ShrinkResult* result) {
  const Selection all = program_.All();
  Tried t;
  t.selection = all;
  t.candidate = program_.Materialize(all);
  result->before = SizeOf(t.candidate);
  // A long job is tried from its last calls first: what a rank did long
  // before the fault rarely makes it, and a drive of the whole job would take
  // about as long as the job ran. Every communicator's creation stays (taking
  // one out takes out everything on it).
  const size_t units = all.units.size();
  std::vector<Selection> tails;
  std::vector<size_t> tail_units;
  for (size_t tail = kFirstTail; tail < units; tail *= kTailGrowth) {
    Selection s = all;
    for (size_t u = 0; u + tail < units; ++u) s.units[u] = !program_.units()[u].creates.empty();
    tails.push_back(std::move(s));
    tail_units.push_back(tail);
  }
  if (const int hit = tails.empty() ? -1 : First(tails, "last calls"); hit >= 0) {
    result->tail_units = tail_units[static_cast<size_t>(hit)];
    return Status::Ok();
  }
  t.dir = options_.work_dir + "/c" + std::to_string(++written_);
  REPLAY_RETURN_IF_ERROR(shrink::WriteCandidate(t.candidate, program_.manifest(), t.dir));
  std::string why;
  if (!Checks(t, &why)) {
    return Status::NotFound("the recorded job, rewritten for re-issuing, no longer shows the finding (" + why +
                            ")");
  }
  std::vector<ShrinkDriver::Outcome> o =
      driver_.Drive({t.dir}, [&](size_t, const std::string& d) { return Settled(t.candidate, d); });
  ++drives_;
  if (o.empty() || !o[0].status.ok()) {
    return Status::IoError(o.empty() ? "the drive did not run" : o[0].status.message());
  }
  if (!DriveShows(t, o[0], &why)) {
    return Status::NotFound("replay drive does not make this job fail the same way (" + why + ")");
  }
  Accept(std::move(t), "as recorded");
  return Status::Ok();
}

bool Search::Reduce(const std::vector<size_t>& items, const std::string& what,
                    const std::function<Selection(const std::vector<size_t>&)>& keeping) {
  auto kept = shrink::Ddmin(
      items,
      [&](const std::vector<std::vector<size_t>>& subsets) {
        std::vector<Selection> sels;
        for (const auto& subset : subsets) sels.push_back(keeping(subset));
        return First(sels, what);
      },
      [&] { return OutOfTime(); });
  return kept.size() < items.size();
}

// The indices of `v` that are set.
std::vector<size_t> SetIndices(const std::vector<bool>& v) {
  std::vector<size_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i]) out.push_back(i);
  }
  return out;
}

bool Search::Ranks() {
  return Reduce(SetIndices(best_.ranks), "ranks", [&](const std::vector<size_t>& subset) {
    Selection s = best_;
    s.ranks.assign(s.ranks.size(), false);
    for (size_t r : subset) s.ranks[r] = true;
    return s;
  });
}

bool Search::Iterations(ShrinkResult* result) {
  const std::vector<size_t> units = SetIndices(best_.units);
  std::vector<std::string> shapes;
  for (size_t u : units) shapes.push_back(program_.units()[u].shape);
  const auto iterations = shrink::FindIterations(shapes);
  if (result->iterations_found == 0) result->iterations_found = iterations.size();
  if (iterations.size() < 2) return false;
  std::vector<size_t> items(iterations.size());
  for (size_t i = 0; i < items.size(); ++i) items[i] = i;
  return Reduce(items, "iterations", [&](const std::vector<size_t>& subset) {
    Selection s = best_;
    std::set<size_t> keep(subset.begin(), subset.end());
    for (size_t it = 0; it < iterations.size(); ++it) {
      if (keep.count(it) != 0) continue;
      for (size_t k = iterations[it].first; k < iterations[it].second; ++k) s.units[units[k]] = false;
    }
    return s;
  });
}

bool Search::Calls() {
  return Reduce(SetIndices(best_.units), "calls", [&](const std::vector<size_t>& subset) {
    Selection s = best_;
    s.units.assign(s.units.size(), false);
    for (size_t u : subset) s.units[u] = true;
    return s;
  });
}

bool Search::Counts() {
  std::vector<size_t> scalable;
  for (size_t u = 0; u < best_.units.size(); ++u) {
    if (best_.units[u] && !best_.scaled[u] && program_.units()[u].scalable) scalable.push_back(u);
  }
  if (scalable.empty() || OutOfTime()) return false;
  // All at once first; else the fewest that must keep their counts.
  Selection all = best_;
  for (size_t u : scalable) all.scaled[u] = true;
  if (First({all}, "counts") == 0) return true;
  const Selection base = best_;
  return Reduce(scalable, "counts", [&](const std::vector<size_t>& subset) {
    Selection s = base;
    for (size_t u : scalable) s.scaled[u] = true;
    for (size_t u : subset) s.scaled[u] = false;
    return s;
  });
}

}  // namespace

Result<ShrinkResult> Shrink(const TraceReader& trace, ShrinkDriver& driver, const ShrinkOptions& options,
                            const std::string& out_dir) {
  auto report = CheckTrace(trace);
  if (!report.ok()) return report.status();
  const Finding* target = shrink::PickFinding(*report, options.keep);
  if (target == nullptr) {
    if (!options.keep.empty()) {
      return Status::NotFound("replay check finds no " + options.keep + " in this trace");
    }
    return Status::NotFound(report->findings.empty()
                                ? "replay check finds nothing wrong with this trace"
                                : "replay check finds no hang, mismatch or error that a drive can re-issue (first: " +
                                      report->findings.front().title + ")");
  }
  auto program = Program::Load(trace);
  if (!program.ok()) return program.status();

  // One fault can show as several findings of a kind (each rank waiting on
  // a rank that stopped is a finding of its own), and a drive need not show
  // them all: any of them is the fault kept, the one picked first.
  const std::vector<const Finding*> targets = shrink::TargetFindings(*report, *target);
  std::vector<FindingKey> keys;
  for (const Finding* f : targets) keys.push_back(shrink::KeyOf(*f, {}));

  ShrinkResult result;
  result.target = *target;
  result.nccl = program->nccl();
  Search search(*program, driver, options, keys);
  REPLAY_RETURN_IF_ERROR(search.Start(&result));
  // Fewer ranks make every later drive cheaper; fewer calls may then let
  // more ranks go: a second round when the first changed something.
  for (int round = 0; round < 3 && !search.Stopped(); ++round) {
    bool changed = search.Ranks();
    if (round == 0) changed = search.Iterations(&result) || changed;
    changed = search.Calls() || changed;
    changed = search.Counts() || changed;
    if (!changed) break;
  }
  const Candidate& best = search.best_candidate();
  result.after = SizeOf(best);
  result.origin = best.origin;
  for (size_t u = 0; u < best.live.size(); ++u) {
    if (best.live[u] && search.best().scaled[u]) ++result.scaled_units;
  }
  result.budget_exhausted = search.Stopped();
  result.candidates = search.candidates();
  result.drives = search.drives();
  result.steps = search.steps();
  REPLAY_RETURN_IF_ERROR(shrink::WriteCandidate(best, program->manifest(), out_dir));
  auto reduced = TraceReader::Open(out_dir);
  if (!reduced.ok()) return reduced.status();
  auto again = CheckTrace(**reduced);
  if (!again.ok()) return again.status();
  std::string why;
  size_t which = 0;
  const Finding* f = shrink::MatchingTarget(*again, options.keep, keys, best.origin, CallMatch::kApi, &why, &which);
  result.reduced = f != nullptr ? *f : Finding{};
  if (f != nullptr) result.target = *targets[which];
  return result;
}

}  // namespace replay
