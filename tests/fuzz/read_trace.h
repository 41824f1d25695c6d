// read_trace.h: what the fuzz targets do with a trace directory they made:
// everything that reads a trace's content, as the commands do.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "replay/check.h"
#include "replay/diff.h"
#include "replay/event_format.h"
#include "replay/flight_recorder.h"
#include "replay/perfetto.h"
#include "replay/report.h"
#include "replay/trace_reader.h"

namespace replay::fuzz {

// As the commands print JSON: bytes that are not UTF-8 replaced, not thrown on.
inline void Print(const nlohmann::json& j) {
  (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `replay dump` (text and JSON), `check` (and its JSON, the Markdown and HTML
// reports), `diff` of the trace with itself, the Perfetto export and the
// Flight Recorder export (into `scratch`/fr).
inline void ReadTrace(const std::string& dir, const std::string& scratch) {
  auto trace = TraceReader::Open(dir);
  if (!trace.ok()) return;
  const TraceReader& t = **trace;
  for (size_t i = 0; i < t.ranks().size(); ++i) {
    auto r = t.OpenRank(i);
    if (!r.ok()) continue;
    for (const Event& e : (*r)->events()) {
      (void)FormatEvent(e, (*r)->header());
      Print(EventToJson(e, (*r)->header()));
    }
  }
  CheckOptions co;
  co.threads = 1;
  co.min_wait_ns = 0;
  auto report = CheckTrace(t, co);
  if (report.ok()) {
    Print(CheckReportToJson(*report));
    (void)RenderMarkdownReport(t, *report);
    (void)RenderHtmlReport(t, *report);
  }
  auto diff = DiffTraces(t, t);
  if (diff.ok()) Print(DiffReportToJson(*diff));
  std::ostringstream perfetto;
  (void)WritePerfetto(t, perfetto);
  (void)ExportFlightRecorder(t, scratch + "/fr");
}

}  // namespace replay::fuzz
