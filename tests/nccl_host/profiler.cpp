#include "profiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "driver.h"
#include "nccl_profiler_abi.h"

namespace nccl_host::profiler {
namespace {

namespace abi = replay::nccl_profiler;

// The plugin, one per process, called through its v6 or v5 table. The
// descriptor is built as v6 (v5 is its prefix for every event NCCL 2.28 makes).
struct Plugin {
  void* lib = nullptr;
  const abi::PluginV6* v6 = nullptr;
  const abi::PluginV5* v5 = nullptr;
  int mask = 0;  // NCCL's ncclProfilerEventMask: what the last init asked for
};

Plugin& ThePlugin() {
  static Plugin p;
  return p;
}

// NCCL's plugin_open.cc: NAME, then libnccl-profiler-NAME.so.
void* Open(const char* name) {
  std::string first = name != nullptr && *name != '\0' ? name : "libnccl-profiler.so";
  void* lib = dlopen(first.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr || name == nullptr || *name == '\0') return lib;
  const size_t n = std::strlen(name);
  const bool library_name = std::strncmp(name, "lib", 3) == 0 && n >= 3 && std::strcmp(name + n - 3, ".so") == 0;
  if (std::strchr(name, '/') != nullptr || library_name) return nullptr;
  std::string second = std::string("libnccl-profiler-") + name + ".so";
  return dlopen(second.c_str(), RTLD_NOW | RTLD_LOCAL);
}

void Debug(int, unsigned long, const char*, int, const char*, ...) {}

const Plugin& Load() {
  static std::once_flag once;
  std::call_once(once, [] {
    Plugin& p = ThePlugin();
    const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
    if (name != nullptr && strcasecmp(name, "none") == 0) return;
    p.lib = Open(name);
    if (p.lib == nullptr) {
      dlerror();
      return;
    }
    const char* version = std::getenv("NCCL_HOST_PROFILER_VERSION");
    if (version != nullptr && std::strcmp(version, "6") == 0) {
      p.v6 = static_cast<const abi::PluginV6*>(dlsym(p.lib, abi::kSymbolV6));
    }
    if (p.v6 == nullptr) p.v5 = static_cast<const abi::PluginV5*>(dlsym(p.lib, abi::kSymbolV5));
    if (p.v6 == nullptr && p.v5 == nullptr) {
      if (const char* debug = std::getenv("NCCL_DEBUG"); debug != nullptr && strcasecmp(debug, "INFO") == 0) {
        std::fprintf(stderr, "NCCL INFO External profiler plugin %s is unsupported\n", name != nullptr ? name : "");
      }
      dlclose(p.lib);
      p.lib = nullptr;
    }
  });
  return ThePlugin();
}

bool Loaded() {
  const Plugin& p = ThePlugin();
  return p.v6 != nullptr || p.v5 != nullptr;
}

int Mask() { return __atomic_load_n(&ThePlugin().mask, __ATOMIC_RELAXED); }

void* Start(void* context, abi::DescrV6* d) {
  const Plugin& p = ThePlugin();
  void* handle = nullptr;
  if (p.v6 != nullptr) {
    p.v6->start(context, &handle, d);
  } else if (p.v5 != nullptr) {
    p.v5->start(context, &handle, reinterpret_cast<abi::DescrV5*>(d));
  }
  return handle;
}

void Record(void* handle, int state) {
  const Plugin& p = ThePlugin();
  if (handle == nullptr) return;
  if (p.v6 != nullptr) {
    p.v6->record(handle, state, nullptr);
  } else if (p.v5 != nullptr) {
    p.v5->record(handle, state, nullptr);
  }
}

// NCCL's ncclProfilerApiState, per thread.
struct ApiState {
  void* group = nullptr;  // the GroupApi event of the group being appended to
  int depth = 0;          // NCCL's profilerGroupDepth
  int state = 0;          // 0 reset, 1 started, 2 stopped (ncclProfilerGroupApiStartState*)
  int mask = 0;           // the activation mask when the group started
};
thread_local ApiState t_api;

// The events below a collective's or a send's task event: NCCL starts the task
// event when any of them, or it, is wanted.
constexpr int kTaskChildren = abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;
constexpr int kTaskEvents = abi::kColl | abi::kP2p | kTaskChildren;

// The descriptor of a task event of `type` (kColl or kP2p) of an operation
// called in API event `api`, part of `plan`'s group; null when the plugin
// wants neither it nor its children.
bool WantsTask(int type) { return Loaded() && (t_api.mask & (type | kTaskChildren)) != 0; }
abi::DescrV6 TaskDescr(int type, const ncclComm* comm, void* api) {
  abi::DescrV6 d{};
  d.type = type;
  d.parent = api;
  d.rank = comm->rank;
  return d;
}

}  // namespace

const char* TypeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "ncclInt8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
    default: return "Unknown";
  }
}

void InitComm(ncclComm* comm, uint64_t hash) {
  comm->hash = hash;
  const Plugin& p = Load();
  if (!Loaded()) return;
  int mask = 0;
  const int nodes = 1;
  ncclResult_t r = p.v6 != nullptr
                       ? p.v6->init(&comm->profiler_context, hash, &mask, comm->name.c_str(), nodes, comm->size,
                                    comm->rank, &Debug)
                       : p.v5->init(&comm->profiler_context, hash, &mask, comm->name.c_str(), nodes, comm->size,
                                    comm->rank, &Debug);
  // As NCCL: a failed init leaves the plugin in place; whatever it wrote is the mask.
  (void)r;
  __atomic_store_n(&ThePlugin().mask, mask, __ATOMIC_RELAXED);
}

void FinalizeComm(ncclComm* comm) {
  const Plugin& p = ThePlugin();
  if (!Loaded() || comm->profiler_context == nullptr) return;
  if (p.v6 != nullptr) {
    p.v6->finalize(comm->profiler_context);
  } else {
    p.v5->finalize(comm->profiler_context);
  }
  comm->profiler_context = nullptr;
}

void* AppendTask(ncclComm* comm, const char* func, size_t count, ncclDataType_t type, int root, void* stream,
                 bool p2p, int depth) {
  if (!Loaded()) return nullptr;
  // ncclEnqueueCheck: an implicit group inside the application's.
  if (t_api.depth > 0) ++t_api.depth;
  const bool captured = driver::Capturing(stream);
  if (t_api.depth == 0) {
    t_api.mask = Mask();
    constexpr int kGroupApiMask = abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch | abi::kGroup |
                                  kTaskEvents;
    if ((t_api.mask & kGroupApiMask) != 0) {
      abi::DescrV6 d{};
      d.type = abi::kGroupApi;
      d.group_api.graph_captured = captured;
      d.group_api.group_depth = depth;
      t_api.group = Start(comm->profiler_context, &d);
      t_api.depth = depth;
      t_api.state = 1;
    }
  }
  if (t_api.state == 1) {
    Record(t_api.group, abi::kGroupStartApiStop);
    t_api.state = 2;
  }
  abi::DescrV6 d{};
  d.parent = t_api.group;
  void* handle = nullptr;
  if (p2p) {
    d.type = abi::kP2pApi;
    d.p2p_api.func = func;
    d.p2p_api.count = count;
    d.p2p_api.datatype = TypeName(type);
    d.p2p_api.stream = stream;
    d.p2p_api.graph_captured = captured;
    if ((t_api.mask & (abi::kP2pApi | kTaskEvents)) != 0) handle = Start(comm->profiler_context, &d);
  } else {
    d.type = abi::kCollApi;
    d.coll_api.func = func;
    d.coll_api.count = count;
    d.coll_api.datatype = TypeName(type);
    d.coll_api.root = root;
    d.coll_api.stream = stream;
    d.coll_api.graph_captured = captured;
    if ((t_api.mask & (abi::kCollApi | kTaskEvents)) != 0) handle = Start(comm->profiler_context, &d);
  }
  Stop(handle);  // the API event ends with the append; its tasks come at launch
  return handle;
}

void GroupEndStart() {
  if (t_api.depth > 0) --t_api.depth;
  if (t_api.depth == 0 && t_api.state == 2) {
    Record(t_api.group, abi::kGroupEndApiStart);
    t_api.state = 0;
  }
}

void GroupEndStop() {
  if (t_api.group != nullptr && t_api.depth == 0) {
    Stop(t_api.group);
    t_api.group = nullptr;
  }
}

void* KernelLaunchStart(ncclComm* comm, void* api, void* stream) {
  if (!Loaded() || (t_api.mask & abi::kKernelLaunch) == 0) return nullptr;
  abi::DescrV6 d{};
  d.type = abi::kKernelLaunch;
  d.parent = t_api.group;
  d.kernel_launch.stream = stream;
  (void)api;
  return Start(comm->profiler_context, &d);
}

void* PlanStart(ncclComm* comm) {
  if (!Loaded() || (t_api.mask & (abi::kGroup | kTaskEvents)) == 0) return nullptr;
  abi::DescrV6 d{};
  d.type = abi::kGroup;
  return Start(comm->profiler_context, &d);
}

void* CollStart(ncclComm* comm, void* api, void* plan, uint64_t seq, const char* func, const void* send, void* recv,
                size_t count, int root, ncclDataType_t type) {
  if (!WantsTask(abi::kColl)) return nullptr;
  abi::DescrV6 d = TaskDescr(abi::kColl, comm, api);
  d.coll.seq = seq;
  d.coll.func = func;
  d.coll.send = send;
  d.coll.recv = recv;
  d.coll.count = count;
  d.coll.root = root;
  d.coll.datatype = TypeName(type);
  d.coll.channels = 1;
  d.coll.warps = 16;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  d.coll.parent_group = plan;
  return Start(comm->profiler_context, &d);
}

void* P2pStart(ncclComm* comm, void* api, void* plan, const char* func, void* buff, size_t count, ncclDataType_t type,
               int peer) {
  if (!WantsTask(abi::kP2p)) return nullptr;
  abi::DescrV6 d = TaskDescr(abi::kP2p, comm, api);
  d.p2p.func = func;
  d.p2p.buff = buff;
  d.p2p.datatype = TypeName(type);
  d.p2p.count = count;
  d.p2p.peer = peer;
  d.p2p.channels = 1;
  d.p2p.parent_group = plan;
  return Start(comm->profiler_context, &d);
}

void Stop(void* handle) {
  const Plugin& p = ThePlugin();
  if (handle == nullptr) return;
  if (p.v6 != nullptr) {
    p.v6->stop(handle);
  } else if (p.v5 != nullptr) {
    p.v5->stop(handle);
  }
}

}  // namespace nccl_host::profiler
