#include "support/run.h"

#include "support/temp_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <sstream>

namespace replay::testing {

namespace {

RunResult RunWith(const std::string& command, int timeout_s, const std::string& stderr_to) {
  RunResult r;
  std::string full = "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; timeout -k 5 " +
                     std::to_string(timeout_s) + " sh -c '" ;
  for (char c : command) full += c == '\'' ? std::string("'\\''") : std::string(1, c);
  full += "' 2>" + stderr_to;
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  return r;
}

}  // namespace

RunResult Run(const std::string& command, int timeout_s) { return RunWith(command, timeout_s, "&1"); }

RunResult RunApart(const std::string& command, int timeout_s) {
  char path[] = "/tmp/replay-test-stderr-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return RunResult{};
  close(fd);
  RunResult r = RunWith(command, timeout_s, path);
  r.error = ReadFile(path);
  unlink(path);
  return r;
}

std::string BuildPath(const std::string& relative) {
  // A build carried to another machine (tests/gpu/device_check.sh) lives
  // elsewhere than where it was built.
  const char* moved = std::getenv("REPLAY_TEST_BUILD_DIR");
  return std::string(moved != nullptr && *moved != '\0' ? moved : REPLAY_BUILD_DIR) + "/" + relative;
}
std::string Replay() { return BuildPath("replay"); }
std::string Interposer() { return BuildPath("libreplay_interpose.so"); }
std::string Preload() {
#ifdef REPLAY_PRELOAD_RUNTIME
  return std::string(REPLAY_PRELOAD_RUNTIME) + ":" + Interposer();
#else
  return Interposer();
#endif
}
std::string MpiTrain() { return BuildPath("examples/mpi_train/mpi_train"); }
std::string TestProgram(const std::string& name) { return BuildPath("tests/e2e/programs/" + name); }

std::string Mpirun(int ranks) {
  return "mpirun -np " + std::to_string(ranks) + " --oversubscribe";
}

std::vector<std::string> Grep(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace replay::testing
