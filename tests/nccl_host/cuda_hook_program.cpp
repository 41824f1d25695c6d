// cuda_hook_program: CUDA driver calls made the way nvcc-built programs make
// them, for tests/e2e/cuda_hook_e2e_test.cpp, on the host driver stand-in
// (cuda_host.cpp). Like the CUDA runtime it links no libcuda: it opens
// libcuda.so.1 and finds the driver's functions at run time, one of three ways
// (the argument):
//   proc     dlsym(handle, "cuGetProcAddress_v2"), which then resolves
//            cuGetProcAddress and through it everything else, by base name
//            and CUDA version, as the static CUDA runtime does
//   dlsym    dlsym(handle, exported name) for each function
//   default  dlsym(RTLD_DEFAULT, exported name), libcuda opened RTLD_GLOBAL
//   linked MODULE
//            dlopen(MODULE), a cuda_linked_module linked against libcuda,
//            then dlsym of replay_test_linked_api on its handle, as Python
//            imports an extension module (MODULE may also be an object that
//            loads the module as a dependency): the functions are those the
//            module links to
//   startup  the same from the cuda_linked_module this program was linked
//            with (cuda_linked_program only)
// It then makes one fixed sequence of calls (the test lists the trace they
// must leave) and prints what the test needs to check it:
//   handles ctx=<p> s1=<p> s2=<p> event=<p> graph=<p> exec=<p>
//   where <function> <file the pointer it got lies in>
// `slots DIR N` instead opens DIR/libcuda-1.so ... DIR/libcuda-N.so, copies of
// the driver, finds cuStreamQuery in each (N functions behind one name) and
// calls each once on the legacy default stream, printing
//   where cuStreamQuery#<i> <file>
// Exits 1 with a message at the first call that fails.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_hook_api.h"

namespace {

using cuda_test::Api;
using cuda_test::CUresult;
using cuda_test::Handle;
using cuda_test::LaunchConfig;
constexpr CUresult kNotReady = 600;
constexpr int kCudaVersion = 12080;        // the runtime this program "was built with"
constexpr uint64_t kPerThread = 1 << 1;    // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDisableTiming = 2;
constexpr int kCaptureRelaxed = 2;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_hook_program: %s\n", what.c_str());
  std::exit(1);
}

void Check(CUresult rc, const char* what) {
  if (rc != 0) Fail(std::string(what) + " returned " + std::to_string(rc));
}

std::string FileOf(void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash != nullptr ? slash + 1 : info.dli_fname;
}

using GetProcAddress = CUresult (*)(const char*, void**, int, uint64_t, int*);

// Fills `api` by one of the three ways; prints where a few of them lie.
void Resolve(const std::string& how, Api* api) {
  int mode = RTLD_NOW | (how == "default" ? RTLD_GLOBAL : RTLD_LOCAL);
  void* lib = dlopen("libcuda.so.1", mode);
  if (lib == nullptr) Fail(std::string("dlopen libcuda.so.1: ") + dlerror());
  std::vector<std::pair<std::string, void*>> where;
  if (how.starts_with("linked ")) {
    std::string path = how.substr(7);
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (module == nullptr) Fail("dlopen " + path + ": " + dlerror());
    auto fill = reinterpret_cast<void (*)(Api*)>(dlsym(module, "replay_test_linked_api"));
    if (fill == nullptr) Fail("no replay_test_linked_api in " + path);
    fill(api);
  } else if (how == "startup") {
#ifdef REPLAY_TEST_LINKED_AT_START
    replay_test_linked_api(api);
#else
    Fail("startup: this program was not linked with cuda_linked_module");
#endif
  } else if (how == "proc") {
    auto first = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
    if (first == nullptr) Fail("no cuGetProcAddress_v2");
    where.emplace_back("cuGetProcAddress_v2", reinterpret_cast<void*>(first));
    // The runtime goes on with the cuGetProcAddress the driver itself gives.
    void* p = nullptr;
    int status = -1;
    Check(first("cuGetProcAddress", &p, kCudaVersion, 0, &status), "cuGetProcAddress(cuGetProcAddress)");
    auto gpa = reinterpret_cast<GetProcAddress>(p);
    auto get = [&](const char* name, int version, uint64_t flags) {
      void* f = nullptr;
      int st = -1;
      Check(gpa(name, &f, version, flags, &st), name);
      if (f == nullptr || st != 0) Fail(std::string("cuGetProcAddress found no ") + name);
      return f;
    };
#define RESOLVE(field, name, version, flags) api->field = reinterpret_cast<decltype(api->field)>(get(name, version, flags))
    RESOLVE(init, "cuInit", kCudaVersion, 0);
    RESOLVE(ctx_get_current, "cuCtxGetCurrent", kCudaVersion, 0);
    RESOLVE(ctx_set_current, "cuCtxSetCurrent", kCudaVersion, 0);
    RESOLVE(ctx_synchronize, "cuCtxSynchronize", kCudaVersion, 0);
    RESOLVE(ctx_synchronize_v2, "cuCtxSynchronize", 13000, 0);  // the CUDA 13 signature
    RESOLVE(mem_alloc, "cuMemAlloc", kCudaVersion, 0);
    RESOLVE(mem_free, "cuMemFree", kCudaVersion, 0);
    RESOLVE(stream_create, "cuStreamCreate", kCudaVersion, 0);
    RESOLVE(stream_create_with_priority, "cuStreamCreateWithPriority", kCudaVersion, 0);
    RESOLVE(stream_destroy, "cuStreamDestroy", kCudaVersion, 0);
    RESOLVE(stream_synchronize, "cuStreamSynchronize", kCudaVersion, 0);
    RESOLVE(stream_synchronize_per_thread, "cuStreamSynchronize", kCudaVersion, kPerThread);
    RESOLVE(stream_query, "cuStreamQuery", kCudaVersion, 0);
    RESOLVE(stream_wait_event, "cuStreamWaitEvent", kCudaVersion, 0);
    RESOLVE(event_create, "cuEventCreate", kCudaVersion, 0);
    RESOLVE(event_destroy, "cuEventDestroy", kCudaVersion, 0);
    RESOLVE(event_record, "cuEventRecord", kCudaVersion, 0);
    RESOLVE(event_synchronize, "cuEventSynchronize", kCudaVersion, 0);
    RESOLVE(event_query, "cuEventQuery", kCudaVersion, 0);
    RESOLVE(begin_capture, "cuStreamBeginCapture", kCudaVersion, 0);
    RESOLVE(end_capture, "cuStreamEndCapture", kCudaVersion, 0);
    RESOLVE(graph_instantiate, "cuGraphInstantiate", kCudaVersion, 0);  // WithFlags since 12.0
    RESOLVE(graph_launch, "cuGraphLaunch", kCudaVersion, 0);
    RESOLVE(memcpy_htod_async, "cuMemcpyHtoDAsync", kCudaVersion, 0);
    RESOLVE(memcpy_dtoh, "cuMemcpyDtoH", kCudaVersion, 0);
    RESOLVE(memset_d32_async, "cuMemsetD32Async", kCudaVersion, 0);
    RESOLVE(launch_kernel, "cuLaunchKernel", kCudaVersion, 0);
    RESOLVE(launch_kernel_ex, "cuLaunchKernelEx", kCudaVersion, 0);
    RESOLVE(launch_cooperative_kernel, "cuLaunchCooperativeKernel", kCudaVersion, 0);
#undef RESOLVE
    where.emplace_back("cuGetProcAddress", p);
  } else {
    void* handle = how == "default" ? RTLD_DEFAULT : lib;
    auto get = [&](const char* name) {
      void* f = dlsym(handle, name);
      if (f == nullptr) Fail(std::string("dlsym found no ") + name);
      return f;
    };
#define RESOLVE(field, symbol, params) api->field = reinterpret_cast<decltype(api->field)>(get(#symbol));
    REPLAY_TEST_DRIVER_API(RESOLVE)
#undef RESOLVE
  }
  where.emplace_back("cuInit", reinterpret_cast<void*>(api->init));
  where.emplace_back("cuMemAlloc", reinterpret_cast<void*>(api->mem_alloc));
  where.emplace_back("cuStreamCreate", reinterpret_cast<void*>(api->stream_create));
  where.emplace_back("cuStreamSynchronize", reinterpret_cast<void*>(api->stream_synchronize));
  where.emplace_back("cuStreamSynchronize/per-thread", reinterpret_cast<void*>(api->stream_synchronize_per_thread));
  where.emplace_back("cuLaunchKernel", reinterpret_cast<void*>(api->launch_kernel));
  for (const auto& [name, p] : where) std::printf("where %s %s\n", name.c_str(), FileOf(p).c_str());
}

// Many drivers in one process, each with its own cuStreamQuery.
int Slots(const std::string& dir, int n) {
  for (int i = 1; i <= n; ++i) {
    std::string path = dir + "/libcuda-" + std::to_string(i) + ".so";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) Fail("dlopen " + path + ": " + dlerror());
    auto query = reinterpret_cast<CUresult (*)(Handle)>(dlsym(lib, "cuStreamQuery"));
    if (query == nullptr) Fail("no cuStreamQuery in " + path);
    std::printf("where cuStreamQuery#%d %s\n", i, FileOf(reinterpret_cast<void*>(query)).c_str());
    Check(query(nullptr), "cuStreamQuery");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string how = argc > 1 ? argv[1] : "proc";
  if (how == "slots" && argc == 4) return Slots(argv[2], std::atoi(argv[3]));
  if (how == "linked" && argc == 3) how += std::string(" ") + argv[2];
  if (how != "proc" && how != "dlsym" && how != "default" && how != "startup" && !how.starts_with("linked ")) {
    Fail("usage: cuda_hook_program proc|dlsym|default|startup, cuda_hook_program linked MODULE, or "
         "cuda_hook_program slots DIR N");
  }
  Api cu{};
  Resolve(how, &cu);

  Check(cu.init(0), "cuInit");
  Handle ctx = nullptr;
  Check(cu.ctx_get_current(&ctx), "cuCtxGetCurrent");
  Check(cu.ctx_set_current(ctx), "cuCtxSetCurrent");
  Check(cu.ctx_set_current(ctx), "cuCtxSetCurrent (again)");
  Handle s1 = nullptr, s2 = nullptr, event = nullptr, graph = nullptr, exec = nullptr;
  Check(cu.stream_create(&s1, kStreamNonBlocking), "cuStreamCreate");
  Check(cu.stream_create_with_priority(&s2, kStreamNonBlocking, -1), "cuStreamCreateWithPriority");
  Check(cu.event_create(&event, kEventDisableTiming), "cuEventCreate");
  // s2 waits for s1.
  Check(cu.event_record(event, s1), "cuEventRecord");
  Check(cu.stream_wait_event(s2, event, 0), "cuStreamWaitEvent");
  constexpr size_t kBytes = 4096;
  std::vector<unsigned char> host(kBytes, 0x5a), back(kBytes, 0);
  uint64_t device = 0;
  Check(cu.mem_alloc(&device, kBytes), "cuMemAlloc");
  Check(cu.memcpy_htod_async(device, host.data(), kBytes, s2), "cuMemcpyHtoDAsync");
  // Three kernels on s1, counted, then an operation that shows them.
  int kernel = 0;  // stands for a CUfunction
  Check(cu.launch_kernel(&kernel, 1, 1, 1, 32, 1, 1, 0, s1, nullptr, nullptr), "cuLaunchKernel");
  LaunchConfig config{{1, 1, 1}, {32, 1, 1}, 0, s1, nullptr, 0};
  Check(cu.launch_kernel_ex(&config, &kernel, nullptr, nullptr), "cuLaunchKernelEx");
  Check(cu.launch_cooperative_kernel(&kernel, 1, 1, 1, 32, 1, 1, 0, s1, nullptr), "cuLaunchCooperativeKernel");
  Check(cu.event_record(event, s1), "cuEventRecord (after the kernels)");
  // A graph captured from s1 and launched twice.
  Check(cu.begin_capture(s1, kCaptureRelaxed), "cuStreamBeginCapture");
  Check(cu.launch_kernel(&kernel, 1, 1, 1, 32, 1, 1, 0, s1, nullptr, nullptr), "cuLaunchKernel (captured)");
  Check(cu.end_capture(s1, &graph), "cuStreamEndCapture");
  Check(cu.graph_instantiate(&exec, graph, 0), "cuGraphInstantiate");
  Check(cu.graph_launch(exec, s1), "cuGraphLaunch");
  Check(cu.graph_launch(exec, s1), "cuGraphLaunch (again)");
  // Polls: the stand-in answers "not ready" twice first.
  CUresult rc;
  while ((rc = cu.event_query(event)) == kNotReady) {
  }
  Check(rc, "cuEventQuery");
  while ((rc = cu.stream_query(s2)) == kNotReady) {
  }
  Check(rc, "cuStreamQuery");
  Check(cu.stream_synchronize(s1), "cuStreamSynchronize");
  // Another thread waits for its own default stream.
  CUresult other = -1;
  std::thread([&] {
    CUresult r = cu.ctx_set_current(ctx);
    other = r != 0 ? r : cu.stream_synchronize_per_thread(nullptr);
  }).join();
  Check(other, "cuStreamSynchronize (per-thread default stream, other thread)");
  Check(cu.event_synchronize(event), "cuEventSynchronize");
  Check(cu.memset_d32_async(device, 7, kBytes / 4, s2), "cuMemsetD32Async");
  Check(cu.memcpy_dtoh(back.data(), device, kBytes), "cuMemcpyDtoH");
  if (back[0] != 7 || back[kBytes - 4] != 7) Fail("the memset did not reach the host");
  Check(cu.ctx_synchronize(), "cuCtxSynchronize");
  Check(cu.ctx_synchronize_v2(ctx), "cuCtxSynchronize_v2");
  Check(cu.event_destroy(event), "cuEventDestroy");
  Check(cu.stream_destroy(s1), "cuStreamDestroy (s1)");
  Check(cu.stream_destroy(s2), "cuStreamDestroy (s2)");
  // Two kernels nothing follows on their stream: counted until the end.
  Check(cu.launch_kernel(&kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel (default stream)");
  Check(cu.launch_kernel(&kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel (default stream)");
  Check(cu.mem_free(device), "cuMemFree");
  std::printf("handles ctx=%p s1=%p s2=%p event=%p graph=%p exec=%p\n", ctx, s1, s2, event, graph, exec);
  return 0;
}
