// read_trace.h: what the fuzz targets do with a trace directory they made:
// everything that reads a trace's content, as the commands do.
#pragma once

#include <sstream>
#include <string>

#include "analysis/check_json.h"
#include "analysis/diff_json.h"
#include "replay/check.h"
#include "replay/diff.h"
#include "replay/event_format.h"
#include "replay/flight_recorder.h"
#include "replay/oracle.h"
#include "replay/perfetto.h"
#include "replay/report.h"
#include "replay/trace_reader.h"
#include "trace/event_json.h"

namespace replay::fuzz {

// `replay rerun --rank R [--from-mark M]`'s side of the trace: every recorded
// call served back, in the order it was recorded, as a re-run asks for it.
inline void ServeRecording(const std::string& dir, int32_t rank, const std::string& from_mark) {
  OracleOptions o;
  o.trace_dir = dir;
  o.rank = rank;
  o.from_mark = from_mark;
  auto oracle = Oracle::Open(o);
  if (!oracle.ok()) return;
  Oracle& x = **oracle;
  (void)x.HowRecordingEnds();
  for (const Event& e : x.events()) {
    (void)x.Describe(e);
    CallForm form = CallForm::kOp;
    OpKind kind = OpKind::kOther;
    switch (e.kind) {
      case EventKind::kOp: kind = e.op.kind; (void)x.FindCompletion(e.op.request); break;
      case EventKind::kTest: form = CallForm::kTest; break;
      case EventKind::kEntropy: form = CallForm::kEntropy; break;
      case EventKind::kSeed: form = CallForm::kSeed; break;
      case EventKind::kMark: form = CallForm::kMark; break;
      default: continue;
    }
    auto served = x.Serve(e.thread, x.ApiOf(e), form, kind);
    if (served.ok() && served->ret != nullptr) (void)x.Payload(served->ret->ret.payload_hash);
  }
}

// `replay dump` (text and JSON), the re-run's oracle, `check` (and its JSON, the Markdown and HTML
// reports), `diff` of the trace with itself, the Perfetto exports (JSON and
// protobuf) and the Flight Recorder export (into `scratch`/fr).
inline void ReadTrace(const std::string& dir, const std::string& scratch) {
  auto trace = TraceReader::Open(dir);
  if (!trace.ok()) return;
  const TraceReader& t = **trace;
  for (size_t i = 0; i < t.ranks().size(); ++i) {
    auto r = t.OpenRank(i);
    if (!r.ok()) continue;
    std::string mark;
    for (const Event& e : (*r)->events()) {
      (void)FormatEvent(e, (*r)->header());
      (void)JsonText(EventToJson(e, (*r)->header()));
      if (e.kind == EventKind::kMark && mark.empty()) mark = e.text + "=" + std::to_string(e.mark.value);
    }
    ServeRecording(dir, t.ranks()[i].rank, "");
    if (!mark.empty()) ServeRecording(dir, t.ranks()[i].rank, mark);
  }
  CheckOptions co;
  co.threads = 1;
  co.min_wait_ns = 0;
  auto report = CheckTrace(t, co);
  if (report.ok()) {
    (void)JsonText(CheckReportToJson(*report));
    (void)RenderMarkdownReport(t, *report);
    (void)RenderHtmlReport(t, *report);
  }
  auto diff = DiffTraces(t, t);
  if (diff.ok()) (void)JsonText(DiffReportToJson(*diff));
  std::ostringstream perfetto;
  (void)WritePerfetto(t, perfetto);
  std::ostringstream pftrace;
  (void)WritePerfettoProto(t, pftrace);
  (void)ExportFlightRecorder(t, scratch + "/fr");
}

}  // namespace replay::fuzz
