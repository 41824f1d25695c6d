// replay shrink DIR -o OUT [--keep KIND] [--timeout S] [--budget S] [--jobs N] [--backend auto|host|nccl]
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "launch.h"
#include "replay/check.h"
#include "replay/shrink.h"
#include "replay/trace_reader.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Reduce a failing job to the smallest one that still fails the same way, and
write it as a trace, a standalone C program (repro.c) and a README.md into OUT:
what to attach to a bug report for the maintainers of MPI or NCCL.

The trace's `replay check` must name a fault a drive can re-issue: a hang (ranks
missing from a collective, a message nobody matches, a call that never
completes), a mismatch (count, type, root, reduction, order), or an error
returned by MPI or NCCL or a crash inside them. --keep KIND picks the finding
to keep when there are several (missing_ranks, mismatch, error, unmatched_p2p,
never_completed); by default the first of these.

The search is delta debugging over the recorded operations. Ranks whose calls
do not matter are removed (communicators are rebuilt over the ranks that
remain), then whole iterations of the job's loop, then single calls (a
collective on all its members, a message at both ends, a communicator with
what is on it), then counts are made smaller; the data is synthetic. Each
candidate is written as a trace and checked, then re-issued without the
application by `replay drive` under --timeout S (default 10): it is kept only
when the drive fails with the same finding (the same kind, call and
communicator; for a hang, the same ranks waiting in the same calls). Several
candidates are driven at once where there are cores for them (--jobs N). A
line is printed for each accepted reduction. The search is deterministic: the
same trace and budget give the same result. --budget S (default 600) bounds
it: at that point it stops with the smallest job found so far.

NCCL calls are re-issued with --backend nccl when libnccl.so.2 and
libcuda.so.1 can be loaded (on a GPU machine, or the host stand-ins of the
tests), else with NCCL's semantics over MPI (--backend host), where a call is
compared by what it does rather than by its API.

OUT must not exist; nothing is written unless a smaller job was found to fail
the same way. In it:
  manifest, rank-*/  the reduced job's trace (every replay command reads OUT)
  repro.c            its calls as a C program needing only MPI (and CUDA and
                     NCCL for NCCL calls); its build and run lines are at its top
  README.md          the finding, what was removed, the recorded job's
                     versions and settings

Exit status: 0 a reduced job was written; 1 the trace's finding could not be
reproduced by a drive (or check names none), nothing written; 2 bad arguments
or an unreadable trace.)";

struct Options {
  std::string dir;
  std::string out;
  std::string keep;
  double timeout_s = 10;
  double budget_s = 600;
  int jobs = 0;
  std::string backend = "auto";
  bool verbose = false;
};

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "replay";
}

// Process groups of the drives running now, for a signal to end them.
std::atomic<pid_t> g_running[64];

void StopDrives(int sig) {
  for (auto& p : g_running) {
    pid_t pid = p.load();
    if (pid > 0) kill(-pid, SIGTERM);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// Drives candidates with `replay drive`, each in its own process group, with
// its output in a log beside the drive's trace.
class CommandDriver : public ShrinkDriver {
 public:
  CommandDriver(const Options& opt, std::string work, bool nccl_trace)
      : opt_(opt), work_(std::move(work)), backend_(opt.backend) {
    if (backend_ == "auto") backend_ = nccl_trace ? "nccl" : "host";
    fallback_ = opt.backend == "auto" && backend_ == "nccl";
  }

  std::vector<Outcome> Drive(const std::vector<std::string>& dirs, const Settled& settled) override {
    // The drives before were read when this is called: their traces go.
    for (const std::string& d : driven_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
      std::filesystem::remove(d + ".log", ec);
    }
    driven_.clear();
    std::vector<Outcome> out(dirs.size());
    std::vector<std::string> keep(dirs.size());
    for (size_t i = 0; i < dirs.size(); ++i) {
      keep[i] = work_ + "/d" + std::to_string(++n_);
      driven_.push_back(keep[i]);
    }
    std::vector<int> codes = RunAll(dirs, keep, settled);
    for (size_t i = 0; i < dirs.size(); ++i) {
      out[i].trace_dir = keep[i] + "/trace";
      if (codes[i] < 0) {
        out[i].status = Status::IoError(std::string("cannot start replay drive: ") + std::strerror(errno));
        continue;
      }
      if (codes[i] != kExitBadInput) {
        // No trace of its own: the job did not start (mpirun refused it, say),
        // which its output tells better than any reading of the trace.
        std::error_code ec;
        if (!std::filesystem::exists(out[i].trace_dir, ec)) {
          out[i].status = Status::IoError("replay drive started no job (exit status " + std::to_string(codes[i]) +
                                          "); the end of its output:\n" + OutputTail(keep[i] + ".log", 10));
        }
        continue;
      }
      std::string why = LastLine(keep[i] + ".log");
      if (fallback_ && why.find("--backend nccl") != std::string::npos) {
        // No NCCL or CUDA driver here: NCCL's semantics over MPI instead.
        std::fprintf(stderr, "replay shrink: %s; NCCL calls are re-issued over MPI (--backend host)\n", why.c_str());
        backend_ = "host";
        fallback_ = false;
        const std::string again = keep[i] + "h";
        driven_.push_back(again);
        out[i].trace_dir = again + "/trace";
        const int code = RunAll({dirs[i]}, {again}, [&](size_t, const std::string& d) { return settled(i, d); })[0];
        if (code >= 0 && code != kExitBadInput) continue;
        why = LastLine(again + ".log");
      }
      out[i].status = Status::InvalidArgument(why.empty() ? "replay drive refused the candidate" : why);
    }
    return out;
  }

  size_t Parallel(size_t ranks) const override {
    if (opt_.jobs > 0) return static_cast<size_t>(opt_.jobs);
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    return std::max<size_t>(1, std::min<size_t>(cores / std::max<size_t>(ranks, 1), 64));
  }

  bool NcclCalls() const override { return backend_ == "nccl"; }

 private:
  pid_t Start(const std::string& dir, const std::string& keep) {
    char timeout[32];
    std::snprintf(timeout, sizeof(timeout), "%g", opt_.timeout_s);
    std::vector<std::string> argv = {SelfExe(), "drive", dir, "--timeout", timeout, "--keep", keep,
                                     "--backend", backend_};
    const std::string log = keep + ".log";
    pid_t pid = fork();
    if (pid != 0) {
      if (pid > 0) {
        setpgid(pid, pid);  // as the child does: either may run first
        Track(pid);
      }
      return pid;
    }
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }

  // Runs `replay drive` on each of `dirs` at once and returns their exit
  // codes (-1: not started). A drive whose ranks all wait and whose trace
  // shows the finding (`settled`, asked every kPollMs after the first
  // second) is stopped, as one that outlives its own timeout by a minute is.
  std::vector<int> RunAll(const std::vector<std::string>& dirs, const std::vector<std::string>& keep,
                          const Settled& settled) {
    constexpr int kPollMs = 250;
    const auto start = std::chrono::steady_clock::now();
    const auto limit = start + std::chrono::duration<double>(opt_.timeout_s + 60);
    std::vector<pid_t> pids(dirs.size());
    std::vector<int> codes(dirs.size(), -1);
    std::vector<bool> done(dirs.size(), false), stopped(dirs.size(), false);
    for (size_t i = 0; i < dirs.size(); ++i) {
      pids[i] = Start(dirs[i], keep[i]);
      done[i] = pids[i] < 0;
    }
    auto next_poll = start + std::chrono::milliseconds(1000);
    while (std::find(done.begin(), done.end(), false) != done.end()) {
      const auto now = std::chrono::steady_clock::now();
      const bool poll = now >= next_poll;
      if (poll) next_poll = now + std::chrono::milliseconds(kPollMs);
      for (size_t i = 0; i < dirs.size(); ++i) {
        if (done[i]) continue;
        int status = 0;
        pid_t w = waitpid(pids[i], &status, WNOHANG);
        if (w == pids[i] || (w < 0 && errno != EINTR)) {
          done[i] = true;
          codes[i] = ExitCodeOf(status);
          kill(-pids[i], SIGKILL);  // anything of it still there
          Untrack(pids[i]);
          WaitForRanksToClose(keep[i] + "/trace");
          continue;
        }
        if (!stopped[i] && (now > limit || (poll && settled(i, keep[i] + "/trace")))) {
          // Its ranks close their traces on SIGTERM, as at the drive's own timeout.
          kill(-pids[i], SIGTERM);
          stopped[i] = true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return codes;
  }

  static void Track(pid_t pid) {
    for (auto& p : g_running) {
      pid_t none = 0;
      if (p.compare_exchange_strong(none, pid)) return;
    }
  }
  static void Untrack(pid_t pid) {
    for (auto& p : g_running) {
      pid_t mine = pid;
      if (p.compare_exchange_strong(mine, 0)) return;
    }
  }

  static std::string LastLine(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line)) {
      if (line.find("replay drive:") != std::string::npos) last = line.substr(line.find("replay drive:") + 14);
    }
    return last;
  }

  // The last `n` lines of a drive's output that say something, indented.
  static std::string OutputTail(const std::string& path, size_t n) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" -\t") != std::string::npos) lines.push_back(line);
    }
    std::string out;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += "  " + lines[i] + "\n";
    return out.empty() ? "  (none)\n" : out;
  }

  const Options& opt_;
  std::string work_;
  std::string backend_;
  bool fallback_ = false;
  size_t n_ = 0;
  std::vector<std::string> driven_;  // trace directories of the last drives
};

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}

int Run(const Options& opt) {
  if (opt.timeout_s <= 0) return Fail("shrink", "--timeout must be more than 0 seconds");
  if (opt.budget_s <= 0) return Fail("shrink", "--budget must be more than 0 seconds");
  if (opt.jobs < 0) return Fail("shrink", "--jobs must be 1 or more");
  if (opt.backend != "auto" && opt.backend != "host" && opt.backend != "nccl") {
    return Fail("shrink", "--backend " + opt.backend + " is not one of auto, host, nccl");
  }
  if (!opt.keep.empty()) {
    bool known = false;
    for (int k = 0; k < kFindingKindCount; ++k) {
      known = known || FindingKindName(static_cast<FindingKind>(k)) == opt.keep;
    }
    if (!known) {
      return Fail("shrink", "--keep " + opt.keep +
                                " is not a kind of finding (missing_ranks, mismatch, error, unmatched_p2p, "
                                "never_completed)");
    }
  }
  struct stat st;
  if (lstat(opt.out.c_str(), &st) == 0) {
    return Fail("shrink", opt.out + " already exists; give -o a directory that does not exist yet");
  }
  auto trace = TraceReader::Open(opt.dir);
  if (!trace.ok()) return Fail("shrink", trace.status());

  // NCCL calls, to re-issue as NCCL calls where NCCL can be loaded.
  bool nccl_trace = false;
  for (size_t i = 0; i < (*trace)->ranks().size() && !nccl_trace; ++i) {
    auto r = (*trace)->OpenRank(i);
    if (!r.ok()) continue;
    for (const Event& e : (*r)->events()) {
      if (e.kind == EventKind::kOp && (*r)->header().ApiName(e.op.api).rfind("nccl", 0) == 0) {
        nccl_trace = true;
        break;
      }
    }
  }
  char tmpl[] = "/tmp/replay-shrink-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Fail("shrink", "cannot create a directory in /tmp");
  const std::string work = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{work};
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, StopDrives);

  CommandDriver driver(opt, work, nccl_trace);
  ShrinkOptions sopt;
  sopt.keep = opt.keep;
  sopt.budget_s = opt.budget_s;
  sopt.work_dir = work;
  sopt.progress = [](const ShrinkStep& s) {
    std::printf("  %-12s %4zu rank%s %7zu calls (%zu on the busiest rank)  %7.1f s\n", s.what.c_str(), s.ranks,
                s.ranks == 1 ? " " : "s", s.operations, s.max_rank_operations, s.seconds);
    std::fflush(stdout);
  };
  if (opt.verbose) {
    sopt.log = [](const std::string& line) {
      std::printf("    %s\n", line.c_str());
      std::fflush(stdout);
    };
  }
  std::printf("%s %s: %zu ranks\n", Paint(Color::kBold, "replay shrink").c_str(), opt.dir.c_str(),
              (*trace)->ranks().size());
  std::fflush(stdout);
  const std::string out = AbsolutePath(opt.out);
  auto result = Shrink(**trace, driver, sopt, out);
  if (!result.ok()) {
    if (result.status().code() == Status::Code::kNotFound) {
      std::fprintf(stderr, "replay shrink: %s; nothing written\n", result.status().message().c_str());
      return kExitFindings;
    }
    std::error_code ec;
    std::filesystem::remove_all(out, ec);  // nothing half written stays
    return Fail("shrink", result.status());
  }
  auto reduced = TraceReader::Open(out);
  if (!reduced.ok()) return Fail("shrink", reduced.status());
  auto repro = ReproProgram(**reduced, &result->reduced);
  if (!repro.ok()) return Fail("shrink", repro.status());
  if (!WriteFile(out + "/repro.c", *repro) ||
      !WriteFile(out + "/README.md", ShrinkReadme(*result, **trace, **reduced))) {
    return Fail("shrink", "cannot write repro.c and README.md into " + out);
  }
  const ShrinkResult& r = *result;
  std::printf("\n  %s %s\n", Paint(Color::kYellow, std::string(FindingKindName(r.reduced.kind))).c_str(),
              r.reduced.title.c_str());
  std::printf("  %zu ranks -> %zu, %zu calls -> %zu (%zu on the busiest rank), %zu candidates, %zu driven%s\n",
              r.before.ranks, r.after.ranks, r.before.operations, r.after.operations, r.after.max_rank_operations,
              r.candidates, r.drives, r.budget_exhausted ? "; stopped by --budget" : "");
  std::printf("  written: %s/ (the trace), %s/repro.c, %s/README.md\n", opt.out.c_str(), opt.out.c_str(),
              opt.out.c_str());
  return kExitOk;
}

}  // namespace

void AddShrinkCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] =
      AddCommand<Options>(app, "shrink", "Reduce a failing job to the smallest one that fails the same way", kHelp,
                          exit_code, [](const Options& o) { return RunOnTrace("shrink", o, Run); });
  cmd->add_option("DIR", opt->dir, "Trace directory (or bundle)")->required();
  cmd->add_option("-o,--output", opt->out, "Directory to write the reduced job into (must not exist)")->required();
  cmd->add_option("--keep", opt->keep, "Kind of finding to keep (default: the first a drive can show)");
  cmd->add_option("--timeout", opt->timeout_s, "Seconds before a candidate's drive that hangs is stopped (default 10)");
  cmd->add_option("--budget", opt->budget_s, "Seconds the whole search may take (default 600)");
  cmd->add_option("--jobs", opt->jobs, "Candidates driven at once (default: as the cores allow)");
  cmd->add_option("--backend", opt->backend, "How NCCL calls are re-issued: auto (default), host or nccl");
  cmd->add_flag("-v,--verbose", opt->verbose, "A line on each candidate: its size, and why it was kept or not");
}

}  // namespace replay::cli
