// exported.h: a trace on disk run through one of the interop writers (JSON
// Lines, Perfetto JSON or protobuf), for the tests of those writers. Fails the
// test where the trace does not open or the writer fails.
#pragma once

#include <catch2/catch.hpp>
#include <ostream>
#include <sstream>
#include <string>

#include "replay/trace_reader.h"

namespace replay::testing {

// What `write` writes of the trace in `dir` with `options`; its summary goes
// into `summary` unless that is null.
template <typename Summary, typename Options>
std::string Exported(const std::string& dir,
                     Result<Summary> (*write)(const TraceReader&, std::ostream&, const Options&),
                     const Options& options, Summary* summary) {
  auto trace = TraceReader::Open(dir);
  REQUIRE(trace.ok());
  std::ostringstream out;
  auto s = write(**trace, out, options);
  REQUIRE(s.ok());
  if (summary != nullptr) *summary = *s;
  return out.str();
}

}  // namespace replay::testing
