// replay drive DIR [--ranks LIST] [--payload recorded|synthetic] [--backend host|nccl] [--timeout S]
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "launch.h"
#include "replay/check.h"
#include "replay/event_format.h"
#include "replay/rerun_state.h"
#include "replay/trace_reader.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Re-issue the recorded MPI communication of a job without the application:
one process per recorded rank (started with mpirun and the recorded world
size) makes the same calls in the same order, on communicators created the same
way, with synthetic data or, for point-to-point messages, the bytes the
receivers recorded (--payload recorded, needs level data). A recorded hang or
mismatch happens again, without the program that caused it; a clean trace
completes. The drive records itself; at the end `replay drive` reports what
its own run shows (as `replay check` would: who waits on whom, which call
mismatched) and its time in communication against the recording's.

NCCL communication is re-issued in one of two ways:

  --backend host (the default): NCCL's semantics over MPI on host memory. Each
    NCCL communicator becomes an MPI communicator of the same members, each
    collective the MPI collective of the same shape, grouped sends and
    receives non-blocking MPI messages completed where the recording saw them
    complete. So a mismatch or hang recorded on a GPU cluster reproduces on any
    machine with MPI.
  --backend nccl: real NCCL on GPUs (libnccl.so.2 and libcuda.so.1, loaded at
    run time). Each rank takes the GPU of its local rank (modulo the GPUs of
    its node); each recorded communicator is created again with the same
    members and ranks (a split as ncclCommSplit with the recorded colour and
    key, anything else from a unique id its first member makes), each
    collective and send/receive enqueued with the recorded count, type,
    operator, root and peer on a stream of its communicator, in the recorded
    groups, into device buffers of the recorded sizes, and waited for after
    it (after the outermost ncclGroupEnd for a group). At --timeout each rank
    says what it was waiting for and exits, the operation still pending in
    the drive's trace, so the hang is reported like any other. Point-to-point
    bytes can be the recorded ones (--payload recorded).

--ranks LIST re-issues only those ranks' communication; what involves the
other ranks is served from the trace (not re-issued). --timeout S (default 60)
ends a drive that hangs.

Not re-issued, and said so: one-sided communication, neighbourhood and
alltoallw collectives, intercommunicators.

Exit status: 0 the drive completed cleanly, 1 it reproduced a problem (a hang,
a mismatch, an error), 2 bad arguments, an unreadable trace, or a backend that
cannot start (--backend nccl without libnccl.so.2 or libcuda.so.1).)";

// With --backend nccl the ranks stop waiting at --timeout themselves and exit
// with this status; `replay drive` stops mpirun this much later if they do not.
constexpr int kDriveHungStatus = 3;
constexpr double kNcclStopGraceS = 10;

struct Options {
  std::string dir;
  std::string ranks;
  std::string payload = "synthetic";
  std::string backend = "host";
  double timeout_s = 60;
  std::string keep;
};

// Why --backend nccl cannot run here, or "" when it can: this build has no
// NCCL backend, or NCCL or the CUDA driver cannot be loaded.
std::string NcclBackendMissing() {
#if REPLAY_DRIVE_NCCL
  for (const char* lib : {"libnccl.so.2", "libcuda.so.1"}) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      return std::string("--backend nccl needs ") +
             (std::string(lib) == "libcuda.so.1" ? "the CUDA driver, libcuda.so.1" : "NCCL, libnccl.so.2") +
             ", which cannot be loaded (" + (why != nullptr ? why : "not found") +
             "); put its directory on LD_LIBRARY_PATH, or use --backend host (NCCL over MPI on host memory)";
    }
    dlclose(h);
  }
  return "";
#else
  return "--backend nccl is not in this build of replay (no nccl.h from a CUDA toolkit when it was built); use "
         "--backend host (NCCL over MPI on host memory)";
#endif
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// Communication time per rank: the sum over calls of return minus entry.
std::map<int, int64_t> CommTime(const TraceReader& t) {
  std::map<int, int64_t> out;
  for (size_t i = 0; i < t.ranks().size(); ++i) {
    auto r = t.OpenRank(i);
    if (!r.ok()) continue;
    std::map<uint32_t, int64_t> entered;
    int64_t total = 0;
    for (const Event& e : (*r)->events()) {
      if (e.kind == EventKind::kOp && e.op.kind != OpKind::kInit && e.op.kind != OpKind::kFinalize) {
        entered[e.thread] = e.time_ns;
      }
      if (e.kind == EventKind::kReturn) {
        auto it = entered.find(e.thread);
        if (it != entered.end()) {
          total += e.time_ns - it->second;
          entered.erase(it);
        }
      }
    }
    out[(*r)->rank()] = total;
  }
  return out;
}

int Run(const Options& opt) {
  auto trace = TraceReader::Open(opt.dir);
  if (!trace.ok()) return Fail("drive", trace.status());
  size_t world = (*trace)->ranks().size();
  if (opt.payload != "recorded" && opt.payload != "synthetic") {
    return Fail("drive", "--payload " + opt.payload + " is not one of recorded, synthetic");
  }
  if (opt.backend != "host" && opt.backend != "nccl") {
    return Fail("drive", "--backend " + opt.backend + " is not one of host, nccl");
  }
  if (opt.backend == "nccl") {
    std::string missing = NcclBackendMissing();
    if (!missing.empty()) return Fail("drive", missing);
  }
  if (opt.payload == "recorded" && (*trace)->manifest() && (*trace)->manifest()->level != Level::kData) {
    return Fail("drive", "--payload recorded needs a trace recorded at level data (replay record --level data)");
  }
  std::string lib = FindInterposer();
  std::string driver = SelfDir() + "/replay-drive";
  if (lib.empty() || access(driver.c_str(), X_OK) != 0) {
    return Fail("drive", "cannot find replay-drive and libreplay_interpose.so next to the replay binary");
  }
  std::string out = opt.keep;
  if (out.empty()) {
    char tmpl[] = "/tmp/replay-drive-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Fail("drive", "cannot create a directory in /tmp");
    out = tmpl;
  }
  out = AbsolutePath(out);
  std::string drive_trace = out + "/trace";

  PreloadInterposer(lib);
  setenv("REPLAY_DIR", drive_trace.c_str(), 1);
  setenv("REPLAY_LEVEL", "meta", 1);
  setenv("REPLAY_TRACE_UUID", UuidToString(NewUuid()).c_str(), 1);
  RerunRequest{}.Export();  // the drive is recorded, never re-run
  PrependEnv("OMPI_MCA_mca_base_env_list", "LD_PRELOAD;REPLAY_DIR;REPLAY_LEVEL;REPLAY_TRACE_UUID", ';');
  char timeout[32];
  std::snprintf(timeout, sizeof(timeout), "%g", opt.timeout_s);
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(world), "--oversubscribe", driver,
                                  AbsolutePath(opt.dir), "--payload", opt.payload};
  cmd.insert(cmd.end(), {"--backend", opt.backend, "--timeout", timeout});
  if (!opt.ranks.empty()) {
    cmd.push_back("--ranks");
    cmd.push_back(opt.ranks);
  }

  auto start = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child < 0) return Fail("drive", std::string("cannot start mpirun: ") + std::strerror(errno));
  if (child == 0) {
    std::vector<char*> argv;
    for (std::string& a : cmd) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "replay drive: cannot run mpirun: %s\n", std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  bool timed_out = false;
  // NCCL ranks get time to give up at the timeout themselves; a rank blocked
  // where it cannot (inside a call) is stopped like any other.
  const double stop_at = opt.timeout_s + (opt.backend == "nccl" ? kNcclStopGraceS : 0);
  for (;;) {
    pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) break;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!timed_out && elapsed > stop_at) {
      timed_out = true;
      kill(child, SIGTERM);  // mpirun passes it on: the ranks close their traces
    }
    if (timed_out && elapsed > stop_at + 20) kill(child, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const bool gave_up = !timed_out && opt.backend == "nccl" && ExitCodeOf(status) == kDriveHungStatus;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WaitForRanksToClose(drive_trace);

  std::printf("%s %s: %zu ranks, %s after %.1f s\n", Paint(Color::kBold, "replay drive").c_str(), opt.dir.c_str(),
              world,
              timed_out ? Paint(Color::kRed, "hung (stopped by --timeout)").c_str()
              : gave_up ? Paint(Color::kRed, "hung (the ranks stopped waiting at --timeout)").c_str()
                        : (ExitCodeOf(status) == 0 ? "completed" : Paint(Color::kRed, "failed").c_str()),
              wall);
  auto driven = TraceReader::Open(drive_trace);
  if (!driven.ok()) {
    std::printf("  the drive left no trace of its own (%s)\n", driven.status().message().c_str());
    return ExitCodeOf(status) == 0 && !timed_out ? kExitOk : kExitFindings;
  }
  CheckOptions copt;
  copt.min_wait_ns = 100'000'000;
  auto report = CheckTrace(**driven, copt);
  int rc = timed_out || ExitCodeOf(status) != 0 ? kExitFindings : kExitOk;
  if (report.ok()) {
    for (const Finding& f : report->findings) {
      if (f.kind == FindingKind::kStraggler) continue;  // timing of a drive says nothing of the job
      rc = kExitFindings;
      std::printf("\n  %s %s\n", Paint(Color::kYellow, std::string(FindingKindName(f.kind))).c_str(),
                  f.title.c_str());
      for (const std::string& d : f.details) std::printf("     %s\n", d.c_str());
    }
    if (rc == kExitFindings) {
      std::printf("\n  who waits on whom when the drive stopped:\n");
      for (const RankState& s : report->ranks) std::printf("    rank %-4d %s\n", s.rank, s.doing.c_str());
    }
  }
  // Time in communication: the drive against the recording.
  auto recorded = CommTime(**trace);
  auto now = CommTime(**driven);
  std::printf("\n  time in communication per rank (drive / recording):\n");
  for (const auto& [rank, ns] : recorded) {
    auto it = now.find(rank);
    double d = it != now.end() ? static_cast<double>(it->second) / 1e9 : 0;
    std::printf("    rank %-4d %8.3f s / %8.3f s\n", rank, d, static_cast<double>(ns) / 1e9);
  }
  if (opt.keep.empty()) {
    std::string rm = "rm -rf '" + out + "'";
    (void)!std::system(rm.c_str());
  } else {
    std::printf("\n  the drive's own trace: %s\n", drive_trace.c_str());
  }
  return rc;
}

}  // namespace

void AddDriveCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(app, "drive", "Re-issue a trace's communication without the application", kHelp,
                                        exit_code, [](const Options& o) { return RunOnTrace("drive", o, Run); });
  cmd->add_option("DIR", opt->dir, "Trace directory")->required();
  cmd->add_option("--ranks", opt->ranks, "Re-issue only these ranks (e.g. 0,2); the rest is served from the trace");
  cmd->add_option("--payload", opt->payload, "recorded or synthetic (default) message bytes");
  cmd->add_option("--backend", opt->backend,
                  "How NCCL operations are re-issued: host (NCCL semantics over MPI on host memory, the default) or "
                  "nccl (real NCCL on GPUs)");
  cmd->add_option("--timeout", opt->timeout_s, "Seconds before a drive that hangs is stopped (default 60)")
      ->check(Positive("a number of seconds"));
  cmd->add_option("--keep", opt->keep, "Keep the drive's own trace in this directory");
}

}  // namespace replay::cli
