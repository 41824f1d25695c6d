// traces.h: reading what an end-to-end test recorded, and what check says of it.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/trace_reader.h"

namespace replay::testing {

// One rank of a recorded trace.
struct TraceRank {
  std::unique_ptr<RankReader> reader;
  const std::vector<Event>& events() const { return reader->events(); }
  const RankHeader& header() const { return reader->header(); }
  std::string Api(uint16_t api) const { return header().ApiName(api); }
  // The function of an op, return, completion or test event; "" for others.
  std::string Api(const Event& e) const;
  // Op events of `api`, in order.
  std::vector<const Event*> Ops(const std::string& api) const;
  // Events of kind `k`, in order.
  std::vector<const Event*> OfKind(EventKind k) const;
  // The values of the rank's info events under `key`, in order.
  std::vector<std::string> Info(const std::string& key) const;
};

// Every rank of the trace in `dir`, by rank (the test fails if it cannot be read).
std::map<int, TraceRank> ReadTrace(const std::string& dir);

// `replay check --json dir`: its report, and its exit status in *exit_code
// (the test fails unless it is 0 or 1).
nlohmann::json CheckTrace(const std::string& dir, int* exit_code);
// The same of a trace that must have findings: check exits 1 and reports at
// least one (the findings are in the test's messages when it does not).
nlohmann::json CheckFaulty(const std::string& dir);
// A report's findings, one "kind: title" line each (for INFO).
std::string Titles(const nlohmann::json& report);

std::vector<std::string> Sorted(std::vector<std::string> v);

}  // namespace replay::testing
