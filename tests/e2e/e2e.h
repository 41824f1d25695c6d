// e2e.h: what the end-to-end tests share. Each runs real programs from the
// build tree (support/run.h) in a scratch directory (support/temp_dir.h) and
// reads back what they recorded (support/traces.h); this header names those
// helpers in namespace replay as every test calls them, and holds the checks
// that several tests make of the same commands' output.
#pragma once

#include <catch2/catch.hpp>
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

}  // namespace replay
