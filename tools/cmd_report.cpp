// replay report DIR: what went wrong, as a page to look at or Markdown to paste.
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "replay/check.h"
#include "replay/report.h"
#include "term.h"
#include "trace_input.h"
#include "util/file_system.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Write what `replay check` finds as one self-contained HTML page (it loads
nothing over the network; open it in any browser, attach it to an issue). It
opens on a per-rank timeline scrolled to the first finding: the operations it
is about in red, "missing from #N" where a rank never came, arrows between the
operations of one collective or message on different ranks. Below it are the
findings (a click marks a finding's operations and scrolls to them), the state
of each rank, and the configuration that differs across ranks.

--markdown writes the findings, the versions the job ran with, a few
operations of each rank around the first finding as text, the rank states and
the configuration differences as Markdown instead (to stdout unless -o), for
pasting into a GitHub issue.

What is meant to be shared keeps no secrets: the recorded command and the
settings that differ across ranks show values that look like credentials as
[REDACTED:N], as `replay bundle` does (--no-redact keeps them). The file is
written readable by its owner only.

Exit status: 0 written (whatever was found), 2 the trace could not be read or
the file not written.)";

struct Options {
  std::string dir;
  std::string out;
  bool markdown = false;
  bool no_redact = false;
};

std::string Name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string name = std::filesystem::path(p).filename().string();
  return name.empty() ? p : name;
}

int Run(const Options& opt) {
  auto trace = OpenTrace(opt.dir);
  if (!trace.ok()) return Fail("report", trace.status());
  const size_t ranks = (*trace)->ranks().size();
  Progress progress("checking", ranks);
  CheckOptions co;
  co.redact = !opt.no_redact;
  co.progress = [&](const ReadProgress& p) { progress.Update(p); };
  auto report = CheckTrace(**trace, co);
  if (!report.ok()) return Fail("report", report.status());
  report->trace = opt.dir;

  ReportOptions ro;
  ro.title = Name(opt.dir);
  ro.redact = !opt.no_redact;
  bool drawing = false;
  ro.progress = [&](const ReadProgress& p) {
    if (!drawing) progress.Phase("drawing");
    drawing = true;
    progress.Update(p);
  };
  auto rendered = opt.markdown ? RenderMarkdownReport(**trace, *report, ro) : RenderHtmlReport(**trace, *report, ro);
  progress.Clear();
  if (!rendered.ok()) return Fail("report", rendered.status());
  std::string text = std::move(rendered).value();
  if (opt.markdown && opt.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  const std::string out = opt.out.empty() ? "report.html" : opt.out;
  Status st = FileSystem::Default()->WriteAtomic(out, text);
  if (!st.ok()) return Fail("report", st);
  const size_t n = report->findings.size();
  std::printf("%s %s: %s, %zu ranks\n", Paint(Color::kBold, "replay report").c_str(), out.c_str(),
              n == 0 ? Paint(Color::kGreen, "no findings").c_str()
                     : Paint(Color::kRed, std::to_string(n) + (n == 1 ? " finding" : " findings")).c_str(),
              report->ranks.size());
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(
      app, "report", "Write the findings as a self-contained HTML page, or as Markdown", kHelp, exit_code, Run);
  AddTraceArgument(cmd, &opt->dir);
  cmd->add_option("-o,--output", opt->out, "File to write (default: report.html; Markdown: stdout)");
  cmd->add_flag("--markdown", opt->markdown, "Markdown to paste into an issue instead of HTML");
  cmd->add_flag("--no-redact", opt->no_redact, "Show secrets in the command and settings as recorded");
}

}  // namespace replay::cli
