// replay rerun DIR --rank R [--stop-at N] [--from-mark NAME=VALUE] -- COMMAND...
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "util/log.h"
#include "command.h"
#include "launch.h"
#include "record/program_identity.h"
#include "replay/event_format.h"
#include "replay/oracle.h"
#include "replay/rerun_state.h"
#include "replay/settings.h"
#include "term.h"
#include "trace_input.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Re-run one rank of a recorded job alone, on this machine, without mpirun or
peers. The program runs under the preload, which answers every communication
call of rank R from the trace: the recorded rank and world size, communicators,
received bytes, wildcard matches, test outcomes, entropy and seeds. Each call is
checked against the recording (the call, its arguments, the fingerprint of the
data it sends); at the first difference the program stops with a report naming
the event and what differs, which is how nondeterministic computation shows.

  replay rerun trace --rank 2 -- ./train --steps 100

The trace must have been recorded at level data (`replay record --level data`).
When the program reaches the point where the recording ends (the rank crashed,
hung or was killed), it stops there and says so. --stop-at N stops at event N
(under a debugger, with SIGTRAP, so the state can be inspected: run
`replay rerun ... -- gdb --args ./train`). --from-mark NAME=VALUE re-runs from
an application checkpoint: start the program from its checkpoint (for example
with its own --resume flag) and the trace is served from that mark on.

  replay rerun trace --all -- mpirun -np 4 ./train

With --all every rank runs and really communicates, but each is held to its
recording: wildcard receives take the recorded source, tests, probes and
wait-any/some calls the recorded outcome, entropy and seeds the recorded values,
and every fingerprint is compared. A run that diverged once can so be re-run
identically; the verdict says so, or names the first divergence.

Exit status: 0 the re-run reproduced the recording (up to where it ends, or to
--stop-at), 1 it diverged, 2 bad arguments or a trace that cannot be re-run.)";

struct Options {
  std::string dir;
  int rank = -1;
  bool all = false;
  int64_t stop_at = -1;
  std::string from_mark;
  bool require_same_command = false;
  std::vector<std::string> command;
};

std::string Basename(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Launcher variables would make the program believe it is one of many. How a
// singleton starts (OMPI_MCA_ess_singleton_*, e.g. without a daemon where
// Open MPI is not installed) is the user's, and stays.
void ForgetLauncher() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("OMPI_MCA_ess_singleton_", 0) == 0) continue;
    for (const char* prefix : {"OMPI_COMM_WORLD_", "OMPI_UNIVERSE_SIZE", "OMPI_MCA_ess_", "OMPI_MCA_orte_",
                               "OMPI_MCA_pmix", "PMIX_", "PMI_", "SLURM_PROCID", "REPLAY_DIR", "REPLAY_TRACE_UUID"}) {
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
  }
  for (const std::string& n : names) unsetenv(n.c_str());
}

// The program a rank ran, as the preload recognises it.
ProgramIdentity RecordedProgram(const RankHeader& h) { return ProgramIdentity{h.executable, h.build_id, h.command_line}; }

// The arguments a launcher line gives the recorded program: those after the
// first word that names it (`mpirun -np 4 ./train --lr 0.3` gives `--lr 0.3`).
std::vector<std::string> ArgsInLauncherLine(const std::vector<std::string>& line,
                                            const std::vector<ProgramIdentity>& programs) {
  for (size_t i = 0; i < line.size(); ++i) {
    for (const ProgramIdentity& p : programs) {
      if (p.argv.empty()) continue;
      std::string word = Basename(line[i]);
      if (word == Basename(p.argv[0]) || (!p.executable.empty() && word == Basename(p.executable))) {
        return std::vector<std::string>(line.begin() + static_cast<long>(i) + 1, line.end());
      }
    }
  }
  return {};
}

// The processes that ran under the preload without being served (see
// rerun_state.h), as report lines; the file is removed.
std::vector<std::string> NotServed(const std::string& path) {
  std::vector<std::string> out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char line[8192];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      std::string l = line;
      if (!l.empty() && l.back() == '\n') l.pop_back();
      size_t a = l.find('\t');
      size_t b = a == std::string::npos ? a : l.find('\t', a + 1);
      if (b == std::string::npos) continue;
      out.push_back("pid " + l.substr(0, a) + ": " + l.substr(b + 1) + " (" + l.substr(a + 1, b - a - 1) + ")");
    }
    std::fclose(f);
  }
  unlink(path.c_str());
  return out;
}

// No process of the command ran the recorded program: say what ran instead.
int NothingServed(const std::string& who, const ProgramIdentity& recorded, const std::vector<std::string>& others,
                  const std::string& example) {
  std::string msg = "no process of the command ran the program " + who + " ran, so nothing was re-run\n  recorded: " +
                    recorded.Describe();
  if (others.empty()) {
    msg += "\n  no process of the command made a call the recording could serve";
  } else {
    msg += "\n  ran instead:";
    for (const std::string& o : others) msg += "\n    " + o;
  }
  msg += "\n  run the recorded program with its recorded arguments (or give yours to it), e.g. `" + example + "`";
  std::fprintf(stderr, "replay rerun: %s\n", msg.c_str());
  return kExitBadInput;
}

// The index of the last event that starts a call in the recording.
int64_t LastCallIndex(const Oracle& o) {
  for (auto it = o.events().rbegin(); it != o.events().rend(); ++it) {
    // A re-run may read the clock less often than the recording did.
    if (it->kind == EventKind::kEntropy && IsClock(it->entropy.source)) continue;
    if (Oracle::StartsCall(*it)) return static_cast<int64_t>(it->index);
  }
  return -1;
}

bool Diverged(const RerunState& st) { return static_cast<RerunVerdict>(st.verdict) == RerunVerdict::kDiverged; }

const Event* FatalSignal(const Oracle& o) {
  for (const Event& e : o.events()) {
    if (e.kind == EventKind::kSignal && e.signal.fatal) return &e;
  }
  return nullptr;
}

// --all: every rank runs and really communicates, forced to the recorded
// choices; each rank reports into its own state file.
int RunAll(const Options& opt) {
  auto trace = TraceReader::Open(opt.dir);
  if (!trace.ok()) return Fail("rerun", trace.status());
  std::string lib = FindInterposer();
  if (lib.empty()) return Fail("rerun", "cannot find libreplay_interpose.so (set REPLAY_INTERPOSE_LIB)");
  auto state_dir = CreateRerunStateDir();
  if (!state_dir.ok()) return Fail("rerun", state_dir.status());
  // Every program the ranks ran (one, unless the job was MPMD).
  std::vector<ProgramIdentity> programs;
  for (const RankEntry& e : (*trace)->ranks()) {
    if (!e.header_ok || e.header.command_line.empty()) continue;
    ProgramIdentity p = RecordedProgram(e.header);
    bool seen = false;
    for (const ProgramIdentity& q : programs) seen = seen || (q.build_id == p.build_id && q.argv == p.argv);
    if (!seen) programs.push_back(p);
  }
  RerunRequest request;
  request.mode = RerunMode::kAllRanks;
  request.trace_dir = AbsolutePath(opt.dir);
  request.state = *state_dir;
  request.programs = EncodeIdentities(programs);
  request.args = EncodeArgs(ArgsInLauncherLine(opt.command, programs));
  PreloadInterposer(lib);
  std::string forward = "LD_PRELOAD";
  for (const std::string& name : request.Export()) forward += ";" + name;
  unsetenv("REPLAY_DIR");
  PrependEnv("OMPI_MCA_mca_base_env_list", forward, ';');
  int status = RunAndWait(opt.command);
  if (status < 0) return Fail("rerun", std::string("cannot start the command: ") + std::strerror(errno));

  struct RankResult {
    int rank;
    RerunState st;
    bool found;
    int64_t started_ns;  // when the rank started recording (realtime), to order divergences across ranks
  };
  std::vector<RankResult> results;
  for (const RankEntry& e : (*trace)->ranks()) {
    std::optional<RerunState> st = TakeRerunState(RerunStatePath(*state_dir, e.rank));
    results.push_back(RankResult{e.rank, st.value_or(RerunState{}), st.has_value(),
                                 e.header_ok ? e.header.start_realtime_ns : 0});
  }
  std::vector<std::string> others = NotServed(RerunNotServedPath(*state_dir, true));
  rmdir(state_dir->c_str());
  const RankResult* first = nullptr;
  std::vector<int> missing;
  for (const RankResult& r : results) {
    if (!r.found) missing.push_back(r.rank);
    if (r.found && Diverged(r.st) &&
        (first == nullptr || r.started_ns + r.st.diverged_time_ns < first->started_ns + first->st.diverged_time_ns)) {
      first = &r;
    }
  }
  std::fprintf(stderr, "replay rerun --all: the command exited with status %d\n", ExitCodeOf(status));
  std::vector<const RankResult*> failed;
  for (const RankResult& r : results) {
    if (r.found && static_cast<RerunVerdict>(r.st.verdict) == RerunVerdict::kFailed) failed.push_back(&r);
  }
  if (!failed.empty()) {
    // Nothing about the recording can be said of a rank that could not be re-run.
    for (const RankResult* r : failed) {
      std::fprintf(stderr, "replay rerun: rank %d could not be re-run: %s\n", r->rank, r->st.message);
    }
    return kExitBadInput;
  }
  if (first != nullptr) {
    // Each rank's first departure: the event, the call made, the call recorded.
    std::fprintf(stderr, "replay rerun: %s\n  first divergence, in recorded time: rank %d at event #%lld: %s\n",
                 Paint(Color::kRed, "diverged").c_str(), first->rank, static_cast<long long>(first->st.diverged_index),
                 first->st.message);
    for (const RankResult& r : results) {
      if (&r != first && r.found && Diverged(r.st)) {
        std::fprintf(stderr, "  rank %d first departed at event #%lld: %s\n", r.rank,
                     static_cast<long long>(r.st.diverged_index), r.st.message);
      }
    }
    return kExitFindings;
  }
  if (!missing.empty() && missing.size() == results.size() && !programs.empty()) {
    return NothingServed("the ranks", programs.front(), others,
                         "replay rerun " + opt.dir + " --all -- mpirun -np " + std::to_string(results.size()) + " " +
                             Join(programs.front().argv));
  }
  if (!missing.empty()) {
    std::string m;
    for (int r : missing) m += (m.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr, "replay rerun: %s\n  no report from rank(s) %s: were they started (same world size as recorded)?\n",
                 Paint(Color::kRed, "diverged").c_str(), m.c_str());
    return kExitFindings;
  }
  std::fprintf(stderr, "replay rerun: %s\n  all %zu ranks reproduced the recording: every forced choice and every fingerprint as recorded\n",
               Paint(Color::kGreen, "reproduced identically").c_str(), results.size());
  return kExitOk;
}

int Run(const Options& opt) {
  if (opt.command.empty()) return Fail("rerun", "no command given: replay rerun DIR --rank R -- COMMAND...");
  if (const char* off = std::getenv(setting_names::disable); off != nullptr && std::string(off) == "1") {
    return Fail("rerun", "REPLAY_DISABLE=1 is set, which leaves every process as if nothing were preloaded: "
                         "nothing could be served. Unset it to re-run.");
  }
  if (opt.all) {
    if (opt.rank >= 0 || opt.stop_at >= 0 || !opt.from_mark.empty()) {
      return Fail("rerun", "--all re-runs every rank from the start; --rank, --stop-at and --from-mark go without it");
    }
    return RunAll(opt);
  }
  if (opt.rank < 0) return Fail("rerun", "--rank R is required (or --all, to re-run every rank)");
  OracleOptions oo;
  oo.trace_dir = opt.dir;
  oo.rank = opt.rank;
  oo.from_mark = opt.from_mark;
  auto oracle = Oracle::Open(oo);
  if (!oracle.ok()) return Fail("rerun", oracle.status());
  const Oracle& o = **oracle;
  if (o.level() != Level::kData) {
    return Fail("rerun", "rank " + std::to_string(opt.rank) + " of " + opt.dir + " was recorded at level " +
                             std::string(LevelName(o.level())) +
                             ": the bytes it received are not in the trace. Record again with "
                             "`replay record --level data -o DIR -- ...` to re-run a rank alone.");
  }
  const std::vector<std::string>& recorded = o.header().command_line;
  bool same = !recorded.empty() && recorded.size() == opt.command.size() &&
              Basename(recorded[0]) == Basename(opt.command[0]) &&
              std::equal(recorded.begin() + 1, recorded.end(), opt.command.begin() + 1);
  if (!same && !recorded.empty() && opt.from_mark.empty()) {
    std::string msg = "the command differs from the one rank " + std::to_string(opt.rank) + " ran: recorded `" +
                      Join(recorded) + "`, given `" + Join(opt.command) + "`";
    if (opt.require_same_command) return Fail("rerun", msg + " (--require-same-command)");
    log::Warn("replay rerun: warning: " + msg + "; going on");
  }
  std::string lib = FindInterposer();
  if (lib.empty()) return Fail("rerun", "cannot find libreplay_interpose.so (set REPLAY_INTERPOSE_LIB)");

  auto state_path = CreateRerunStateFile();
  if (!state_path.ok()) return Fail("rerun", state_path.status());

  ForgetLauncher();
  // The rank's one-sided windows become windows of this singleton process
  // (over MPI_COMM_SELF), which Open MPI's rdma component cannot make and its
  // other components can. A choice the user made stays.
  setenv("OMPI_MCA_osc", "^rdma", /*overwrite=*/0);
  PreloadInterposer(lib);
  RerunRequest request;
  request.mode = RerunMode::kOneRank;
  request.trace_dir = AbsolutePath(opt.dir);
  request.rank = opt.rank;
  request.state = *state_path;
  // The program to serve; other processes under the preload pass through.
  const ProgramIdentity program = RecordedProgram(o.header());
  if (!recorded.empty()) {
    request.programs = EncodeIdentities({program});
    request.args = EncodeArgs(std::vector<std::string>(opt.command.begin() + 1, opt.command.end()));
  }
  request.stop_at = opt.stop_at;
  request.from_mark = opt.from_mark;
  request.Export();

  int status = RunAndWait(opt.command);
  const int start_errno = errno;
  RerunState st = TakeRerunState(*state_path).value_or(RerunState{});
  std::vector<std::string> others = NotServed(RerunNotServedPath(*state_path, false));
  if (status < 0) return Fail("rerun", std::string("cannot start the command: ") + std::strerror(start_errno));
  if (st.pid == 0 && !recorded.empty() && LastCallIndex(o) >= 0) {
    return NothingServed("rank " + std::to_string(opt.rank), program, others,
                         "replay rerun " + opt.dir + " --rank " + std::to_string(opt.rank) + " -- " + Join(recorded));
  }

  const std::string who = "rank " + std::to_string(opt.rank);
  auto verdict = [&](bool ok, const std::string& text) {
    std::fprintf(stderr, "replay rerun: %s\n", (ok ? Paint(Color::kGreen, "reproduced") : Paint(Color::kRed, "diverged")).c_str());
    std::fprintf(stderr, "  %s\n", text.c_str());
    return ok ? kExitOk : kExitFindings;
  };
  switch (static_cast<RerunVerdict>(st.verdict)) {
    case RerunVerdict::kDiverged:  // the preload said what
      return verdict(false, st.message);
    case RerunVerdict::kRecordingEnded:
    case RerunVerdict::kStoppedAt:
      return verdict(true, st.message);
    case RerunVerdict::kFailed:
      return Fail("rerun", st.message);
    case RerunVerdict::kRunning:
    case RerunVerdict::kReproduced:
      break;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const Event* rec_sig = FatalSignal(o);
    std::string died = "the program died of " + SignalName(sig) + " after event #" +
                       std::to_string(st.last_index);
    if (rec_sig != nullptr && rec_sig->signal.signo == sig && st.last_index == LastCallIndex(o)) {
      return verdict(true, died + ", where the recorded " + who + " died of the same signal");
    }
    return verdict(false, died + "; the recorded " + who + " " + o.HowRecordingEnds());
  }
  int64_t last = LastCallIndex(o);
  if (static_cast<RerunVerdict>(st.verdict) == RerunVerdict::kReproduced && st.last_index >= last) {
    return verdict(true, "the program ran to the end (exit status " + std::to_string(ExitCodeOf(status)) +
                             "), consistent with all " + std::to_string(last + 1) + " events of " + who);
  }
  return verdict(false, "the program ended (exit status " + std::to_string(ExitCodeOf(status)) +
                            ") after event #" + std::to_string(st.last_index) + ", but the recording of " + who +
                            " goes on to event #" + std::to_string(last));
}

}  // namespace

void AddRerunCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(app, "rerun", "Re-run a recorded rank alone, served from the trace", kHelp,
                                        exit_code, [](const Options& o) { return RunOnTrace("rerun", o, Run); });
  cmd->add_option("DIR", opt->dir, "Trace directory (recorded at level data)")->required();
  cmd->add_option("--rank,-r", opt->rank, "The rank to re-run")->check(AtLeast(0, "a rank number"));
  cmd->add_flag("--all", opt->all, "Re-run every rank, really communicating (COMMAND is the launcher line)");
  cmd->add_option("--stop-at", opt->stop_at, "Stop at recorded event N (SIGTRAP under a debugger)")
      ->check(AtLeast(0, "an event index"));
  cmd->add_option("--from-mark", opt->from_mark, "Start from the application checkpoint marked NAME=VALUE");
  cmd->add_flag("--require-same-command", opt->require_same_command,
                "Refuse to run a command other than the recorded one (default: warn)");
  cmd->add_option("COMMAND", opt->command, "The program to run, after --")->required();
}

}  // namespace replay::cli
