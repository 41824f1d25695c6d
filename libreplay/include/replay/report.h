// report.h: what went wrong in a job, as a page to look at (`replay report`)
// or as Markdown to paste into an issue.
//
// The HTML page is one self-contained file (inline style, script and SVG; it
// loads nothing over the network). It opens on a per-rank timeline scrolled
// to the first finding that happened at a moment (the operations it is about
// in red, "missing from #N" where a rank never came, arrows between the
// operations of one collective or message on different ranks); below it the
// findings of `replay check`, each of which marks its operations in the
// timeline and scrolls to them when clicked, the state of each rank, and the
// configuration that differs across ranks. Rank labels stay in view as the
// timeline scrolls; operations that overlap on a rank are drawn one under
// another, so boxes and their labels never overlap. Big traces stay readable
// and the page small: the timeline shows windows of operations around the
// findings (or the end of the job) on a bounded number of ranks, and says so.
//
// The Markdown form holds the findings, the versions the job ran with, a few
// operations of each rank around the first finding as text, the rank states
// and the configuration differences. Both read the trace and fail as reading
// it does.
//
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "replay/check.h"
#include "replay/status.h"
#include "replay/trace_reader.h"

namespace replay {

struct ReportOptions {
  std::string title;            // the trace's name on the page (default: its directory)
  size_t ops_before = 40;       // timeline: operations per rank before the focus
  size_t ops_after = 12;        // ... and after it
  size_t max_ranks = 32;        // timeline rows at most
  size_t max_arrows = 1500;
  ReadProgressFn progress;  // how far reading the ranks has got
  // The recorded command with its secrets replaced, as `replay bundle` does
  // (check the trace with CheckOptions::redact for the settings' values).
  bool redact = true;
};

// The HTML page for `trace`, whose check gave `report`.
Result<std::string> RenderHtmlReport(const TraceReader& trace, const CheckReport& report,
                                     const ReportOptions& options = {});

// The Markdown summary of `report`.
Result<std::string> RenderMarkdownReport(const TraceReader& trace, const CheckReport& report,
                                 const ReportOptions& options = {});

}  // namespace replay
