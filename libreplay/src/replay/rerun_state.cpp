#include "replay/rerun_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace replay {
namespace {

// Each field's text in the environment; "" is its unset value.
std::string Encode(RerunMode m) {
  switch (m) {
    case RerunMode::kOneRank: return "rerun";
    case RerunMode::kAllRanks: return "rerun-all";
    case RerunMode::kNone: break;
  }
  return "";
}
std::string Encode(const std::string& s) { return s; }
std::string Encode(int64_t v) { return v >= 0 ? std::to_string(v) : ""; }

void Decode(const char* text, RerunMode* m) {
  *m = std::strcmp(text, "rerun") == 0       ? RerunMode::kOneRank
       : std::strcmp(text, "rerun-all") == 0 ? RerunMode::kAllRanks
                                             : RerunMode::kNone;
}
void Decode(const char* text, std::string* s) { *s = text; }
void Decode(const char* text, int64_t* v) { *v = std::atoll(text); }

}  // namespace

std::vector<std::string> RerunRequest::Export() const {
  std::vector<std::string> set;
  auto put = [&](const char* name, const std::string& value) {
    if (value.empty()) {
      unsetenv(name);
      return;
    }
    setenv(name, value.c_str(), 1);
    set.push_back(name);
  };
#define REPLAY_RERUN_PUT_(field, type, name, doc) put(name, Encode(field));
  REPLAY_RERUN_VARIABLES(REPLAY_RERUN_PUT_)
#undef REPLAY_RERUN_PUT_
  return set;
}

RerunRequest RerunRequest::FromEnvironment() {
  RerunRequest r;
  auto get = [](const char* name, auto* field) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') Decode(v, field);
  };
#define REPLAY_RERUN_GET_(field, type, name, doc) get(name, &r.field);
  REPLAY_RERUN_VARIABLES(REPLAY_RERUN_GET_)
#undef REPLAY_RERUN_GET_
  return r;
}

std::string RerunStatePath(const std::string& dir, int32_t rank) { return dir + "/rank-" + std::to_string(rank); }

Result<std::string> CreateRerunStateFile() {
  char path[] = "/tmp/replay-rerun-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return Status::IoError(std::string("cannot create a state file in /tmp: ") + std::strerror(errno));
  RerunState init{};
  init.last_index = -1;
  (void)!write(fd, &init, sizeof(init));
  close(fd);
  return std::string(path);
}

Result<std::string> CreateRerunStateDir() {
  char path[] = "/tmp/replay-rerun-all-XXXXXX";
  if (mkdtemp(path) == nullptr) return Status::IoError("cannot create a state directory in /tmp");
  return std::string(path);
}

std::optional<RerunState> TakeRerunState(const std::string& path) {
  RerunState st{};
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  bool whole = read(fd, &st, sizeof(st)) == static_cast<ssize_t>(sizeof(st));
  close(fd);
  unlink(path.c_str());
  st.message[sizeof(st.message) - 1] = '\0';
  if (!whole) return std::nullopt;
  return st;
}

std::string RerunNotServedPath(const std::string& state, bool all_ranks) {
  return state + (all_ranks ? "/not-served" : ".not-served");
}

RerunState* MapRerunState(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  RerunState* st = nullptr;
  if (ftruncate(fd, sizeof(RerunState)) == 0) {
    void* p = mmap(nullptr, sizeof(RerunState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      st = static_cast<RerunState*>(p);
      std::memcpy(st->magic, kRerunStateMagic, sizeof(st->magic));
      st->last_index = -1;
      st->pid = getpid();
    }
  }
  close(fd);
  return st;
}

}  // namespace replay
