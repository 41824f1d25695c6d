#include "record/recorder.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "record/context.h"
#include "record/program_identity.h"
#include "replay/version.h"
#include "trace/format.h"
#include "util/clock.h"
#include "util/log.h"

namespace replay {

std::atomic<Recorder*> Recorder::active_{nullptr};

namespace {

// Activation state: 0 not yet, 1 active, 2 off for good (disabled, failed,
// closed, forked child).
std::atomic<int> g_state{0};
std::mutex g_activate_mu;
std::vector<std::string>* g_api_names = nullptr;
Recorder* g_recorder = nullptr;  // kept after Close so that late callers stay safe
void (*g_activation_hook)() = nullptr;
void (*g_close_hook)(Recorder*) = nullptr;

// Early events: a small fixed buffer, used before activation.
constexpr int kEarlyMax = 32;
Event* g_early[kEarlyMax];
std::atomic<int> g_early_count{0};
std::mutex g_early_mu;

void Warn(const std::string& msg) { log::Warn("replay: " + msg); }

void CloseAtExit() {
  if (Recorder* r = Recorder::Peek()) r->Close(CloseReason::kExit);
}

}  // namespace

void Recorder::SetActivationHook(void (*hook)()) { g_activation_hook = hook; }
void Recorder::SetCloseHook(void (*hook)(Recorder*)) { g_close_hook = hook; }

void Recorder::SetApiNames(std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(g_activate_mu);
  delete g_api_names;
  g_api_names = new std::vector<std::string>(std::move(names));
}

Recorder* Recorder::GetSlow() {
  if (Recorder* r = active_.load(std::memory_order_acquire)) return r;
  if (g_state.load(std::memory_order_acquire) == 2) return nullptr;
  return Activate();
}

Recorder* Recorder::Activate() {
  std::lock_guard<std::mutex> lock(g_activate_mu);
  if (g_state.load() != 0) return active_.load();
  auto settings = Settings::FromEnvironment();
  if (settings.disable == "1") {
    g_state.store(2);
    return nullptr;
  }
  auto* rec = new Recorder();
  rec->settings_ = settings;
  Status st = rec->Start();
  if (!st.ok()) {
    Warn("recording is off: " + st.message() + "; the program runs unrecorded");
    g_state.store(2);
    delete rec;
    return nullptr;
  }
  g_recorder = rec;
  active_.store(rec, std::memory_order_release);
  g_state.store(1);
  std::atexit(CloseAtExit);
  if (g_activation_hook != nullptr) g_activation_hook();

  // Flush what was seen before activation, in its original order.
  std::lock_guard<std::mutex> early(g_early_mu);
  int n = g_early_count.exchange(0);
  for (int i = 0; i < n && i < kEarlyMax; ++i) {
    rec->writer_->Append(*g_early[i]);
    delete g_early[i];
    g_early[i] = nullptr;
  }
  return rec;
}

Status Recorder::Start() {
  auto level = settings_.ParsedLevel();
  if (!level.ok()) return level.status();
  level_ = *level;
  if (settings_.cuda_kernels != "0" && settings_.cuda_kernels != "1") {
    return Status::InvalidArgument("REPLAY_CUDA_KERNELS=" + settings_.cuda_kernels + " is not 0 or 1");
  }
  WriterOptions o;
  o.dir = settings_.dir;
  REPLAY_ASSIGN_OR_RETURN(int64_t flush_ms, settings_.Integer("flush_ms"));
  REPLAY_ASSIGN_OR_RETURN(int64_t ring_kb, settings_.Integer("ring_kb"));
  REPLAY_ASSIGN_OR_RETURN(int64_t block_events, settings_.Integer("block_events"));
  REPLAY_ASSIGN_OR_RETURN(int64_t zstd_level, settings_.Integer("zstd_level"));
  REPLAY_ASSIGN_OR_RETURN(int64_t full_wait_ms, settings_.Integer("full_wait_ms"));
  REPLAY_ASSIGN_OR_RETURN(int64_t hash_limit_kb, settings_.Integer("hash_limit_kb"));
  REPLAY_ASSIGN_OR_RETURN(o.payload_window_marks, settings_.DataWindowMarks());
  fingerprint_policy_.hash_limit = static_cast<size_t>(hash_limit_kb) << 10;
  if (!ApplyNanScan(settings_.nan_scan, &fingerprint_policy_)) {
    return Status::InvalidArgument("REPLAY_NAN_SCAN=" + settings_.nan_scan + " is not one of all, sent, hashed");
  }
  if (settings_.device_hash != "kernel" && settings_.device_hash != "copy") {
    return Status::InvalidArgument("REPLAY_DEVICE_HASH=" + settings_.device_hash + " is not one of kernel, copy");
  }
  fingerprint_policy_.device_kernel = settings_.device_hash == "kernel";
  received_policy_ = fingerprint_policy_.ForReceived();
  o.flush_interval_ns = std::max<int64_t>(flush_ms, 1) * 1000000;
  o.ring_slot_bytes = static_cast<uint64_t>(std::max<int64_t>(ring_kb, 16)) << 10;
  o.block_events = static_cast<uint32_t>(std::clamp<int64_t>(block_events, 16, format::kMaxBlockEvents));
  o.zstd_level = static_cast<int>(zstd_level);
  o.full_wait_ns = full_wait_ms * 1000000;

  LauncherInfo launcher = DetectLauncher();
  RankHeader& h = o.header;
  h.trace_uuid = ChooseTraceUuid(settings_.trace_uuid, launcher, settings_.dir);
  h.rank = launcher.rank;
  h.world_size = launcher.world_size;
  h.host = HostName();
  h.pid = getpid();
  h.level = level_;
  h.versions = {{"replay", Version()}, {"trace_epoch", std::to_string(TraceEpoch())}};
  h.environment = EnvironmentSnapshot(settings_.EnvPrefixes());
  h.command_line = CommandLine();
  h.executable = ExecutablePath();
  h.build_id = ExecutableBuildId();
  h.cores = OnlineCores();
  if (g_api_names != nullptr) h.api_names = *g_api_names;
  h.modules = LoadedModules();
  o.manifest.world_size = launcher.world_size;
  o.manifest.recorder = std::string("replay ") + Version();
  if (const char* cmd = std::getenv("REPLAY_COMMAND")) {
    // Set by `replay record`: the command as the user typed it.
    o.manifest.command = SplitCommand(cmd);
  }
  o.on_failure = [](const Status& s) {
    Warn("recording stopped: " + s.message() + "; the program continues unrecorded");
  };
  if (launcher.rank >= 0) world_from_ = 1;
  REPLAY_ASSIGN_OR_RETURN(writer_, TraceWriter::Open(std::move(o)));
  if (!launcher.launcher.empty()) AppendInfo("launcher", launcher.launcher);
  if (launcher.local_rank >= 0) AppendInfo("launcher.local_rank", std::to_string(launcher.local_rank));
  if (log::Enabled(log::Level::kInfo)) {
    log::Info("replay: pid " + std::to_string(h.pid) + " (" + h.executable + ") records as rank " +
              std::to_string(h.rank) + " of " + std::to_string(h.world_size) + " at level " +
              std::string(LevelName(level_)) + " into " + settings_.dir);
  }
  return Status::Ok();
}

bool Recorder::AppendInfo(std::string_view key, std::string_view value) {
  InfoEvent info{static_cast<uint32_t>(key.size())};
  std::string text;
  text.reserve(key.size() + value.size());
  text.append(key);
  text.append(value);
  return writer_->AppendBody(EventKind::kInfo, info, 0, {}, text);
}

void Recorder::NoteWorld(int32_t rank, int32_t size) {
  {
    std::lock_guard<std::mutex> lock(world_mu_);
    world_from_ = 1;
  }
  writer_->UpdateHeader([&](RankHeader& h) {
    h.rank = rank;
    h.world_size = size;
  });
}

void Recorder::NoteNcclCommunicator(int32_t rank, int32_t size) {
  if (rank < 0 || size <= 0 || rank >= size) return;
  {
    std::lock_guard<std::mutex> lock(world_mu_);
    if (world_from_ == 1 || (world_from_ == 2 && size <= nccl_world_size_)) return;
    world_from_ = 2;
    nccl_world_size_ = size;
  }
  writer_->UpdateHeader([&](RankHeader& h) {
    h.rank = rank;
    h.world_size = size;
  });
  AppendInfo("nccl.world_rank", std::to_string(rank));
  AppendInfo("nccl.world_size", std::to_string(size));
}

void Recorder::SetVersion(const std::string& key, const std::string& value) {
  writer_->UpdateHeader([&](RankHeader& h) {
    for (auto& [k, v] : h.versions) {
      if (k == key) {
        v = value;
        return;
      }
    }
    h.versions.emplace_back(key, value);
  });
}

void Recorder::Close(CloseReason reason) {
  if (closed_.exchange(true)) return;
  if (g_close_hook != nullptr) g_close_hook(this);
  if (reason == CloseReason::kExit && finalized_.load()) reason = CloseReason::kFinalize;
  writer_->UpdateHeader([](RankHeader& h) { h.modules = LoadedModules(); });
  writer_->Close(reason);
  g_state.store(2);
  active_.store(nullptr, std::memory_order_release);
}

void Recorder::AbandonInChild() {
  g_state.store(2);
  Recorder* r = active_.exchange(nullptr);
  if (r != nullptr) r->writer_->AbandonAfterFork();
  g_early_count.store(0);
}

void Recorder::RecordSignal(int signo, int code, uint64_t address, bool fatal) {
  Recorder* r = g_recorder;
  if (r == nullptr || r->closed_.load()) return;
  SignalEvent s{signo, code, address, fatal};
  r->writer_->AppendFromSignal(EventKind::kSignal, &s, sizeof(s));
  if (fatal && !r->closed_.exchange(true)) {
    active_.store(nullptr, std::memory_order_release);
    r->writer_->CloseFromSignal(CloseReason::kSignal, signo, 2'000'000'000);
  }
}

void Recorder::CloseBeforeExit() {
  Recorder* r = g_recorder;
  if (r == nullptr || r->closed_.exchange(true)) return;
  active_.store(nullptr, std::memory_order_release);
  CloseReason reason = r->finalized_.load() ? CloseReason::kFinalize : CloseReason::kExit;
  r->writer_->CloseFromSignal(reason, 0, 2'000'000'000);
}

void Recorder::BufferEarly(const Event& e) {
  if (g_state.load(std::memory_order_acquire) != 0) return;
  std::lock_guard<std::mutex> lock(g_early_mu);
  int n = g_early_count.load();
  if (n >= kEarlyMax) return;
  g_early[n] = new Event(e);
  g_early[n]->time_ns = MonotonicNs();
  g_early_count.store(n + 1);
}

}  // namespace replay
