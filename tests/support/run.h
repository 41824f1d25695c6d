// run.h: running real programs from end-to-end tests.
#pragma once

#include <string>
#include <vector>

namespace replay::testing {

struct RunResult {
  int exit_code = -1;  // 128+N when killed by signal N; 124 on timeout
  std::string output;  // stdout and stderr together (RunApart: stdout only)
  std::string error;   // RunApart: stderr
};

// Runs `command` through /bin/sh with a timeout (SIGTERM, then SIGKILL 5 s later).
RunResult Run(const std::string& command, int timeout_s = 120);
// The same, keeping stdout and stderr apart.
RunResult RunApart(const std::string& command, int timeout_s = 120);

// Paths in the build tree ($REPLAY_TEST_BUILD_DIR when set: a build carried to
// another machine).
std::string BuildPath(const std::string& relative);
std::string Replay();           // the replay command
std::string Interposer();       // libreplay_interpose.so
std::string Preload();          // the value of LD_PRELOAD that loads it
std::string MpiTrain();         // the example trainer
std::string TestProgram(const std::string& name);  // tests/e2e/programs/<name>

// "mpirun -np N --oversubscribe" with what it needs to run as root in a sandbox.
std::string Mpirun(int ranks);

// Lines of `text` that contain `needle`.
std::vector<std::string> Grep(const std::string& text, const std::string& needle);

}  // namespace replay::testing
