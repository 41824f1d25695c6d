#include "record/context.h"

#include <link.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/hash.h"

extern char** environ;

namespace replay {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int32_t EnvInt(const char* name) {
  const char* v = Env(name);
  if (v == nullptr) return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && n >= 0 && n < INT32_MAX ? static_cast<int32_t>(n) : -1;
}

}  // namespace

LauncherInfo DetectLauncher() {
  LauncherInfo l;
  struct Source {
    const char* launcher;
    const char* rank;
    const char* size;
    const char* local;
    const char* job;
  };
  static const Source kSources[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_MCA_ess_base_jobid"},
      {"pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_NAMESPACE"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_KVSNAME"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"},
  };
  for (const Source& s : kSources) {
    int32_t r = EnvInt(s.rank);
    if (r < 0) continue;
    l.rank = r;
    l.world_size = EnvInt(s.size);
    l.local_rank = EnvInt(s.local);
    l.launcher = s.launcher;
    if (const char* j = Env(s.job)) l.job_id = j;
    if (l.job_id.empty() && Env("PMIX_NAMESPACE")) l.job_id = Env("PMIX_NAMESPACE");
    if (const char* step = Env("SLURM_STEP_ID"); step && l.launcher == "slurm") l.job_id += std::string(".") + step;
    break;
  }
  return l;
}

Uuid ChooseTraceUuid(const std::string& setting, const LauncherInfo& launcher,
                     const std::string& trace_dir) {
  if (!setting.empty()) {
    if (auto u = ParseUuid(setting)) return *u;
  }
  if (!launcher.job_id.empty()) {
    std::string key = launcher.launcher + "\n" + launcher.job_id + "\n" + AbsolutePath(trace_dir);
    Uuid u{};
    uint64_t a = Hash64(key.data(), key.size(), 1);
    uint64_t b = Hash64(key.data(), key.size(), 2);
    std::memcpy(u.data(), &a, 8);
    std::memcpy(u.data() + 8, &b, 8);
    u[6] = static_cast<uint8_t>((u[6] & 0x0f) | 0x80);  // version 8: custom, name-based
    u[8] = static_cast<uint8_t>((u[8] & 0x3f) | 0x80);
    return u;
  }
  return NewUuid();
}

KeyValues EnvironmentSnapshot(const std::vector<std::string>& prefixes) {
  KeyValues out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    for (const std::string& p : prefixes) {
      // A prefix without a trailing '_' names one variable exactly (RANK, not RANKING).
      bool match = !p.empty() && p.back() == '_' ? name.compare(0, p.size(), p) == 0 : name == p;
      if (match) {
        out.emplace_back(name, eq + 1);
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> CommandLine() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

uint32_t OnlineCores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<uint32_t>(n) : 0;
}

std::vector<Module> LoadedModules() {
  std::vector<Module> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* mods = static_cast<std::vector<Module>*>(data);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
          uint64_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
          lo = std::min(lo, start);
          hi = std::max(hi, start + info->dlpi_phdr[i].p_memsz);
        }
        if (hi > lo) {
          std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
          if (path.empty() && mods->empty()) {
            char exe[PATH_MAX];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
            if (n > 0) path.assign(exe, static_cast<size_t>(n));
          }
          mods->push_back(Module{path, lo, hi - lo});
        }
        return 0;
      },
      &out);
  return out;
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace replay
