// End-to-end: command lines a user gets wrong. Each gets exit status 2 and
// one line on stderr that says what is wrong, never a crash, a second line of
// boilerplate or a silent success.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "e2e/e2e.h"

namespace replay {
namespace {

// A small recorded job: 2 ranks, 2 steps (about 60 events each).
void RecordSmallJob(const std::string& dir) {
  RunResult r = Run(Replay() + " record -o " + dir + " -- " + testing::Mpirun(2) + " " + testing::MpiTrain() +
                    " --steps 2 --ckpt-every 0");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

size_t Lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n + (!text.empty() && text.back() != '\n');
}

struct BadLine {
  std::string args;    // after `replay`; TRACE stands for the recorded trace
  std::string saying;  // the one stderr line contains this
};

TEST_CASE("a wrong command line gets exit status 2 and one line saying what is wrong", "[e2e][cli]") {
  TempDir tmp;
  const std::string trace = tmp / "trace";
  RecordSmallJob(trace);
  const std::vector<BadLine> lines = {
      {"", "a command is required: one of record, info"},
      {"frobnicate TRACE", "frobnicate is not a command; the commands are record, info"},
      {"check TRACE --bogus", "--bogus"},
      {"info", "DIR is required"},
      {"check TRACE --min-wait -1", "--min-wait: -1 is not a number of seconds of 0 or more"},
      {"check TRACE --min-wait soon", "soon is not a number of seconds"},
      {"check TRACE --threads -2", "--threads: -2 is not a number of threads"},
      {"diff TRACE TRACE -C x", "--context: x is not a number of events"},
      {"record --out x -- true", "--out is not an option of replay record; the command to run goes after --"},
      {"rerun TRACE --rank 0 --stop=3 -- true", "--stop is not an option of replay rerun"},
      {"rerun TRACE --rank -1 -- true", "--rank: -1 is not a rank number"},
      {"rerun TRACE --rank 0 --stop-at -3 -- true", "--stop-at: -3 is not an event index"},
      {"drive TRACE --timeout 0", "--timeout: 0 is not a positive number of seconds"},
      {"drive TRACE --timeout -1", "--timeout: -1 is not a positive number of seconds"},
      {"dump TRACE --events 18446744073709551616", "18446744073709551616 is larger than any event index"},
      {"dump TRACE --events 99999999999999999999999", "is larger than any event index"},
      {"dump TRACE --events 5-3", "the range ends before it starts"},
      {"dump TRACE --events x", "x is not an event index"},
      {"dump TRACE --events 99999", "--events 99999 selects no event: rank 0 has events 0-"},
      {"dump TRACE --rank 0 --events 100000-200000", "selects no event: rank 0 has events 0-"},
      {"dump TRACE --rank 7", "rank 7 is not in"},
      {"bundle TRACE", "--output is required"},
      {"export TRACE -f svg -o x", "--format svg is not one of"},
      {"record -o " + tmp.path() + "/other --level everything -- true", "--level everything is not one of"},
  };
  for (const BadLine& line : lines) {
    std::string args = line.args;
    for (size_t at; (at = args.find("TRACE")) != std::string::npos;) args.replace(at, 5, trace);
    RunResult r = RunApart(Replay() + " " + args, 60);
    INFO("replay " << args << "\nstdout:\n" << r.output << "stderr:\n" << r.error);
    CHECK(r.exit_code == 2);
    CHECK(Lines(r.error) == 1);
    CHECK(r.error.rfind("replay", 0) == 0);
    CHECK(r.error.find(line.saying) != std::string::npos);
  }
}

TEST_CASE("dump shows the range it was asked for, and says so when a rank holds none of it", "[e2e][cli]") {
  TempDir tmp;
  const std::string trace = tmp / "trace";
  RecordSmallJob(trace);
  RunResult some = RunApart(Replay() + " dump " + trace + " --rank 0 --events 3-5", 60);
  INFO(some.output << some.error);
  CHECK(some.exit_code == 0);
  CHECK(testing::Grep(some.output, "#").size() == 3);
  CHECK(testing::Grep(some.output, "#4 ").size() == 1);
  RunResult open = RunApart(Replay() + " dump " + trace + " --rank 1 --events 50-", 60);
  CHECK(open.exit_code == 0);
  CHECK(testing::Grep(open.output, "#50 ").size() == 1);
  CHECK(testing::Grep(open.output, "MPI_Finalize").size() >= 1);
}

TEST_CASE("a trace with an unreadable rank gets no clean verdict from check or diff", "[e2e][cli]") {
  TempDir tmp;
  const std::string trace = tmp / "trace";
  RecordSmallJob(trace);
  const std::string copy = tmp / "copy";
  std::filesystem::copy(trace, copy, std::filesystem::copy_options::recursive);
  {
    std::ofstream garbage(copy + "/rank-00001/header", std::ios::binary | std::ios::trunc);
    garbage << std::string(100, 'x');
  }
  RunResult clean = RunApart(Replay() + " check " + trace, 60);
  CHECK(clean.exit_code == 0);

  RunResult check = RunApart(Replay() + " check " + copy, 60);
  INFO(check.output << check.error);
  CHECK(check.exit_code == 2);
  auto headline = testing::Grep(check.output, "replay check");
  REQUIRE(headline.size() == 1);
  CHECK(headline[0].find("no findings in what could be read; not read: rank-00001") != std::string::npos);
  RunResult json = RunApart(Replay() + " check --json " + copy, 60);
  CHECK(json.exit_code == 2);
  CHECK(json.output.find("\"unread\"") != std::string::npos);

  RunResult diff = RunApart(Replay() + " diff " + trace + " " + copy, 60);
  INFO(diff.output << diff.error);
  CHECK(diff.exit_code == 2);
  CHECK(testing::Grep(diff.output, "no divergence in what could be compared; rank 1 not compared").size() == 1);
  RunResult same = RunApart(Replay() + " diff " + trace + " " + trace, 60);
  CHECK(same.exit_code == 0);
}

}  // namespace
}  // namespace replay
