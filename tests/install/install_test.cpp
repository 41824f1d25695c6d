// What `cmake --install` lays out, used from outside the tree: the command
// records with the preload it finds beside itself, a separate CMake project
// finds the package and reads that trace, and so does a program built with
// pkg-config alone.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "support/run.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using replay::testing::Grep;
using replay::testing::Mpirun;
using replay::testing::MpiTrain;
using replay::testing::Run;
using replay::testing::RunResult;
using replay::testing::TempDir;

namespace {

// The lines of `out` starting with "rank ".
std::vector<std::string> RankLines(const std::string& out) {
  std::vector<std::string> lines;
  for (const std::string& l : Grep(out, "rank ")) {
    if (l.rfind("rank ", 0) == 0) lines.push_back(l);
  }
  return lines;
}

}  // namespace

TEST_CASE("an installed replay records, and outside projects read its traces through CMake and pkg-config",
          "[install]") {
  TempDir tmp;
  const std::string prefix = tmp / "prefix";
  RunResult install = Run(std::string(REPLAY_CMAKE_COMMAND) + " --install " + REPLAY_BUILD_DIR + " --prefix " + prefix, 120);
  INFO(install.output);
  REQUIRE(install.exit_code == 0);
  const std::string libdir = prefix + "/" + REPLAY_INSTALL_LIBDIR;
  for (const std::string& f : {prefix + "/bin/replay", prefix + "/bin/replay-drive", libdir + "/libreplay_interpose.so",
                               libdir + "/libreplay_core.a", libdir + "/cmake/replay/replayConfig.cmake",
                               libdir + "/cmake/replay/replayConfigVersion.cmake", libdir + "/pkgconfig/replay.pc",
                               prefix + "/include/replay/trace_reader.h", prefix + "/include/replay/replay.h"}) {
    CHECK(fs::exists(f));
  }

  SECTION("the public headers include only the standard library and each other") {
    const std::regex include_line(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
    int headers = 0;
    for (const auto& entry : fs::directory_iterator(prefix + "/include/replay")) {
      ++headers;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, include_line)) continue;
        const std::string header = m[1];
        INFO(entry.path().filename().string() << ": " << line);
        CHECK((header.rfind("replay/", 0) == 0 || header.find('/') == std::string::npos));
      }
    }
    CHECK(headers >= 10);
  }

  SECTION("the installed command finds its preload, and both kinds of outside build read the trace") {
    const std::string trace = tmp / "trace";
    // REPLAY_INTERPOSE_LIB unset: the command must find the preload itself.
    RunResult rec = Run("unset REPLAY_INTERPOSE_LIB; " + prefix + "/bin/replay record -o " + trace + " -- " +
                            Mpirun(2) + " " + MpiTrain() + " --steps 3 --ckpt-every 0",
                        120);
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
    RunResult info = Run(prefix + "/bin/replay info " + trace);
    INFO(info.output);
    REQUIRE(info.exit_code == 0);

    // CMake: find_package(replay) and replay::core.
    const std::string build = tmp / "consumer";
    RunResult configure = Run(std::string(REPLAY_CMAKE_COMMAND) + " -S " + REPLAY_SOURCE_DIR +
                                  "/tests/install/consumer -B " + build + " -DCMAKE_PREFIX_PATH=" + prefix +
                                  " -DCMAKE_CXX_COMPILER=" + REPLAY_CXX_COMPILER,
                              300);
    INFO(configure.output);
    REQUIRE(configure.exit_code == 0);
    RunResult make = Run(std::string(REPLAY_CMAKE_COMMAND) + " --build " + build, 300);
    INFO(make.output);
    REQUIRE(make.exit_code == 0);
    RunResult cmake_read = Run(build + "/read_trace " + trace);
    INFO(cmake_read.output);
    REQUIRE(cmake_read.exit_code == 0);
    CHECK(cmake_read.output.find("command " + prefix + "/bin/replay") != std::string::npos);
    std::vector<std::string> ranks = RankLines(cmake_read.output);
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[0].rfind("rank 0 complete ", 0) == 0);
    CHECK(ranks[1].rfind("rank 1 complete ", 0) == 0);
    CHECK(Grep(cmake_read.output, "first call: MPI_Init").size() == 2);
    CHECK(Grep(cmake_read.output, "findings 0").size() == 1);
    // The Perfetto protobuf export links too (the package brings protobuf's runtime).
    const std::regex pftrace_line(R"(pftrace ([1-9][0-9]*) packets [1-9][0-9]* bytes)");
    std::smatch pftrace;
    CHECK(std::regex_search(cmake_read.output, pftrace, pftrace_line));

    // pkg-config alone.
    RunResult pc = Run("export PKG_CONFIG_PATH=" + libdir + "/pkgconfig; " + REPLAY_CXX_COMPILER + " -std=c++20 -o " +
                           (tmp / "read_trace_pc") + " " + REPLAY_SOURCE_DIR +
                           "/tests/install/consumer/read_trace.cpp $(pkg-config --cflags --libs replay)",
                       300);
    INFO(pc.output);
    REQUIRE(pc.exit_code == 0);
    RunResult pc_read = Run((tmp / "read_trace_pc") + " " + trace);
    INFO(pc_read.output);
    REQUIRE(pc_read.exit_code == 0);
    CHECK(RankLines(pc_read.output) == ranks);
    CHECK(Grep(pc_read.output, "pftrace ") == Grep(cmake_read.output, "pftrace "));
  }
}
