#include "shrink/finding_key.h"

#include <algorithm>
#include <cctype>

#include "util/json.h"

namespace replay::shrink {
namespace {

int32_t Origin(const std::vector<int32_t>& origin, int64_t r) {
  if (origin.empty()) return static_cast<int32_t>(r);
  return r >= 0 && static_cast<size_t>(r) < origin.size() ? origin[static_cast<size_t>(r)] : -1;
}

std::set<int32_t> RankSet(const nlohmann::json& j, const std::vector<int32_t>& origin) {
  std::set<int32_t> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    if (v.is_number_integer()) out.insert(Origin(origin, v.get<int64_t>()));
  }
  return out;
}

std::string Text(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The program calling MPI_Abort.
bool IsAbort(const Finding& f) {
  return f.kind == FindingKind::kError && ParseJsonObject(f.data).value("abort", false);
}

}  // namespace

std::string PlainCommName(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '@' && i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
      while (i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) ++i;
      continue;
    }
    out += name[i];
  }
  return out;
}

std::string OperationOf(const std::string& api) {
  std::string s;
  size_t from = api.rfind("MPI_", 0) == 0 ? 4 : api.rfind("nccl", 0) == 0 ? 4 : 0;
  for (size_t i = from; i < api.size(); ++i) {
    if (api[i] != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(api[i])));
  }
  static const char* const kBlocking[] = {"allreduce", "bcast",   "reduce", "allgather", "alltoall",
                                          "gather",    "scatter", "barrier", "reducescatter",
                                          "reducescatterblock", "scan", "exscan", "send", "recv",
                                          "allgatherv", "alltoallv", "gatherv", "scatterv", "ssend"};
  if (s.size() > 1 && s[0] == 'i') {
    for (const char* b : kBlocking) {
      if (s.compare(1, std::string::npos, b) == 0) s.erase(0, 1);
    }
  }
  if (s == "broadcast") return "bcast";
  if (s == "reducescatter" && api.rfind("nccl", 0) == 0) return "reducescatterblock";
  if (s == "ssend") return "send";
  return s;
}

FindingKey KeyOf(const Finding& f, const std::vector<int32_t>& origin) {
  FindingKey k;
  k.kind = f.kind;
  k.op = f.op;
  if (f.comm) k.comm = PlainCommName(f.comm->name);
  for (int32_t r : f.ranks) k.ranks.insert(Origin(origin, r));
  const nlohmann::json data = ParseJsonObject(f.data);
  k.stuck = RankSet(data.value("stuck", nlohmann::json::array()), origin);
  if (f.kind == FindingKind::kMismatch) k.field = Text(data, "field");
  if (f.kind == FindingKind::kError) {
    if (!Text(data, "signal").empty()) {
      k.error = "signal " + Text(data, "signal");
    } else if (data.value("abort", false)) {
      k.error = "abort";
    } else {
      k.error = Text(data, "source") + " " + std::to_string(data.value("code", 0));
    }
  }
  if (f.kind == FindingKind::kMissingRanks) {
    for (const auto& m : data.value("missing", nlohmann::json::array())) {
      if (!m.is_object() || !m.contains("rank") || !m["rank"].is_number_integer()) continue;
      const int32_t r = Origin(origin, m["rank"].get<int64_t>());
      auto b = m.find("blocked_in");
      k.blocked_in[r] = b != m.end() && b->is_object()
                            ? Text(*b, "api") + " on " + PlainCommName(Text(*b, "comm_name"))
                            : std::string("(not blocked)");
    }
  }
  return k;
}

bool SameFinding(const FindingKey& target, const FindingKey& got, const std::set<int32_t>& kept, CallMatch match,
                 std::string* why) {
  auto differs = [&](const std::string& what) {
    if (why != nullptr) *why = what;
    return false;
  };
  if (target.kind != got.kind) return differs("another kind of finding");
  if (target.field != got.field) return differs("another field differs (" + got.field + ")");
  if (target.error != got.error) return differs("another error (" + got.error + ")");
  if (match == CallMatch::kApi) {
    if (target.op != got.op) return differs("another call (" + got.op + ")");
    if (target.comm != got.comm) return differs("another communicator (" + got.comm + ")");
  } else if (OperationOf(target.op) != OperationOf(got.op)) {
    return differs("another operation (" + got.op + ")");
  }
  std::set<int32_t> expected;
  for (int32_t r : target.ranks) {
    if (kept.count(r) != 0) expected.insert(r);
  }
  if (expected.empty()) return differs("none of the ranks at fault is left");
  if (got.ranks != expected) return differs("other ranks at fault");
  // A hang is the same when the same ranks wait in the same calls; what a
  // mismatch or an error then does to the ranks is the library's business.
  const bool hang = target.kind == FindingKind::kMissingRanks || target.kind == FindingKind::kNeverCompleted ||
                    target.kind == FindingKind::kUnmatchedP2p;
  if (hang && !std::includes(target.stuck.begin(), target.stuck.end(), got.stuck.begin(), got.stuck.end())) {
    return differs("other ranks wait");
  }
  for (const auto& [r, where] : got.blocked_in) {
    auto it = target.blocked_in.find(r);
    if (it == target.blocked_in.end()) return differs("another rank is missing");
    if (match == CallMatch::kApi && it->second != where) {
      return differs("recorded rank " + std::to_string(r) + " waits elsewhere (" + where + ")");
    }
  }
  return true;
}

bool DrivableKind(FindingKind kind) {
  return kind == FindingKind::kMismatch || kind == FindingKind::kError || kind == FindingKind::kMissingRanks ||
         kind == FindingKind::kUnmatchedP2p || kind == FindingKind::kNeverCompleted;
}

const Finding* PickFinding(const CheckReport& report, const std::string& keep) {
  for (const Finding& f : report.findings) {
    if (!keep.empty()) {
      if (FindingKindName(f.kind) == keep) return &f;
      continue;
    }
    // MPI_Abort is the program giving up, not a fault of the library: what
    // made it give up comes first.
    if (DrivableKind(f.kind) && !IsAbort(f)) {
      return &f;
    }
  }
  return nullptr;
}

const Finding* MatchingFinding(const CheckReport& report, const std::string& keep, const FindingKey& target,
                               const std::vector<int32_t>& origin, CallMatch match, std::string* why) {
  const Finding* first = PickFinding(report, keep);
  if (first == nullptr) {
    *why = report.findings.empty() ? "no finding" : "no such finding (" + report.findings.front().title + ")";
    return nullptr;
  }
  if (first->kind != target.kind) {
    *why = "another fault first: " + first->title;
    return nullptr;
  }
  const std::set<int32_t> kept(origin.begin(), origin.end());
  std::string first_why;
  for (const Finding& f : report.findings) {
    std::string d;
    if (f.kind == target.kind && SameFinding(target, KeyOf(f, origin), kept, match, &d)) return &f;
    if (&f == first) first_why = d;
  }
  *why = first_why + ": " + first->title;
  return nullptr;
}

std::vector<const Finding*> TargetFindings(const CheckReport& report, const Finding& picked) {
  std::vector<const Finding*> out{&picked};
  for (const Finding& f : report.findings) {
    if (&f != &picked && f.kind == picked.kind && IsAbort(f) == IsAbort(picked)) out.push_back(&f);
  }
  return out;
}

const Finding* MatchingTarget(const CheckReport& report, const std::string& keep,
                              const std::vector<FindingKey>& targets, const std::vector<int32_t>& origin,
                              CallMatch match, std::string* why, size_t* which) {
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string w;
    if (const Finding* f = MatchingFinding(report, keep, targets[i], origin, match, &w)) {
      if (which != nullptr) *which = i;
      return f;
    }
    if (i == 0 && why != nullptr) *why = w;
  }
  return nullptr;
}

}  // namespace replay::shrink
