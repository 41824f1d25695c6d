// checked_trace.h: a trace on disk, read back and checked in process, for the
// tests of the check and of what presents its findings (reports, exports,
// bundles). Each helper fails the test where the trace does not open or the
// check does not run.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "replay/check.h"
#include "replay/trace_reader.h"

namespace replay::testing {

// Synthetic jobs die right after a rank enters the call it hangs in: no
// minimum wait, unless a test asks for one.
inline CheckOptions NoWait() {
  CheckOptions o;
  o.min_wait_ns = 0;
  return o;
}

// The reader stays open: renderers read the trace again beside the report.
struct CheckedTrace {
  std::unique_ptr<TraceReader> trace;
  CheckReport report;
};

inline CheckedTrace OpenAndCheck(const std::string& dir, const CheckOptions& options = NoWait()) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  auto report = CheckTrace(**trace, options);
  REQUIRE(report.ok());
  return {std::move(trace).value(), std::move(report).value()};
}

inline CheckReport CheckDir(const std::string& dir, const CheckOptions& options = NoWait()) {
  return OpenAndCheck(dir, options).report;
}

// "kind: title", a line per finding, for INFO.
inline std::string Titles(const CheckReport& r) {
  std::string s;
  for (const Finding& f : r.findings) s += std::string(FindingKindName(f.kind)) + ": " + f.title + "\n";
  return s;
}

}  // namespace replay::testing
