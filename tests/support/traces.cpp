#include "support/traces.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "support/run.h"

namespace replay::testing {

std::vector<std::string> TraceRank::Info(const std::string& key) const {
  std::vector<std::string> out;
  for (const Event& e : events()) {
    if (e.kind == EventKind::kInfo && e.info_key() == key) out.emplace_back(e.info_value());
  }
  return out;
}

std::string TraceRank::Api(const Event& e) const {
  switch (e.kind) {
    case EventKind::kOp: return Api(e.op.api);
    case EventKind::kReturn: return Api(e.ret.api);
    case EventKind::kCompletion: return Api(e.completion.api);
    case EventKind::kTest: return Api(e.test.api);
    default: return "";
  }
}

std::vector<const Event*> TraceRank::Ops(const std::string& api) const {
  std::vector<const Event*> out;
  for (const Event& e : events()) {
    if (e.kind == EventKind::kOp && Api(e) == api) out.push_back(&e);
  }
  return out;
}

std::vector<const Event*> TraceRank::OfKind(EventKind k) const {
  std::vector<const Event*> out;
  for (const Event& e : events()) {
    if (e.kind == k) out.push_back(&e);
  }
  return out;
}

std::map<int, TraceRank> ReadTrace(const std::string& dir) {
  auto t = TraceReader::Open(dir);
  REQUIRE(t.ok());
  std::map<int, TraceRank> out;
  for (size_t i = 0; i < (*t)->ranks().size(); ++i) {
    auto r = (*t)->OpenRank(i);
    REQUIRE(r.ok());
    int rank = (*r)->rank();
    out[rank].reader = std::move(r).value();
  }
  return out;
}

nlohmann::json CheckTrace(const std::string& dir, int* exit_code) {
  RunResult r = Run(Replay() + " check --json " + dir, 60);
  INFO(r.output);
  *exit_code = r.exit_code;
  REQUIRE((r.exit_code == 0 || r.exit_code == 1));
  return nlohmann::json::parse(r.output);
}

nlohmann::json CheckFaulty(const std::string& dir) {
  int code = -1;
  nlohmann::json report = CheckTrace(dir, &code);
  INFO(Titles(report));
  CHECK(code == 1);
  REQUIRE(!report["findings"].empty());
  return report;
}

std::string Titles(const nlohmann::json& report) {
  std::string s;
  for (const auto& f : report["findings"]) {
    s += f["kind"].get<std::string>() + ": " + f["title"].get<std::string>() + "\n";
  }
  return s;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace replay::testing
