// report.h: what went wrong in a job, as a page to look at (`replay report`)
// or as Markdown to paste into an issue.
//
// The HTML page is one self-contained file (inline style, script and SVG; it
// loads nothing over the network): the findings of `replay check` on top, a
// per-rank timeline of operations around the first finding (the failing
// collective highlighted, arrows between the operations of one collective or
// message on different ranks), the state of each rank, and the configuration
// that differs across ranks. Big traces stay readable and the page small: the
// timeline shows a window of operations around the first finding (or the end
// of the job) on a bounded number of ranks, and says so.
//
// The Markdown form holds the findings, the rank states and the configuration
// differences, without the timeline.
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
std::string RenderMarkdownReport(const TraceReader& trace, const CheckReport& report,
                                 const ReportOptions& options = {});

}  // namespace replay
