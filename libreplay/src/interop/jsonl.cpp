// JSON Lines output; see replay/jsonl.h for what a line holds.
#include "replay/jsonl.h"

#include <set>
#include <unordered_map>

#include "analysis/call_site.h"
#include "analysis/comm_lineage.h"
#include "trace/event_json.h"
#include "trace/python_sites.h"
#include "trace/read_progress.h"
#include "util/json.h"

namespace replay {
namespace {

// World rank of communicator rank `r` of `comm`, or -1 when its members are not known.
int32_t WorldRank(const analysis::CommLineage& lineage, uint64_t comm, int32_t r) {
  const std::vector<int32_t>& members = lineage.Members(comm);
  if (r < 0 || static_cast<size_t>(r) >= members.size()) return -1;
  return members[static_cast<size_t>(r)];
}

// What a line adds to the event as `dump --json` writes it.
void AddNames(const Event& e, int32_t rank, const RankHeader& header, const analysis::CommLineage& lineage,
              nlohmann::json& j) {
  // A creation's own "rank" is the rank in the new communicator; "rank" is
  // the world rank on every line.
  if (e.kind == EventKind::kCommCreate) {
    j["comm_rank"] = j["rank"];
    j.erase("rank");
  }
  j["rank"] = rank;
  j["realtime_ns"] = header.start_realtime_ns + e.time_ns;
  uint64_t comm = 0;
  switch (e.kind) {
    case EventKind::kOp: {
      comm = e.op.comm;
      const bool p2p = e.op.kind == OpKind::kSend || e.op.kind == OpKind::kRecv ||
                       e.op.kind == OpKind::kSendrecv || e.op.kind == OpKind::kMrecv;
      if (p2p && e.op.peer >= 0) {
        if (int32_t w = WorldRank(lineage, comm, e.op.peer); w >= 0) j["peer_world"] = w;
      }
      if (IsCollective(e.op.kind) && e.op.root >= 0) {
        if (int32_t w = WorldRank(lineage, comm, e.op.root); w >= 0) j["root_world"] = w;
      }
      break;
    }
    case EventKind::kCommCreate:
      comm = e.comm_create.comm;
      if (e.comm_create.parent != 0) j["parent_name"] = lineage.Name(e.comm_create.parent);
      break;
    case EventKind::kCommFree: comm = e.comm_free.comm; break;
    case EventKind::kError: comm = e.error.comm; break;
    default: break;
  }
  if (comm != 0) j["comm_name"] = lineage.Name(comm);
}

}  // namespace

Result<JsonLinesSummary> WriteJsonLines(const TraceReader& trace, std::ostream& out, const JsonLinesOptions& options) {
  std::set<int32_t> wanted(options.ranks.begin(), options.ranks.end());
  std::vector<size_t> chosen;
  for (size_t i = 0; i < trace.ranks().size(); ++i) {
    if (wanted.empty() || wanted.count(trace.ranks()[i].rank) != 0) chosen.push_back(i);
  }
  JsonLinesSummary summary;
  ReadOptions stream;
  stream.stream = true;

  // First pass: the communicators, named as `check` names them, which takes
  // every creation of every rank before the first name is known.
  analysis::CommLineage lineage;
  std::vector<size_t> readable;
  {
    ProgressTally progress(trace, chosen, options.progress);
    for (size_t i : chosen) {
      auto reader = trace.OpenRank(i, stream);
      if (!reader.ok()) {
        summary.notes.push_back(trace.ranks()[i].name + ": " + reader.status().message());
        progress.RankDone();
        continue;
      }
      const RankReader& r = **reader;
      uint64_t walked = 0;
      (void)r.ForEachEvent(progress.Counting([&](const Event& e) {
        ++walked;
        if (e.kind == EventKind::kCommCreate) lineage.Add(analysis::CommRecordOf(e, r.header()), r.rank());
        return true;
      }));
      readable.push_back(i);
      progress.RankDone(walked);
    }
  }
  if (readable.empty()) return Status::NotFound(trace.dir() + ": no rank to export");
  lineage.Finish();

  // Second pass: the events, a line each.
  ProgressTally progress(trace, readable, options.progress);
  analysis::SymbolResolver symbols;
  std::string line;
  for (size_t i : readable) {
    auto reader = trace.OpenRank(i, stream);
    if (!reader.ok()) {
      summary.notes.push_back(trace.ranks()[i].name + ": " + reader.status().message());
      progress.RankDone();
      continue;
    }
    const RankReader& r = **reader;
    uint64_t walked = 0;
    // Call sites resolved once each; a Python site is written before the
    // first event made from it.
    std::unordered_map<uint64_t, PythonSite> python_sites;
    std::unordered_map<uint64_t, std::string> sites;
    auto walk = r.ForEachEvent(progress.Counting([&](const Event& e) {
      ++walked;
      nlohmann::json j = EventToJson(e, r.header());
      AddNames(e, r.rank(), r.header(), lineage, j);
      if (e.kind == EventKind::kInfo && e.info_key() == kPythonSiteKey) {
        if (auto site = DecodePythonSite(e.info_value())) python_sites[site->id] = std::move(*site);
      }
      if (e.call_site != 0) {
        auto at = sites.find(e.call_site);
        if (at == sites.end()) {
          CallSite site = symbols.Resolve(e.call_site, r.header().modules, python_sites);
          at = sites.emplace(e.call_site, site.known() ? FormatCallSite(site) : "").first;
        }
        if (!at->second.empty()) j["site"] = at->second;
      }
      line = JsonText(j);
      line += '\n';
      out.write(line.data(), static_cast<std::streamsize>(line.size()));
      return static_cast<bool>(out);
    }));
    progress.RankDone(walked);
    if (!out) return Status::IoError("writing the JSON Lines failed");
    summary.events += walked;
    ++summary.ranks;
    if (!walk.ok()) {
      summary.notes.push_back(trace.ranks()[i].name + ": " + walk.status().message());
      continue;
    }
    for (const TraceProblem& p : walk->problems) summary.notes.push_back(p.file + ": " + p.message);
  }
  out.flush();
  if (!out) return Status::IoError("writing the JSON Lines failed");
  return summary;
}

}  // namespace replay
