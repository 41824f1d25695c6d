// replay export DIR --format perfetto|flight-recorder -o PATH: a trace for other tools.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "command.h"
#include "replay/flight_recorder.h"
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

  flight-recorder  PyTorch NCCL Flight Recorder dumps, one per rank, into the
                   directory -o DIR, named nccl_trace_rank_<rank> (pickles, as
                   PyTorch writes them; --json: JSON documents, .json), which
                   PyTorch's analyzer reads: torchfrtrace DIR -p nccl_trace_rank_
                   Field mapping in docs/flight-recorder.md.

Flight Recorder dumps are also read back: `replay check DIR` on a directory
of dumps analyses them.

Exit status: 0 written, 2 the trace could not be read or the output not written.)";

struct Options {
  std::string dir;
  std::string format;
  std::string out;
  bool json = false;
  std::string ranks;
};

int Run(const Options& opt) {
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

  if (opt.format == "perfetto") {
    if (opt.json) return Fail("export", "--json is for --format flight-recorder (Perfetto traces are always JSON)");
    PerfettoOptions po;
    po.ranks = ranks;
    po.progress = on_rank;
    if (opt.out == "-") {
      auto summary = WritePerfetto(**trace, std::cout, po);
      std::cout.flush();
      progress.Clear();
      if (!summary.ok()) return Fail("export", summary.status());
      return kExitOk;
    }
    const std::string tmp = opt.out + ".tmp";
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Fail("export", "cannot create " + opt.out);
    auto summary = WritePerfetto(**trace, f, po);
    f.close();
    progress.Clear();
    if (!summary.ok() || !f || std::rename(tmp.c_str(), opt.out.c_str()) != 0) {
      std::remove(tmp.c_str());
      return Fail("export", summary.ok() ? Status::IoError("cannot write " + opt.out) : summary.status());
    }
    std::printf("%s %s: %llu ranks, %llu operations, %llu arrows (open in ui.perfetto.dev or chrome://tracing)\n",
                Paint(Color::kBold, "replay export").c_str(), opt.out.c_str(),
                static_cast<unsigned long long>(summary->ranks), static_cast<unsigned long long>(summary->slices),
                static_cast<unsigned long long>(summary->flows));
    return kExitOk;
  }
  if (opt.format == "flight-recorder") {
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
  return Fail("export", "--format " + opt.format + " is not one of perfetto, flight-recorder");
}

}  // namespace

void AddExportCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("export", "Write a trace for other tools: Perfetto/Chrome trace, Flight Recorder dumps");
  cmd->footer(kHelp);
  auto opt = std::make_shared<Options>();
  cmd->add_option("DIR", opt->dir, "Trace directory (or bundle, or Flight Recorder dumps)")->required();
  cmd->add_option("--format,-f", opt->format, "perfetto or flight-recorder")->required();
  cmd->add_option("-o,--output", opt->out, "File (perfetto; - for stdout) or directory (flight-recorder)")->required();
  cmd->add_flag("--json", opt->json, "flight-recorder: JSON dumps instead of pickles");
  cmd->add_option("--ranks", opt->ranks, "Only these world ranks, e.g. 0,2,5-7");
  cmd->callback([=] { *exit_code = Run(*opt); });
}

}  // namespace replay::cli
