#include "replay/session.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "record/context.h"
#include "record/program_identity.h"
#include "replay/event_format.h"
#include "replay/settings.h"
#include "util/log.h"

namespace replay::rerun {

namespace internal {
std::atomic<int> g_mode{0};
bool g_all = false;
}  // namespace internal

namespace {

RerunRequest* g_request = nullptr;
std::once_flag g_once;
Session* g_session = nullptr;
bool g_failed = false;
// The session once Start has returned with it usable, for Started().
std::atomic<Session*> g_ready{nullptr};

thread_local uint32_t t_thread __attribute__((tls_model("initial-exec"))) = UINT32_MAX;

void InForkedChild() { internal::g_mode.store(2); }

// Who ran but was not served, for `replay rerun`'s report when nothing was.
void NoteNotServed(const RerunRequest& request, const ProgramIdentity& me, const std::string& why) {
  if (request.state.empty()) return;
  int fd = open(RerunNotServedPath(request.state, request.all_ranks()).c_str(),
                O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::string line = std::to_string(getpid()) + "\t" + why + "\t" + me.Describe() + "\n";
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

// Whether this process runs a program the request names.
bool RunsRecordedProgram(const RerunRequest& request) {
  if (request.programs.empty()) return true;
  std::vector<std::string> given = DecodeArgs(request.args);
  std::vector<ProgramIdentity> recorded = DecodeIdentities(request.programs);
  ProgramIdentity me = ThisProcess();
  for (const ProgramIdentity& r : recorded) {
    if (replay::RunsRecordedProgram(me, r, given)) return true;
  }
  NoteNotServed(request, me, recorded.empty() ? "" : WhyNotRecordedProgram(me, recorded.front(), given));
  return false;
}

bool Debugged() {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* t = std::strstr(buf, "TracerPid:");
  return t != nullptr && std::atoi(t + 10) != 0;
}

void CopyMessage(RerunState* st, const std::string& message) {
  size_t n = std::min(message.size(), sizeof(st->message) - 1);
  std::memcpy(st->message, message.data(), n);
  st->message[n] = '\0';
}

}  // namespace

void Detect() {
  if (std::getenv("REPLAY_MODE") != nullptr) pthread_atfork(nullptr, nullptr, InForkedChild);
}

bool internal::Decide() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (int mode = g_mode.load(); mode != 0) return mode == 1;
  RerunRequest request = RerunRequest::FromEnvironment();
  // REPLAY_DISABLE=1 leaves a process as if nothing were preloaded, re-run or not.
  const char* disabled = std::getenv(setting_names::disable);
  const bool inert = disabled != nullptr && std::strcmp(disabled, "1") == 0;
  if (inert || request.mode == RerunMode::kNone || !RunsRecordedProgram(request)) {
    g_mode.store(2, std::memory_order_release);
    return false;
  }
  g_request = new RerunRequest(std::move(request));
  g_all = g_request->all_ranks();
  std::atexit(Session::AtExit);
  g_mode.store(1, std::memory_order_release);
  return true;
}

void Session::Start() {
  OracleOptions o;
  o.trace_dir = g_request->trace_dir;
  o.rank = internal::g_all ? DetectLauncher().rank : static_cast<int32_t>(g_request->rank);
  o.from_mark = g_request->from_mark;
  from_mark_ = !o.from_mark.empty();
  stop_at_ = g_request->stop_at;
  // One rank: the file `replay rerun` made. All ranks: one file each in that directory.
  if (!g_request->state.empty()) {
    state_ = MapRerunState(internal::g_all ? RerunStatePath(g_request->state, o.rank) : g_request->state);
  }
  g_session = this;
  if (o.rank < 0) Stop(Verdict::kFailed, "cannot tell which rank this process is (no launcher rank variable)");
  auto oracle = Oracle::Open(o);
  if (!oracle.ok()) Stop(Verdict::kFailed, oracle.status().message());
  oracle_ = std::move(oracle).value();
  const RankHeader& h = oracle_->header();
  if (log::Enabled(log::Level::kInfo)) {
    log::Info("replay: pid " + std::to_string(getpid()) + " re-runs rank " + std::to_string(o.rank) + " of " +
              o.trace_dir + (internal::g_all ? " with the other ranks" : " alone") +
              (from_mark_ ? " from mark " + o.from_mark : ""));
  }
  if (h.level != Level::kData && !internal::g_all) {
    Stop(Verdict::kFailed, "rank " + std::to_string(o.rank) + " was recorded at level " +
                               std::string(LevelName(h.level)) +
                               ": the bytes it received are not in the trace. Record again with "
                               "`replay record --level data ...` to re-run a rank alone.");
  }
  std::string_view limit = h.Env("REPLAY_HASH_LIMIT_KB");
  policy_.hash_limit = (limit.empty() ? 64 : std::strtoull(std::string(limit).c_str(), nullptr, 10)) << 10;
  // A recording that did not set REPLAY_NAN_SCAN counted as the default does;
  // counts are compared only where both sides counted alike (kRecvSampled).
  std::string_view scan = h.Env("REPLAY_NAN_SCAN");
  if (!ApplyNanScan(scan, &policy_)) {
    ApplyNanScan(Settings::From([](const char*) -> const char* { return nullptr; }).nan_scan, &policy_);
  }
  received_policy_ = policy_.ForReceived();
}

Session* Get() {
  if (!Active()) return nullptr;
  std::call_once(g_once, [] {
    (new Session())->Start();
    if (!g_failed && g_session != nullptr && g_session->oracle_ != nullptr) {
      g_ready.store(g_session, std::memory_order_release);
    }
  });
  return Started();
}

Session* Started() {
  Session* s = g_ready.load(std::memory_order_acquire);
  return s != nullptr && !g_failed ? s : nullptr;
}

uint32_t Session::ThreadNumber() {
  if (t_thread == UINT32_MAX) t_thread = next_thread_.fetch_add(1);
  return t_thread;
}

std::string Site(uint64_t call_site) { return "called from " + Hex(call_site); }

ServedCall Session::Serve(std::string_view api, CallForm form, OpKind kind, uint64_t call_site, bool check_stop) {
  auto served = oracle_->Serve(ThreadNumber(), api, form, kind);
  if (!served.ok()) {
    const Status& st = served.status();
    std::string where = call_site != 0 ? " (" + Site(call_site) + ")" : "";
    Stop(st.code() == Status::Code::kUnavailable ? Verdict::kRecordingEnded : Verdict::kDiverged,
         st.message() + where);
  }
  if (check_stop) CheckStopAt(*served->first, api);
  NoteServed(*served->first);
  return std::move(served).value();
}

void Session::NoteServed(const Event& first) {
  if (state_ != nullptr) __atomic_store_n(&state_->last_index, static_cast<int64_t>(first.index), __ATOMIC_RELEASE);
}

void Session::CheckStopAt(const Event& first, std::string_view api) {
  if (stop_at_ >= 0 && static_cast<int64_t>(first.index) >= stop_at_) {
    Stop(Verdict::kStoppedAt, "stopped at event #" + std::to_string(first.index) + " (" + std::string(api) +
                                  "), as asked with --stop-at " + std::to_string(stop_at_));
  }
}

void Session::NoteDivergence(const Event& recorded, const std::string& message) {
  if (state_ == nullptr) return;
  if (state_->verdict == static_cast<int32_t>(Verdict::kDiverged)) return;  // the first one is what counts
  std::string line = "replay rerun: rank " + std::to_string(oracle_->world_rank()) + ": " + message + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
  CopyMessage(state_, message);
  state_->diverged_index = static_cast<int64_t>(recorded.index);
  state_->diverged_time_ns = recorded.time_ns;
  __atomic_store_n(&state_->verdict, static_cast<int32_t>(Verdict::kDiverged), __ATOMIC_RELEASE);
}

void Session::LeaveRecording(const std::string& why) {
  if (off_.exchange(true)) return;
  std::string line = "replay rerun: rank " + std::to_string(oracle_ != nullptr ? oracle_->world_rank() : -1) +
                     ": " + why + "; from here on nothing is forced\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

void Session::Report(Verdict verdict, const std::string& message) {
  if (state_ == nullptr) return;
  CopyMessage(state_, message);
  if (oracle_ != nullptr) state_->last_index = oracle_->last_index();
  __atomic_store_n(&state_->verdict, static_cast<int32_t>(verdict), __ATOMIC_RELEASE);
}

void Stop(Verdict verdict, const std::string& message) {
  g_failed = verdict == Verdict::kFailed;
  const bool reported = g_session != nullptr && g_session->state_ != nullptr;
  if (reported) g_session->Report(verdict, message);  // `replay rerun` says it, once
  if (!reported || (verdict == Verdict::kStoppedAt && Debugged())) {
    std::string line = "replay rerun: " + message + "\n";
    (void)!write(STDERR_FILENO, line.data(), line.size());
  }
  if (verdict == Verdict::kStoppedAt && Debugged()) {
    // Under a debugger: stop here, with the program's state intact.
    raise(SIGTRAP);
  }
  _exit(kRerunExitStopped);
}

// At exit: the program finished. Consistent if the recording had nothing more.
void Session::AtExit() {
  Session* s = g_session;
  if (s == nullptr || s->state_ == nullptr || s->oracle_ == nullptr) return;
  if (s->state_->verdict != static_cast<int32_t>(Verdict::kRunning)) return;
  s->state_->last_index = s->oracle_->last_index();
  __atomic_store_n(&s->state_->verdict, static_cast<int32_t>(Verdict::kReproduced), __ATOMIC_RELEASE);
}

}  // namespace replay::rerun
