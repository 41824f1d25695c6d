// replay export DIR --format perfetto|pftrace|jsonl|flight-recorder [-o PATH]: a trace for other tools.
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include "command.h"
#include "replay/check.h"
#include "replay/flight_recorder.h"
#include "replay/jsonl.h"
#include "replay/perfetto.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Formats:

  perfetto         Chrome/Perfetto trace events (JSON) for ui.perfetto.dev, which
                   runs in the browser without uploading, and chrome://tracing:
                   one process per rank, a track per communicator, a slice per
                   operation from call to completion, arrows between the
                   operations of one collective and between each message's send
                   and receive, marks, errors and signals as instants.
                   -o FILE (- for stdout).

  pftrace          The same timeline in Perfetto's own binary format (protobuf,
                   .pftrace), for ui.perfetto.dev and trace_processor: under
                   half the JSON's size, written in half the time; what to use
                   for a large trace. -o FILE (- for stdout when it is not a
                   terminal).

  jsonl            JSON Lines: one event per line, every rank, each line the
                   event as `replay dump --json` prints it plus its rank, its
                   wall-clock time (realtime_ns) and communicators by name
                   (comm_name, as `replay check` names them). Read in bounded
                   memory, whatever the size of the trace. -o FILE, or stdout
                   without -o (or with -o -). In pandas:
                   pd.read_json("events.jsonl", lines=True)

  flight-recorder  PyTorch NCCL Flight Recorder dumps, one per rank, into the
                   directory -o DIR, named nccl_trace_rank_<rank> (pickles, as
                   PyTorch writes them; --json: JSON documents, .json), which
                   PyTorch's analyzer reads: torchfrtrace DIR -p nccl_trace_rank_
                   Field mapping in docs/flight-recorder.md.

A window (perfetto, pftrace) keeps the operations that overlap a stretch of time, the
marks, errors and signals in it and the arrows between what is kept; times stay
counted from the start of the trace:

  --window 12:14.5           seconds 12 to 14.5 from the start of the trace
  --window 30:               from 30 s to the end
  --window :2.5              the first 2.5 s
  --window first-finding     1 s centred on the first finding of `replay check`
                             that happened at a moment of the trace (its
                             collective, error or unmatched message)
  --window first-finding:5   5 s centred on it

When check finds nothing (or only findings about the job as a whole), export
says so and writes nothing: leave --window out to export all of it.

Flight Recorder dumps are also read back: `replay check DIR` on a directory
of dumps analyses them.

Exit status: 0 written, 2 the trace could not be read, the output not written,
or --window first-finding found no finding to centre on.)";

constexpr const char* kWindowForm =
    "give START:END in seconds from the start of the trace, either side may be empty (e.g. 12:14.5, 30:, :2.5), "
    "or first-finding[:SECONDS]";

struct Options {
  std::string dir;
  std::string format;
  std::string out;
  bool json = false;
  std::string ranks;
  std::string window;
};

// What --window asked for.
struct WindowArg {
  bool first_finding = false;
  int64_t around_ns = 1'000'000'000;
  PerfettoWindow window;
};

Result<WindowArg> ParseWindow(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--window " + text + ": " + why + " (" + kWindowForm + ")");
  };
  // Seconds, >= 0; `what` names it in the message.
  auto seconds = [&](const std::string& s, const std::string& what, int64_t* ns) -> Status {
    double v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 || v > 1e9) {
      return bad(what + " \"" + s + "\" is not a number of seconds of 0 or more");
    }
    *ns = static_cast<int64_t>(std::llround(v * 1e9));
    return Status::Ok();
  };
  WindowArg w;
  const std::string kFirst = "first-finding";
  if (text.rfind(kFirst, 0) == 0) {
    w.first_finding = true;
    if (text.size() == kFirst.size()) return w;
    if (text[kFirst.size()] != ':') return bad("\"" + text + "\" is neither a time range nor first-finding");
    REPLAY_RETURN_IF_ERROR(seconds(text.substr(kFirst.size() + 1), "the length", &w.around_ns));
    if (w.around_ns <= 0) return bad("the length must be more than 0 seconds");
    return w;
  }
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return bad("\"" + text + "\" is neither a time range nor first-finding");
  const std::string start = text.substr(0, colon);
  const std::string end = text.substr(colon + 1);
  if (!start.empty()) REPLAY_RETURN_IF_ERROR(seconds(start, "the start", &w.window.start_ns));
  if (!end.empty()) REPLAY_RETURN_IF_ERROR(seconds(end, "the end", &w.window.end_ns));
  if (w.window.end_ns <= w.window.start_ns) return bad("the window ends before it starts");
  return w;
}

// "12.000-14.500 s", "30.000 s to the end".
std::string WindowText(const PerfettoWindow& w) {
  char buf[96];
  if (w.end_ns == INT64_MAX) {
    std::snprintf(buf, sizeof(buf), "%.3f s to the end", static_cast<double>(w.start_ns) / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f-%.3f s", static_cast<double>(w.start_ns) / 1e9,
                  static_cast<double>(w.end_ns) / 1e9);
  }
  return buf;
}

// Writes through `write` to `path`: stdout for "-", else a file that appears
// only once it is complete.
Status WriteTo(const std::string& path, const std::function<Status(std::ostream&)>& write) {
  if (path == "-") {
    Status s = write(std::cout);
    std::cout.flush();
    if (s.ok() && !std::cout) return Status::IoError("cannot write to stdout");
    return s;
  }
  const std::string tmp = path + ".tmp";
  // Readable by its owner only, as every file replay writes from a trace (a
  // leftover of an earlier try would keep its mode: made anew).
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IoError("cannot create " + path);
  Status s = write(f);
  f.close();
  if (s.ok() && (!f || std::rename(tmp.c_str(), path.c_str()) != 0)) s = Status::IoError("cannot write " + path);
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

int Run(const Options& opt) {
  const bool timeline = opt.format == "perfetto" || opt.format == "pftrace";
  if (!timeline && opt.format != "jsonl" && opt.format != "flight-recorder") {
    return Fail("export", "--format " + opt.format + " is not one of perfetto, pftrace, jsonl, flight-recorder");
  }
  if (opt.json && opt.format != "flight-recorder") {
    return Fail("export", "--json is for --format flight-recorder (" + opt.format + " has one form)");
  }
  if (!opt.window.empty() && !timeline) return Fail("export", "--window is for --format perfetto or pftrace");
  if (opt.out.empty() && opt.format != "jsonl") {
    return Fail("export", "--format " + opt.format + " needs -o " + (timeline ? "FILE (- for stdout)" : "DIR"));
  }
  if (opt.format == "pftrace" && opt.out == "-" && isatty(STDOUT_FILENO) != 0) {
    return Fail("export", "--format pftrace is binary: give -o FILE, or redirect stdout to a file or a pipe");
  }
  std::optional<WindowArg> window;
  if (!opt.window.empty()) {
    auto w = ParseWindow(opt.window);
    if (!w.ok()) return Fail("export", w.status());
    window = *w;
  }
  std::vector<int32_t> ranks;
  if (!opt.ranks.empty()) {
    auto r = ParseRankList(opt.ranks);
    if (!r.ok()) return Fail("export", r.status());
    ranks = *r;
  }
  auto trace = OpenTrace(opt.dir);
  if (!trace.ok()) return Fail("export", trace.status());
  Progress progress("reading", (*trace)->ranks().size());
  auto on_rank = [&](const ReadProgress& p) { progress.Update(p); };

  if (opt.format == "jsonl") {
    JsonLinesOptions jo;
    jo.ranks = ranks;
    const std::string out = opt.out.empty() ? "-" : opt.out;
    // Lines on a terminal would mix with the progress line.
    if (out != "-" || isatty(STDOUT_FILENO) == 0) jo.progress = on_rank;
    JsonLinesSummary summary;
    Status s = WriteTo(out, [&](std::ostream& os) {
      auto written = WriteJsonLines(**trace, os, jo);
      if (!written.ok()) return written.status();
      summary = std::move(*written);
      return Status::Ok();
    });
    progress.Clear();
    if (!s.ok()) return Fail("export", s);
    for (const std::string& note : summary.notes) std::fprintf(stderr, "replay export: %s\n", note.c_str());
    if (out != "-") {
      std::printf("%s %s: %llu ranks, %llu events, one per line (pandas: pd.read_json(\"%s\", lines=True))\n",
                  Paint(Color::kBold, "replay export").c_str(), out.c_str(),
                  static_cast<unsigned long long>(summary.ranks), static_cast<unsigned long long>(summary.events),
                  out.c_str());
    }
    return kExitOk;
  }

  if (timeline) {
    PerfettoOptions po;
    po.ranks = ranks;
    po.progress = on_rank;
    if (window && window->first_finding) {
      progress.Phase("checking");
      CheckOptions co;
      co.progress = on_rank;
      auto report = CheckTrace(**trace, co);
      if (!report.ok()) {
        progress.Clear();
        return Fail("export", report.status());
      }
      if (report->findings.empty()) {
        progress.Clear();
        return Fail("export", "--window first-finding: check finds nothing wrong in " + opt.dir +
                                  ", so there is no finding to centre on; give --window START:END, or leave --window "
                                  "out to export all of it");
      }
      po.around = std::move(report->findings);
      po.around_ns = window->around_ns;
      progress.Phase("reading");
    } else if (window) {
      po.window = window->window;
    }
    PerfettoSummary summary;
    Status s = WriteTo(opt.out, [&](std::ostream& os) {
      auto written = opt.format == "pftrace" ? WritePerfettoProto(**trace, os, po) : WritePerfetto(**trace, os, po);
      if (!written.ok()) return written.status();
      summary = *written;
      return Status::Ok();
    });
    progress.Clear();
    if (!s.ok()) {
      return Fail("export", window && window->first_finding ? "--window first-finding: " + s.message() : s.message());
    }
    if (opt.out == "-") return kExitOk;
    std::string shown;
    if (summary.window) {
      shown = " in " + WindowText(*summary.window) + " (" + std::to_string(summary.left_out) + " outside)";
      if (summary.finding >= 0) {
        const Finding& f = po.around[static_cast<size_t>(summary.finding)];
        shown += " around finding " + std::to_string(summary.finding + 1) + ", " +
                 std::string(FindingKindName(f.kind)) + ": " + f.title;
      }
    }
    std::printf("%s %s: %llu ranks, %llu operations%s, %llu arrows (open in ui.perfetto.dev or %s)\n",
                Paint(Color::kBold, "replay export").c_str(), opt.out.c_str(),
                static_cast<unsigned long long>(summary.ranks), static_cast<unsigned long long>(summary.slices),
                shown.c_str(), static_cast<unsigned long long>(summary.flows),
                opt.format == "pftrace" ? "trace_processor" : "chrome://tracing");
    return kExitOk;
  }

  if (opt.out == "-") return Fail("export", "--format flight-recorder writes one file per rank: give -o DIR");
  FlightRecorderExportOptions fo;
  fo.json = opt.json;
  fo.ranks = ranks;
  fo.progress = on_rank;
  auto files = ExportFlightRecorder(**trace, opt.out, fo);
  progress.Clear();
  if (!files.ok()) return Fail("export", files.status());
  std::printf("%s %s: %zu Flight Recorder dumps (%s), e.g. %s\n", Paint(Color::kBold, "replay export").c_str(),
              opt.out.c_str(), files->size(), fo.json ? "JSON" : "pickle",
              files->empty() ? "" : files->front().c_str());
  return kExitOk;
}

}  // namespace

void AddExportCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(
      app, "export",
      "Write a trace for other tools: Perfetto timeline (JSON or protobuf), JSON Lines, Flight Recorder dumps", kHelp,
      exit_code, Run);
  AddTraceArgument(cmd, &opt->dir);
  cmd->add_option("--format,-f", opt->format, "perfetto, pftrace, jsonl or flight-recorder")->required();
  cmd->add_option("-o,--output", opt->out,
                  "File (perfetto, pftrace, jsonl; - for stdout, jsonl's default) or directory (flight-recorder)");
  cmd->add_flag("--json", opt->json, "flight-recorder: JSON dumps instead of pickles");
  cmd->add_option("--ranks", opt->ranks, "Only these world ranks, e.g. 0,2,5-7");
  cmd->add_option("--window", opt->window, "perfetto, pftrace: only START:END (seconds) or first-finding[:SECONDS]");
}

}  // namespace replay::cli
