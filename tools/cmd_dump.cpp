// replay dump DIR [--rank R] [--events N-M] [--json]: the events themselves.
#include <charconv>
#include <cstdio>
#include <string_view>
#include <limits>

#include "command.h"
#include "replay/event_format.h"
#include "replay/trace_reader.h"
#include "trace/event_json.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Print the recorded events of a trace, one per line: index, time since the
rank started, thread, kind and the kind's fields. Ranges: N (one event), N-M
(inclusive), N- (from N to the end).

Exit status: 0 when the trace was read, 2 when it (or one of the ranks asked
for) could not be, or the range selects no event; the ranks that could be read
are printed all the same.)";

struct Options {
  std::string dir;
  std::vector<int> ranks;
  std::string events;
  bool json = false;
};

struct Range {
  uint64_t first = 0;
  uint64_t last = std::numeric_limits<uint64_t>::max();
  bool given = false;
  std::string text;
};

Result<Range> ParseRange(const std::string& s) {
  Range r;
  if (s.empty()) return r;
  r.given = true;
  r.text = s;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--events " + s + ": " + why + " (use N, N-M or N-, e.g. --events 100-200)");
  };
  // One index: a Status saying what is wrong with it, if anything.
  auto index = [&](std::string_view part, uint64_t* out) -> Status {
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), *out);
    if (ec == std::errc::result_out_of_range) return bad(std::string(part) + " is larger than any event index");
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) {
      return bad((part.empty() ? s : std::string(part)) + " is not an event index");
    }
    return Status::Ok();
  };
  size_t dash = s.find('-');
  REPLAY_RETURN_IF_ERROR(index(std::string_view(s).substr(0, dash), &r.first));
  r.last = r.first;
  if (dash != std::string::npos) {
    std::string_view rest = std::string_view(s).substr(dash + 1);
    r.last = std::numeric_limits<uint64_t>::max();
    if (!rest.empty()) REPLAY_RETURN_IF_ERROR(index(rest, &r.last));
  }
  if (r.last < r.first) return bad("the range ends before it starts");
  return r;
}

// "events 0-63", "no events".
std::string IndexSpan(const std::vector<Event>& events) {
  if (events.empty()) return "no events";
  return "events " + std::to_string(events.front().index) + "-" + std::to_string(events.back().index);
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
  // Ranks that could not be read do not keep the others from being shown;
  // they are named at the end, and the exit status says so.
  std::vector<std::string> unreadable;
  std::vector<std::string> spans;  // what each rank holds, for a range that selects nothing
  size_t shown = 0;
  for (size_t i : which) {
    auto r = t.OpenRank(i);
    if (!r.ok()) {
      unreadable.push_back(t.ranks()[i].name + ": " + r.status().message());
      if (!json) std::printf("== %s: unreadable: %s ==\n", t.ranks()[i].name.c_str(), r.status().message().c_str());
      continue;
    }
    const RankReader& rr = **r;
    spans.push_back("rank " + std::to_string(rr.rank()) + " has " + IndexSpan(rr.events()));
    size_t before = shown;
    if (json) {
      nlohmann::json jr;
      jr["rank"] = rr.rank();
      jr["status"] = std::string(RankStatusName(rr.status()));
      jr["events"] = nlohmann::json::array();
      for (const Event& e : rr.events()) {
        if (e.index < range->first || e.index > range->last) continue;
        jr["events"].push_back(EventToJson(e, rr.header()));
        ++shown;
      }
      jr["problems"] = nlohmann::json::array();
      for (const TraceProblem& p : rr.problems()) {
        jr["problems"].push_back({{"file", p.file}, {"offset", p.offset}, {"message", p.message}});
      }
      out["ranks"].push_back(std::move(jr));
      continue;
    }
    std::printf("== rank %d (%s, %zu events) ==\n", rr.rank(),
                std::string(RankStatusName(rr.status())).c_str(), rr.events().size());
    for (const Event& e : rr.events()) {
      if (e.index < range->first || e.index > range->last) continue;
      std::printf("%s\n", FormatEvent(e, rr.header()).c_str());
      ++shown;
    }
    if (range->given && shown == before) {
      std::printf("(none of its %s is in %s)\n", IndexSpan(rr.events()).c_str(), range->text.c_str());
    }
    for (const TraceProblem& p : rr.problems()) {
      std::printf("!! %s: %s\n", p.file.c_str(), p.message.c_str());
    }
  }
  if (json) std::printf("%s\n", JsonText(out, 1).c_str());
  if (!unreadable.empty()) {
    std::string list;
    for (const std::string& u : unreadable) list += (list.empty() ? "" : "; ") + u;
    return Fail("dump", std::to_string(unreadable.size()) + " of " + std::to_string(which.size()) +
                            " ranks could not be read: " + list);
  }
  if (range->given && shown == 0) {
    std::string held;
    for (const std::string& s : spans) held += (held.empty() ? "" : ", ") + s;
    return Fail("dump", "--events " + range->text + " selects no event: " + held);
  }
  return kExitOk;
}

}  // namespace

void AddDumpCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(app, "dump", "Print the recorded events", kHelp, exit_code,
                                        [](const Options& o) { return Run(o.dir, o.ranks, o.events, o.json); });
  cmd->add_option("DIR", opt->dir, "Trace directory")->required();
  cmd->add_option("--rank,-r", opt->ranks, "Only these ranks (repeatable)");
  cmd->add_option("--events,-e", opt->events, "Only events N, N-M or N-");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
}

}  // namespace replay::cli
