// replay dump DIR [--rank R] [--events N-M] [--json]: the events themselves.
#include <cstdio>
#include <limits>

#include "command.h"
#include "replay/event_format.h"
#include "replay/trace_reader.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Print the recorded events of a trace, one per line: index, time since the
rank started, thread, kind and the kind's fields. Ranges: N (one event), N-M
(inclusive), N- (from N to the end).

Exit status: 0 when the trace was read, 2 when it could not be.)";

struct Range {
  uint64_t first = 0;
  uint64_t last = std::numeric_limits<uint64_t>::max();
};

Result<Range> ParseRange(const std::string& s) {
  Range r;
  if (s.empty()) return r;
  auto num = [&](const std::string& part, uint64_t* out) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoull(part);
    return true;
  };
  size_t dash = s.find('-');
  bool ok = dash == std::string::npos
                ? num(s, &r.first) && (r.last = r.first, true)
                : num(s.substr(0, dash), &r.first) &&
                      (dash + 1 == s.size() || num(s.substr(dash + 1), &r.last));
  if (!ok || r.last < r.first) {
    return Status::InvalidArgument("--events " + s + " is not a range: use N, N-M or N-");
  }
  return r;
}

int Run(const std::string& dir, const std::vector<int>& ranks, const std::string& events, bool json) {
  auto range = ParseRange(events);
  if (!range.ok()) return Fail("dump", range.status());
  auto trace = OpenTrace(dir);
  if (!trace.ok()) return Fail("dump", trace.status());
  const TraceReader& t = **trace;
  std::vector<size_t> which;
  if (ranks.empty()) {
    for (size_t i = 0; i < t.ranks().size(); ++i) which.push_back(i);
  } else {
    for (int r : ranks) {
      bool found = false;
      for (size_t i = 0; i < t.ranks().size(); ++i) {
        if (t.ranks()[i].rank == r) {
          which.push_back(i);
          found = true;
        }
      }
      if (!found) {
        return Fail("dump", "rank " + std::to_string(r) + " is not in " + dir + " (it has " +
                                std::to_string(t.ranks().size()) + " ranks; see `replay info " + dir + "`)");
      }
    }
  }
  nlohmann::json out = nlohmann::json::object();
  out["ranks"] = nlohmann::json::array();
  for (size_t i : which) {
    auto r = t.OpenRank(i);
    if (!r.ok()) return Fail("dump", r.status());
    const RankReader& rr = **r;
    if (json) {
      nlohmann::json jr;
      jr["rank"] = rr.rank();
      jr["status"] = std::string(RankStatusName(rr.status()));
      jr["events"] = nlohmann::json::array();
      for (const Event& e : rr.events()) {
        if (e.index < range->first || e.index > range->last) continue;
        jr["events"].push_back(EventToJson(e, rr.header()));
      }
      out["ranks"].push_back(std::move(jr));
      continue;
    }
    std::printf("== rank %d (%s, %zu events) ==\n", rr.rank(),
                std::string(RankStatusName(rr.status())).c_str(), rr.events().size());
    for (const Event& e : rr.events()) {
      if (e.index < range->first || e.index > range->last) continue;
      std::printf("%s\n", FormatEvent(e, rr.header()).c_str());
    }
    for (const TraceProblem& p : rr.problems()) {
      std::printf("!! %s: %s\n", p.file.c_str(), p.message.c_str());
    }
  }
  if (json) std::printf("%s\n", JsonText(out, 1).c_str());
  return kExitOk;
}

}  // namespace

void AddDumpCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("dump", "Print the recorded events");
  cmd->footer(kHelp);
  auto dir = std::make_shared<std::string>();
  auto ranks = std::make_shared<std::vector<int>>();
  auto events = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("DIR", *dir, "Trace directory")->required();
  cmd->add_option("--rank,-r", *ranks, "Only these ranks (repeatable)");
  cmd->add_option("--events,-e", *events, "Only events N, N-M or N-");
  cmd->add_flag("--json", *json, "Print JSON instead of text");
  cmd->callback([=] { *exit_code = Run(*dir, *ranks, *events, *json); });
}

}  // namespace replay::cli
