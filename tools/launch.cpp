#include "launch.h"

#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "replay/trace_reader.h"

namespace replay::cli {
namespace {

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

pid_t g_child = 0;
void Forward(int signo) {
  if (g_child > 0) kill(g_child, signo);
}

}  // namespace

std::string FindInterposer() {
  if (const char* env = std::getenv("REPLAY_INTERPOSE_LIB")) return env;
  std::string dir = SelfDir();
  for (const std::string& p : {dir + "/libreplay_interpose.so", dir + "/" REPLAY_LIBDIR_FROM_BINDIR "/libreplay_interpose.so",
                               dir + "/../lib/libreplay_interpose.so", dir + "/../lib64/libreplay_interpose.so"}) {
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return "";
}

void PrependEnv(const char* var, const std::string& value, char sep) {
  const char* old = std::getenv(var);
  std::string v = value;
  if (old != nullptr && *old != '\0') v += sep + std::string(old);
  setenv(var, v.c_str(), 1);
}

void PreloadInterposer(const std::string& lib) {
  PrependEnv("LD_PRELOAD", lib, ':');
#ifdef REPLAY_PRELOAD_RUNTIME
  PrependEnv("LD_PRELOAD", REPLAY_PRELOAD_RUNTIME, ':');
#endif
}

std::string AbsolutePath(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return p;
  return std::string(cwd) + "/" + p;
}

int RunAndWait(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "replay: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = child;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(s, &sa, nullptr);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return status;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void WaitForRanksToClose(const std::string& dir, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    auto t = TraceReader::Open(dir);
    bool running = false;
    if (t.ok()) {
      for (const RankEntry& e : (*t)->ranks()) running = running || RankReader::IsRunning(e.dir);
    }
    if (!running) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace replay::cli
