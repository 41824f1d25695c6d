// replay info DIR: what a trace holds, rank by rank.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "analysis/rank_set.h"
#include "bundle/redact.h"
#include "command.h"
#include "replay/event_format.h"
#include "replay/trace_reader.h"
#include "term.h"
#include "trace/read_progress.h"
#include "trace_input.h"
#include "util/clock.h"
#include "util/json.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Summarise a trace: its ranks and, for each, its status (complete,
salvaged after crash, still being written, recording failed), events, time span,
bytes on disk, compression ratio, payload bytes and any dropped events or
damaged blocks; and how each rank's NCCL calls were recorded: through the NCCL
API of a libnccl.so.2 the program loaded ("api"), or through NCCL's profiler
plugin interface, for NCCL linked into the program ("profiler plugin").

The recorded command is shown with values that look like credentials replaced
by [REDACTED:N], as `replay bundle` does; --no-redact shows it as recorded.

Exit status: 0 when the trace was read, 2 when it could not be.)";

struct Options {
  std::string dir;
  bool json = false;
  bool no_redact = false;
};

// What the summary shows of one rank, taken from one walk over its events
// (read as a stream: a rank's decoded events can take hundreds of MiB, and the
// trace may have many ranks).
struct RankRow {
  const RankEntry* entry = nullptr;
  Status error;  // not Ok: the rank could not be read, and the rest is unset
  int32_t rank = -1;
  RankStatus status = RankStatus::kSalvaged;
  std::string host;
  int32_t pid = 0;
  CloseReason close_reason = CloseReason::kNone;
  size_t events = 0;
  int64_t span_ns = 0;
  RankStats stats;
  std::vector<TraceProblem> problems;
  int fatal_signal = 0;
  std::vector<std::string> nccl_paths;  // how its NCCL calls were recorded
  std::string recording_error;          // why its recording stopped early
};

RankRow Summarise(const RankEntry* entry, const RankReader& rr, ProgressTally* progress) {
  RankRow row;
  row.entry = entry;
  row.rank = rr.rank();
  row.status = rr.status();
  row.host = rr.header().host;
  row.pid = rr.header().pid;
  row.close_reason = rr.header().close_reason;
  if (rr.status() == RankStatus::kFailed) {
    row.recording_error = WhyRecordingStopped(rr.header());
  }
  auto walk = rr.ForEachEvent(progress->Counting([&](const Event& e) {
    if (e.kind == EventKind::kSignal && e.signal.fatal) row.fatal_signal = e.signal.signo;
    if (e.kind == EventKind::kInfo && e.info_key() == "nccl.recorded_by") row.nccl_paths.emplace_back(e.info_value());
    return true;
  }));
  if (!walk.ok()) {
    row.error = walk.status();
    return row;
  }
  row.events = walk->events;
  row.span_ns = walk->events == 0 ? 0 : walk->last_ns - walk->first_ns;
  row.stats = walk->stats;
  row.problems = std::move(walk->problems);
  for (TraceProblem& p : rr.PayloadProblems()) row.problems.push_back(std::move(p));
  progress->RankDone(walk->events);
  return row;
}

std::string WallTime(int64_t realtime_ns) {
  return realtime_ns <= 0 ? "unknown time" : FormatUtc(realtime_ns, "%Y-%m-%d %H:%M:%S UTC");
}

std::string StatusText(const RankRow& r) { return RankEndText(r.status, r.close_reason, r.fatal_signal); }

int Run(const std::string& dir, bool json, bool redact) {
  auto trace = OpenTrace(dir);
  if (!trace.ok()) return Fail("info", trace.status());
  const TraceReader& t = **trace;
  std::vector<RankRow> rows;
  Progress progress("reading", t.ranks().size());
  ProgressTally tally(t, {}, [&](const ReadProgress& p) { progress.Update(p); });
  ReadOptions stream;
  stream.stream = true;
  for (size_t i = 0; i < t.ranks().size(); ++i) {
    auto r = t.OpenRank(i, stream);
    if (r.ok()) {
      rows.push_back(Summarise(&t.ranks()[i], **r, &tally));
    } else {
      RankRow row;
      row.entry = &t.ranks()[i];
      row.error = r.status();
      rows.push_back(std::move(row));
      tally.RankDone();
    }
  }
  progress.Clear();

  if (json) {
    nlohmann::json j;
    j["trace"] = dir;  // as given: a bundle or dumps are read from a temporary directory
    if (t.manifest()) {
      const JobManifest& m = *t.manifest();
      j["uuid"] = UuidToString(m.trace_uuid);
      j["created_realtime_ns"] = m.created_realtime_ns;
      j["command"] = redact ? bundle::RedactedCommand(m.command) : m.command;
      j["level"] = std::string(LevelName(m.level));
      j["world_size"] = m.world_size;
      j["recorder"] = m.recorder;
    }
    j["ranks"] = nlohmann::json::array();
    for (const RankRow& row : rows) {
      nlohmann::json r;
      r["dir"] = row.entry->dir;
      r["rank"] = row.entry->rank;
      if (!row.error.ok()) {
        r["status"] = "unreadable";
        r["error"] = row.error.message();
        j["ranks"].push_back(r);
        continue;
      }
      r["rank"] = row.rank;
      r["status"] = std::string(RankStatusName(row.status));
      r["host"] = row.host;
      r["pid"] = row.pid;
      r["events"] = row.events;
      r["span_ns"] = row.span_ns;
      r["stored_bytes"] = row.stats.stored_bytes;
      r["raw_bytes"] = row.stats.raw_bytes;
      r["payload_bytes"] = row.stats.payload_bytes;
      r["blocks"] = row.stats.blocks;
      r["salvaged_events"] = row.stats.salvaged;
      r["dropped_events"] = row.stats.dropped;
      r["unrecorded_calls"] = row.stats.unrecorded;
      if (!row.recording_error.empty()) r["recording_error"] = row.recording_error;
      r["missing_events"] = row.stats.missing;
      if (row.close_reason != CloseReason::kNone) {
        r["close_reason"] = std::string(CloseReasonName(row.close_reason));
      }
      if (row.fatal_signal) r["fatal_signal"] = row.fatal_signal;
      if (!row.nccl_paths.empty()) r["nccl_recorded_by"] = row.nccl_paths;
      r["problems"] = nlohmann::json::array();
      for (const TraceProblem& p : row.problems) {
        r["problems"].push_back({{"file", p.file}, {"offset", p.offset}, {"length", p.length},
                                 {"torn_tail", p.torn_tail}, {"message", p.message}});
      }
      j["ranks"].push_back(r);
    }
    j["problems"] = nlohmann::json::array();
    for (const TraceProblem& p : t.problems()) j["problems"].push_back({{"file", p.file}, {"message", p.message}});
    std::printf("%s\n", JsonText(j, 2).c_str());
    return kExitOk;
  }

  std::printf("%s %s\n", Paint(Color::kBold, "trace").c_str(), dir.c_str());
  if (t.manifest()) {
    const JobManifest& m = *t.manifest();
    std::string cmd = CommandText(redact ? bundle::RedactedCommand(m.command) : m.command);
    std::printf("  recorded %s by %s on %s, level %s, uuid %s\n", WallTime(m.created_realtime_ns).c_str(),
                m.recorder.empty() ? "replay" : m.recorder.c_str(), m.host.c_str(),
                std::string(LevelName(m.level)).c_str(), UuidToString(m.trace_uuid).c_str());
    if (!cmd.empty()) std::printf("  command: %s\n", cmd.c_str());
  } else {
    std::printf("  %s\n", Paint(Color::kYellow, "no manifest (the directory was not made by `replay record`, or it is damaged)").c_str());
  }
  int expected = t.manifest() ? t.manifest()->world_size : -1;
  std::printf("  ranks: %zu", rows.size());
  if (expected > 0) std::printf(" of %d expected", expected);
  std::printf("\n\n");
  std::printf("  %-6s %-28s %10s %11s %10s %10s %7s %10s %s\n", "rank", "status", "events", "span",
              "on disk", "raw", "ratio", "payloads", "problems");
  for (const RankRow& row : rows) {
    if (!row.error.ok()) {
      std::printf("  %-6d %s\n", row.entry->rank, Paint(Color::kRed, "unreadable: " + row.error.message()).c_str());
      continue;
    }
    const RankStats& s = row.stats;
    const int64_t span = row.span_ns;
    char ratio[16] = "-";
    if (s.raw_bytes > 0 && s.stored_bytes > 0) {
      std::snprintf(ratio, sizeof(ratio), "%.1fx", static_cast<double>(s.raw_bytes) / static_cast<double>(s.stored_bytes));
    }
    std::string status = StatusText(row);
    Color c = row.status == RankStatus::kComplete ? Color::kGreen
              : row.status == RankStatus::kRunning ? Color::kYellow
                                                   : Color::kRed;
    std::string problems;
    if (s.dropped) problems += std::to_string(s.dropped) + " dropped ";
    if (s.unrecorded) problems += std::to_string(s.unrecorded) + " calls unrecorded ";
    if (s.salvaged) problems += std::to_string(s.salvaged) + " salvaged ";
    size_t damaged = 0;
    for (const TraceProblem& p : row.problems) damaged += p.torn_tail ? 0 : 1;
    if (damaged) problems += std::to_string(damaged) + " damaged ";
    if (problems.empty()) problems = "-";
    char status_col[64];
    std::snprintf(status_col, sizeof(status_col), "%-28s", status.c_str());
    std::printf("  %-6d %s %10zu %11s %10s %10s %7s %10s %s\n", row.rank, Paint(c, status_col).c_str(),
                row.events, HumanDuration(span).c_str(), HumanBytes(s.stored_bytes).c_str(),
                HumanBytes(s.raw_bytes).c_str(), ratio,
                s.payload_bytes ? HumanBytes(s.payload_bytes).c_str() : "-", problems.c_str());
  }
  // How NCCL was recorded, rank ranges by way.
  std::map<std::string, std::vector<int32_t>> by_path;
  for (const RankRow& row : rows) {
    std::string path;
    for (const std::string& p : row.nccl_paths) path += (path.empty() ? "" : " and ") + p;
    if (!path.empty()) by_path[path].push_back(row.rank);
  }
  if (!by_path.empty()) {
    std::printf("\n  NCCL recorded through:\n");
    for (const auto& [path, ranks] : by_path) {
      std::printf("    %s: %s\n", path == "api" ? "the NCCL API (libnccl.so.2 loaded by the program)"
                                               : path == "profiler plugin"
                                                     ? "NCCL's profiler plugin (NCCL linked into the program)"
                                                     : path.c_str(),
                  ("rank" + std::string(ranks.size() == 1 ? " " : "s ") + analysis::FormatRanks(ranks)).c_str());
    }
  }
  bool any = !t.problems().empty();
  for (const RankRow& row : rows) any = any || !row.problems.empty() || !row.recording_error.empty();
  if (any) {
    std::printf("\n  problems:\n");
    for (const TraceProblem& p : t.problems()) std::printf("    %s: %s\n", p.file.c_str(), p.message.c_str());
    for (const RankRow& row : rows) {
      if (!row.recording_error.empty()) {
        std::printf("    rank %d: recording stopped: %s", row.rank, row.recording_error.c_str());
        if (row.stats.unrecorded) std::printf("; %llu later calls were not recorded", static_cast<unsigned long long>(row.stats.unrecorded));
        std::printf("\n");
      }
      for (const TraceProblem& p : row.problems) {
        std::printf("    rank %d: %s", row.rank, p.file.c_str());
        if (p.length) std::printf(" at offset %llu (%llu bytes)", static_cast<unsigned long long>(p.offset),
                                  static_cast<unsigned long long>(p.length));
        std::printf(": %s\n", p.message.c_str());
      }
    }
  }
  return kExitOk;
}

}  // namespace

void AddInfoCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(app, "info", "Summarise a trace: ranks, status, events, sizes", kHelp,
                                        exit_code, [](const Options& o) { return Run(o.dir, o.json, !o.no_redact); });
  cmd->add_option("DIR", opt->dir, "Trace directory")->required();
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->add_flag("--no-redact", opt->no_redact, "Show the recorded command with its secrets");
}

}  // namespace replay::cli
