// replay check DIR: what went wrong across the ranks of a job.
#include <malloc.h>

#include <algorithm>
#include <cstdio>

#include "analysis/check_json.h"
#include "analysis/rank_set.h"
#include "command.h"
#include "replay/check.h"
#include "replay/event_format.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Match every collective across ranks by communicator and sequence number,
every message by channel, and report what is wrong, most likely cause first:

  mismatch         same collective, different op/count/datatype/root/reduction
                   (or two communicators used in opposite orders)
  error            MPI/NCCL error codes, MPI_Abort, crashes (fatal signals)
  missing_ranks    members that never entered a collective others are blocked in,
                   with what each of them was doing instead
  unmatched_p2p    a receive nobody sends to, a send nobody receives
  never_completed  every member entered, some never got out
  nan_inf          the first rank that sent NaN/Inf without having received any
  outputs_differ   ranks that received different results of one collective
  device           two ranks of one communicator on one device
  config           environment and versions that differ across ranks
  straggler        a rank that is consistently the last to arrive

Each finding names the ranks, communicator (by lineage: WORLD, dup(WORLD),
split(WORLD, color=1)), sequence number and call site, the symptom category of
the fault study it belongs to, and the fix that usually works.

With --live the job may still be running (a hung job, right now). Either way a
call counts as stuck once it stayed in progress for --min-wait seconds (default
0.5; until now, or until its rank died or closed its trace), so that a job
stopped in the middle of a collective is not taken for a hang.

Exit status: 0 nothing found, 1 findings, 2 the trace could not be read, or
nothing was found but part of it could not be (an unreadable rank, events lost
to damage): the headline and the notes say what.
--json output is described in docs/check.md.)";

struct Options {
  std::string dir;
  bool json = false;
  bool live = false;
  double min_wait_s = -1;
  int threads = 0;
  bool brief = false;
};

void PrintText(const CheckReport& r, bool brief) {
  size_t n = r.findings.size();
  std::string verdict = Paint(Color::kGreen, "no findings");
  if (n > 0) {
    verdict = Paint(Color::kRed, std::to_string(n) + (n == 1 ? " finding" : " findings"));
  } else if (!r.unread.empty()) {
    std::string what;
    for (const std::string& u : r.unread) what += (what.empty() ? "" : "; ") + u;
    verdict = Paint(Color::kYellow, "no findings in what could be read; not read: " + what);
  }
  std::printf("%s %s (%zu rank%s%s): %s\n", Paint(Color::kBold, "replay check").c_str(), r.trace.c_str(),
              r.ranks.size(), r.ranks.size() == 1 ? "" : "s", r.live ? ", live" : "", verdict.c_str());
  for (size_t i = 0; i < n; ++i) {
    const Finding& f = r.findings[i];
    std::printf("\n%zu. %s %s\n", i + 1, Paint(Color::kYellow, std::string(FindingKindName(f.kind))).c_str(),
                Paint(Color::kBold, f.title).c_str());
    if (brief) continue;
    for (const std::string& d : f.details) std::printf("     %s\n", d.c_str());
    if (f.comm) {
      std::vector<int32_t> sorted = f.comm->members;
      std::sort(sorted.begin(), sorted.end());
      std::string members = analysis::FormatRanks(sorted);
      std::printf("     %s %s%s\n", Paint(Color::kDim, "communicator:").c_str(), f.comm->name.c_str(),
                  members.empty() ? "" : (" (ranks " + members + ")").c_str());
    }
    if (f.call_site) std::printf("     %s %s\n", Paint(Color::kDim, "call site:").c_str(), FormatCallSite(*f.call_site).c_str());
    std::string cats;
    for (const std::string& c : f.categories) cats += (cats.empty() ? "" : "; ") + c;
    std::printf("     %s %s\n", Paint(Color::kDim, "category:").c_str(), cats.c_str());
    std::printf("     %s %s\n", Paint(Color::kDim, "fix:").c_str(), f.fix.c_str());
  }
  if (!brief && n > 0) {
    std::printf("\n%s\n", Paint(Color::kBold, "ranks").c_str());
    for (const RankState& s : r.ranks) {
      Color c = s.blocked || s.signal != 0 ? Color::kRed : Color::kGreen;
      std::printf("  %-5d %s %s\n", s.rank, Paint(c, s.status).c_str(), s.doing.c_str());
    }
  }
  if (!r.notes.empty()) {
    std::printf("\n%s\n", Paint(Color::kBold, "notes").c_str());
    for (const std::string& note : r.notes) std::printf("  %s\n", note.c_str());
  }
}

int Run(const std::string& dir, bool json, bool live, double min_wait_s, int threads, bool brief) {
  // Every rank is read into memory of about the same size and freed again;
  // keep that memory in the process instead of returning it to the kernel and
  // faulting it back in for the next rank (a third of the time otherwise).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto trace = OpenTrace(dir);
  if (!trace.ok()) return Fail("check", trace.status());
  CheckOptions options;
  options.live = live;
  options.min_wait_ns = min_wait_s >= 0 ? static_cast<int64_t>(min_wait_s * 1e9) : -1;
  options.threads = threads;
  Progress progress("reading", (*trace)->ranks().size());
  options.progress = [&](const ReadProgress& p) { progress.Update(p); };
  auto report = CheckTrace(**trace, options);
  progress.Clear();
  if (!report.ok()) return Fail("check", report.status());
  report->trace = dir;  // as given: a bundle or dumps are read from a temporary directory
  if (json) {
    std::printf("%s\n", JsonText(CheckReportToJson(*report), 2).c_str());
  } else {
    PrintText(*report, brief);
  }
  if (!report->findings.empty()) return kExitFindings;
  return report->unread.empty() ? kExitOk : kExitBadInput;
}

}  // namespace

void AddCheckCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(
      app, "check", "Find what went wrong across ranks: hangs, mismatches, NaN, config", kHelp, exit_code,
      [](const Options& o) { return Run(o.dir, o.json, o.live, o.min_wait_s, o.threads, o.brief); });
  AddTraceArgument(cmd, &opt->dir);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text (docs/check.md)");
  cmd->add_flag("--live", opt->live, "The job is still running (e.g. hung right now)");
  cmd->add_option("--min-wait", opt->min_wait_s, "Seconds a call must stay in progress to count as stuck (default 0.5)")
      ->check(AtLeast(0, "a number of seconds"));
  cmd->add_option("--threads", opt->threads, "Threads reading ranks (default: one per core, at most 8)")
      ->check(AtLeast(0, "a number of threads"));
  cmd->add_flag("--brief", opt->brief, "One line per finding");
}

}  // namespace replay::cli
