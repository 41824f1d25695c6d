// replay diff A B: where two recordings of the same job first part ways.
#include <malloc.h>

#include <cstdio>

#include "analysis/diff_json.h"
#include "analysis/rank_set.h"
#include "command.h"
#include "replay/diff.h"
#include "replay/event_format.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Compare two recordings of the same job rank by rank, event by event (per
recording thread, in recorded order), and show for each rank the first event
that differs, with a few events of context, and which rank diverged first.

Compared: calls and arguments, sequence numbers, request ids, send and receive
fingerprints, matched sources of wildcard receives, test outcomes, random bytes
and seeds, marks, errors, call sites (as module + offset). Ignored: timestamps,
buffer addresses, handles, fault addresses. Settings (environment, versions)
that differ between the runs are listed too.

Exit status: 0 the runs agree, 1 they diverge, 2 a trace could not be read, or
no divergence was found but some rank could not be compared.)";

struct Options {
  std::string a;
  std::string b;
  bool json = false;
  int context = 3;
  std::vector<int32_t> ranks;
  bool ignore_sites = false;
};

void PrintEvent(const char* prefix, const DiffEvent& e) {
  std::printf("    %s %s\n", prefix, e.text.c_str());
}

void PrintText(const DiffReport& r) {
  std::string verdict = Paint(Color::kGreen, "no divergence");
  if (r.diverged()) {
    verdict = Paint(Color::kRed, "diverged");
  } else if (!r.not_compared.empty()) {
    verdict = Paint(Color::kYellow, "no divergence in what could be compared; " +
                                        std::string(r.not_compared.size() == 1 ? "rank " : "ranks ") +
                                        analysis::FormatRanks(r.not_compared) + " not compared");
  } else if (!r.unread.empty()) {
    verdict = Paint(Color::kYellow, "no divergence in what could be compared; not read: " + r.unread.front() +
                                        (r.unread.size() > 1 ? " (and " + std::to_string(r.unread.size() - 1) + " more)" : ""));
  }
  std::printf("%s %s vs %s: %s\n", Paint(Color::kBold, "replay diff").c_str(), r.trace_a.c_str(), r.trace_b.c_str(),
              verdict.c_str());
  if (r.first_rank) {
    for (const RankDiff& d : r.ranks) {
      if (d.rank == *r.first_rank) {
        std::printf("first divergence: rank %d, %s into its run (event #%llu): %s\n", d.rank, HumanDuration(d.time_ns).c_str(),
                    static_cast<unsigned long long>(d.a ? d.a->index : d.b->index), d.what.c_str());
      }
    }
  }
  for (const RankDiff& d : r.ranks) {
    if (!d.diverged) continue;
    std::printf("\n%s at %s, thread %u, after %llu equal events: %s\n",
                Paint(Color::kBold, "rank " + std::to_string(d.rank)).c_str(), HumanDuration(d.time_ns).c_str(),
                d.thread, static_cast<unsigned long long>(d.matched), Paint(Color::kYellow, d.what).c_str());
    if (!d.fields.empty()) {
      std::string f;
      for (const std::string& x : d.fields) f += (f.empty() ? "" : ", ") + x;
      std::printf("  fields: %s\n", f.c_str());
    }
    for (const DiffEvent& e : d.before) PrintEvent(" ", e);
    if (d.a) PrintEvent(Paint(Color::kRed, "A").c_str(), *d.a); else std::printf("    A (trace ends)\n");
    if (d.b) PrintEvent(Paint(Color::kGreen, "B").c_str(), *d.b); else std::printf("    B (trace ends)\n");
    for (const DiffEvent& e : d.after_a) PrintEvent(Paint(Color::kDim, "a").c_str(), e);
    for (const DiffEvent& e : d.after_b) PrintEvent(Paint(Color::kDim, "b").c_str(), e);
  }
  auto list = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  if (!r.only_in_a.empty()) std::printf("\nranks only in A: %s\n", list(r.only_in_a).c_str());
  if (!r.only_in_b.empty()) std::printf("\nranks only in B: %s\n", list(r.only_in_b).c_str());
  if (!r.settings.empty()) {
    std::printf("\n%s\n", Paint(Color::kBold, "settings that differ").c_str());
    for (const std::string& s : r.settings) std::printf("  %s\n", s.c_str());
  }
  if (!r.notes.empty() || !r.unread.empty()) {
    std::printf("\n%s\n", Paint(Color::kBold, "notes").c_str());
    for (const std::string& s : r.notes) std::printf("  %s\n", s.c_str());
    for (const std::string& s : r.unread) std::printf("  not read: %s\n", s.c_str());
  }
}

int Run(const std::string& a_dir, const std::string& b_dir, bool json, int context, const std::vector<int32_t>& ranks,
        bool ignore_sites) {
  // Every rank is read into memory of about the same size and freed again;
  // keep that memory in the process instead of returning it to the kernel and
  // faulting it back in for the next rank (a third of the time otherwise).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  auto a = OpenTrace(a_dir);
  if (!a.ok()) return Fail("diff", a.status());
  auto b = OpenTrace(b_dir);
  if (!b.ok()) return Fail("diff", b.status());
  DiffOptions options;
  options.context = context;
  options.ranks = ranks;
  options.compare_call_sites = !ignore_sites;
  Progress progress("comparing", (*a)->ranks().size());
  options.progress = [&](const ReadProgress& p) { progress.Update(p); };
  auto report = DiffTraces(**a, **b, options);
  if (!report.ok()) return Fail("diff", report.status());
  if (json) {
    std::printf("%s\n", JsonText(DiffReportToJson(*report), 2).c_str());
  } else {
    PrintText(*report);
  }
  if (report->diverged()) return kExitFindings;
  return report->not_compared.empty() && report->unread.empty() ? kExitOk : kExitBadInput;
}

}  // namespace

void AddDiffCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] =
      AddCommand<Options>(app, "diff", "Find where two recordings of the same job first diverge", kHelp, exit_code,
                          [](const Options& o) { return Run(o.a, o.b, o.json, o.context, o.ranks, o.ignore_sites); });
  cmd->add_option("A", opt->a, "First trace directory")->required();
  cmd->add_option("B", opt->b, "Second trace directory")->required();
  cmd->add_flag("--json", opt->json, "Print JSON instead of text (docs/check.md)");
  cmd->add_option("-C,--context", opt->context, "Events of context around each divergence")
      ->check(AtLeast(0, "a number of events"));
  cmd->add_option("-r,--rank", opt->ranks, "Only these ranks (repeatable)");
  cmd->add_flag("--ignore-call-sites", opt->ignore_sites, "Do not compare call sites (the binaries differ)");
}

}  // namespace replay::cli
