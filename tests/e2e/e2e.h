// e2e.h: what the end-to-end tests share. Each runs real programs from the
// build tree (support/run.h) in a scratch directory (support/temp_dir.h) and
// reads back what they recorded (support/traces.h); this header names those
// helpers in namespace replay as every test calls them, and holds the checks
// that several tests make of the same commands' output.
#pragma once

#include <catch2/catch.hpp>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run.h"
#include "support/temp_dir.h"
#include "support/traces.h"

namespace replay {

using nlohmann::json;
using testing::CheckFaulty;
using testing::CheckTrace;
using testing::Grep;
using testing::Mpirun;
using testing::MpiTrain;
using testing::ReadTrace;
using testing::Replay;
using testing::Run;
using testing::RunApart;
using testing::RunResult;
using testing::Sorted;
using testing::TempDir;
using testing::TestProgram;
using testing::Titles;
using testing::TraceRank;

// What `command` printed, run to an end that must be a success.
inline std::string Succeeded(const std::string& command, int timeout_s = 120) {
  RunResult r = Run(command, timeout_s);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

// Each of `needles` is in exactly one line of `output`.
inline void CheckOneLineEach(const std::string& output, std::initializer_list<const char*> needles) {
  for (const char* needle : needles) {
    INFO("lines with: " << needle);
    CHECK(Grep(output, needle).size() == 1);
  }
}

// The check of a trace in `dir` that holds nothing wrong: check exits 0 and
// finds nothing. Its report.
inline json CheckClean(const std::string& dir) {
  int exit_code = -1;
  json report = CheckTrace(dir, &exit_code);
  INFO(Titles(report));
  CHECK(exit_code == 0);
  CHECK(report["findings"].empty());
  return report;
}

// The first finding of the check of a faulty trace in `dir` (check exits 1):
// of `kind`, against exactly `ranks`, in a call of `op` (of any, when empty).
inline json FirstFinding(const std::string& dir, const std::string& kind, const json& ranks,
                         const std::string& op = "") {
  json report = CheckFaulty(dir);
  INFO(Titles(report));
  const json& f = report["findings"][0];
  CHECK(f["kind"] == kind);
  CHECK(f["ranks"] == ranks);
  if (!op.empty()) CHECK(f["op"] == op);
  return f;
}

// `rerun --rank R` printed `re`, of a job that printed `rec` when recorded:
// it says it reproduced, and rank R printed the same losses and, once, the
// same final parameters.
inline void CheckRerunPrintsRecorded(const RunResult& rec, const RunResult& re, int rank) {
  const std::string r = "rank " + std::to_string(rank);
  INFO(re.output);
  CHECK(re.exit_code == 0);
  CHECK(Grep(re.output, "reproduced").size() == 1);
  CHECK(Sorted(Grep(re.output, r + " loss")) == Sorted(Grep(rec.output, r + " loss")));
  REQUIRE(Grep(re.output, r + " final-params").size() == 1);
  CHECK(Grep(re.output, r + " final-params") == Grep(rec.output, r + " final-params"));
}

}  // namespace replay
