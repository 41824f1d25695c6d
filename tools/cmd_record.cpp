// replay record [-o DIR] [--level meta|hash|data] -- COMMAND...
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "util/log.h"
#include "command.h"
#include "launch.h"
#include "replay/event_format.h"
#include "replay/settings.h"
#include "replay/trace_header.h"
#include "replay/trace_reader.h"
#include "replay/version.h"
#include "trace/format.h"
#include "util/file_system.h"
#include "record/context.h"
#include "term.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Run COMMAND with the recorder preloaded, so that every process it starts
that communicates (MPI, NCCL) records its rank into DIR. Typical:

  replay record -o trace -- mpirun -np 4 ./train

Processes that never communicate (the launcher, shells, helpers) are not
recorded and behave exactly as without replay. At the end, prints where the
trace is and one line per rank, and exits with COMMAND's exit status (128+N
if it died of signal N).

NCCL linked into the program (PyTorch's, say) is recorded through NCCL's
profiler plugin interface: replay sets NCCL_PROFILER_PLUGIN to the recorder,
which passes NCCL's profiler calls on to the plugin NCCL_PROFILER_PLUGIN named
before (REPLAY_NCCL_PROFILER_PLUGIN), or to libnccl-profiler.so if there is one.

For launchers that start ranks on other hosts, the recorder must reach them:
replay sets OMPI_MCA_mca_base_env_list so Open MPI forwards its settings; with
other launchers, export LD_PRELOAD and the REPLAY_* variables yourself (see the
README, "Recording by hand").

DIR is checked before COMMAND starts: if it cannot be created or written,
record says so and does not start the job. With little room left on its disk
it warns and goes on: recording stops where the disk fills, the job runs on,
and the trace says where it stops.

Exit status: COMMAND's, or 2 when the trace directory cannot be made.)";

struct Options {
  std::string dir;
  std::string level = "hash";
  bool force = false;
  std::vector<std::string> command;
};

// Below this much free space, record warns before starting the job.
constexpr int64_t kLowDiskBytes = 64ll << 20;

std::string DefaultDir() {
  time_t t = time(nullptr);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "replay-%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Empty, or not there to read.
bool DirIsEmpty(const std::string& dir) {
  std::error_code ec;
  const bool empty = std::filesystem::is_empty(dir, ec);
  return ec || empty;
}

// Ranks the launcher will start, if the command says (mpirun -np N, srun -n N).
int32_t ExpectedRanks(const std::vector<std::string>& command) {
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-np" || a == "-n" || a == "--np" || a == "-c" || a == "--ntasks" || a == "--nproc-per-node" ||
        a == "--nproc_per_node") {
      char* end = nullptr;
      long n = std::strtol(command[i + 1].c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && n > 0 && n < INT32_MAX) return static_cast<int32_t>(n);
    }
  }
  return -1;
}


// A launcher may exit before its ranks have finished closing their traces
// (after a kill, say): give them a moment, so the summary is final.
void WaitForRanks(const std::string& dir, int max_ms) {
  for (int waited = 0; waited < max_ms; waited += 100) {
    auto t = TraceReader::Open(dir);
    if (!t.ok()) return;
    bool running = false;
    for (const RankEntry& e : (*t)->ranks()) running = running || RankReader::IsRunning(e.dir);
    if (!running) return;
    usleep(100 * 1000);
  }
}

void PrintSummary(const std::string& dir) {
  auto t = TraceReader::Open(dir);
  if (!t.ok() && t.status().code() == Status::Code::kUnavailable) {
    // The manifest `record` wrote and no rank: the command ran under the
    // recorder and never made a call it records.
    std::fprintf(stderr,
                 "replay: nothing recorded: no process of the command made an MPI, NCCL or CUDA call "
                 "(%s holds only the manifest)\n",
                 dir.c_str());
    return;
  }
  if (!t.ok()) {
    std::fprintf(stderr, "replay record: no trace in %s: %s\n", dir.c_str(), t.status().message().c_str());
    return;
  }
  std::fprintf(stderr, "replay: trace in %s (%zu rank%s)\n", dir.c_str(), (*t)->ranks().size(),
               (*t)->ranks().size() == 1 ? "" : "s");
  for (size_t i = 0; i < (*t)->ranks().size(); ++i) {
    auto r = (*t)->OpenRank(i);
    if (!r.ok()) {
      std::fprintf(stderr, "  rank %d: unreadable: %s\n", (*t)->ranks()[i].rank, r.status().message().c_str());
      continue;
    }
    const RankReader& rr = **r;
    int fatal_signal = 0;
    for (const Event& e : rr.events()) {
      if (e.kind == EventKind::kSignal && e.signal.fatal) fatal_signal = e.signal.signo;
    }
    std::string status = RankEndText(rr.status(), rr.header().close_reason, fatal_signal);
    std::string extra;
    if (rr.stats().dropped) extra += ", " + std::to_string(rr.stats().dropped) + " dropped";
    if (rr.stats().unrecorded) extra += ", " + std::to_string(rr.stats().unrecorded) + " calls unrecorded";
    if (rr.status() == RankStatus::kFailed && !rr.header().recording_error.empty()) {
      extra += " (" + rr.header().recording_error + ")";
    }
    if (rr.stats().payload_bytes) extra += ", payloads " + HumanBytes(rr.stats().payload_bytes);
    std::fprintf(stderr, "  rank %d: %s, %zu events, %s%s\n", rr.rank(), status.c_str(), rr.events().size(),
                 HumanBytes(rr.stats().stored_bytes).c_str(), extra.c_str());
  }
  std::fprintf(stderr, "next: replay info %s\n", dir.c_str());
}


// Whether the command is Open MPI's launcher given -x, which it refuses to
// combine with the environment list replay otherwise forwards its settings by.
bool ForwardsWithX(const std::vector<std::string>& command) {
  if (command.empty()) return false;
  std::string launcher = command[0].substr(command[0].rfind('/') == std::string::npos ? 0 : command[0].rfind('/') + 1);
  if (launcher.rfind("mpirun", 0) != 0 && launcher.rfind("mpiexec", 0) != 0 && launcher.rfind("orterun", 0) != 0) {
    return false;
  }
  return std::find(command.begin() + 1, command.end(), "-x") != command.end();
}

int Run(std::string dir, const std::string& level, bool force, const std::vector<std::string>& command) {
  if (command.empty()) return Fail("record", "no command given: replay record [-o DIR] -- COMMAND...");
  if (!ParseLevel(level)) return Fail("record", "--level " + level + " is not one of meta, hash, data");
  std::string lib = FindInterposer();
  if (lib.empty()) {
    return Fail("record", "cannot find libreplay_interpose.so next to the replay binary "
                              "(set REPLAY_INTERPOSE_LIB to its path)");
  }
  if (dir.empty()) dir = DefaultDir();
  dir = AbsolutePath(dir);
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return Fail("record", dir + " exists and is not a directory");
    if (!DirIsEmpty(dir) && !force) {
      return Fail("record", dir + " is not empty: choose a new directory, or pass --force to add to it");
    }
  } else if (mkdir(dir.c_str(), 0700) != 0) {
    return Fail("record", "cannot create trace directory " + dir + ": " + std::strerror(errno) +
                              "; the job was not started: choose a writable place with -o DIR");
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return Fail("record", "cannot write to trace directory " + dir + ": " + std::strerror(errno) +
                              "; the job was not started: choose a writable place with -o DIR");
  }
  if (int64_t free = FileSystem::Default()->FreeBytes(dir); free >= 0 && free < kLowDiskBytes) {
    log::Warn("replay record: only " + HumanBytes(static_cast<uint64_t>(free)) + " free for " + dir +
              ": recording stops where the disk fills (the job runs on, and the trace says where it stops)");
  }

  Uuid uuid = NewUuid();
  JobManifest m;
  m.trace_uuid = uuid;
  m.format_epoch = format::kFormatEpoch;
  m.min_reader_epoch = format::kMinReaderEpoch;
  m.created_realtime_ns = static_cast<int64_t>(time(nullptr)) * 1000000000;
  m.command = command;
  m.level = *ParseLevel(level);
  m.world_size = ExpectedRanks(command);
  m.recorder = std::string("replay ") + Version();
  m.host = HostName();
  if (Status ms = FileSystem::Default()->WriteAtomic(dir + "/" + format::kManifestFile, EncodeJobManifest(m));
      !ms.ok()) {
    return Fail("record", ms);
  }
  PreloadInterposer(lib);
  // The recorder is NCCL's profiler plugin too, and passes NCCL's calls on to
  // the plugin the user chose.
  if (const char* chosen = std::getenv("NCCL_PROFILER_PLUGIN"); chosen != nullptr && *chosen != '\0') {
    setenv(setting_names::nccl_profiler_plugin, chosen, 0);
  }
  setenv("NCCL_PROFILER_PLUGIN", AbsolutePath(lib).c_str(), 1);
  setenv("REPLAY_DIR", dir.c_str(), 1);
  setenv("REPLAY_LEVEL", level.c_str(), 1);
  setenv("REPLAY_TRACE_UUID", UuidToString(uuid).c_str(), 1);
  setenv("REPLAY_COMMAND", JoinCommand(command).c_str(), 1);
  // Open MPI forwards these to ranks on other hosts: the preload, and every
  // setting that is set (the ones above always are).
  std::vector<std::string> forward = {"LD_PRELOAD", "NCCL_PROFILER_PLUGIN", "REPLAY_COMMAND"};
  for (const SettingInfo& setting : AllSettings()) {
    if (std::getenv(setting.name) != nullptr) forward.emplace_back(setting.name);
  }
  std::vector<std::string> run = command;
  if (ForwardsWithX(command)) {
    // Open MPI refuses mca_base_env_list next to -x: forward with -x too.
    std::vector<std::string> x;
    for (const std::string& name : forward) x.insert(x.end(), {"-x", name});
    run.insert(run.begin() + 1, x.begin(), x.end());
  } else {
    std::string list;
    for (const std::string& name : forward) list += (list.empty() ? "" : ";") + name;
    PrependEnv("OMPI_MCA_mca_base_env_list", list, ';');
  }

  int status = RunAndWait(run);
  if (status < 0) return Fail("record", std::string("cannot start the command: ") + std::strerror(errno));
  int rc = ExitCodeOf(status);
  WaitForRanks(dir, 5000);
  PrintSummary(dir);
  return rc;
}

}  // namespace

void AddRecordCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(app, "record", "Run a command with the recorder preloaded", kHelp, exit_code,
                                        [](const Options& o) { return Run(o.dir, o.level, o.force, o.command); });
  cmd->add_option("-o,--output", opt->dir, "Trace directory (default: replay-YYYYMMDD-HHMMSS)");
  cmd->add_option("--level", opt->level, "meta, hash (default) or data");
  cmd->add_flag("--force", opt->force, "Record into a directory that is not empty");
  cmd->add_option("COMMAND", opt->command, "The command to run, after --")->required();
}

}  // namespace replay::cli
