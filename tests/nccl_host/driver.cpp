#include "driver.h"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>

namespace nccl_host::driver {
namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr int kRuntimeVersion = 13000;        // the runtime NCCL 2.28.9 is built with
constexpr uint64_t kDefaultStream = 0;        // CU_GET_PROC_ADDRESS_DEFAULT: the legacy default stream
constexpr int kProcFound = 0;                 // CU_GET_PROC_ADDRESS_SUCCESS
constexpr int kPointerMemoryType = 2;         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;     // CU_MEMORYTYPE_DEVICE

using GetProcAddress = CUresult (*)(const char*, void**, int, uint64_t, int*);

// CUlaunchConfig, without attributes.
struct LaunchConfig {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem_bytes;
  void* stream;
  void* attrs;
  unsigned num_attrs;
};

// What NCCL's cudawrap.cc loads, in its order, with the version it asks for;
// `required` ones make its initialisation fail when missing.
struct Symbol {
  const char* name;
  int version;
  bool required;
};
constexpr Symbol kSymbols[] = {
    {"cuGetErrorString", 6000, true},
    {"cuGetErrorName", 6000, true},
    {"cuDeviceGet", 2000, true},
    {"cuDeviceGetAttribute", 2000, true},
    {"cuMemGetAddressRange", 3020, false},
    {"cuCtxCreate", 11040, false},
    {"cuCtxDestroy", 4000, false},
    {"cuCtxGetCurrent", 4000, false},
    {"cuCtxSetCurrent", 4000, false},
    {"cuCtxGetDevice", 2000, false},
    {"cuLaunchKernel", 4000, false},
    {"cuLaunchKernelEx", 11060, false},
    {"cuMemAddressReserve", 10020, false},
    {"cuMemAddressFree", 10020, false},
    {"cuMemCreate", 10020, false},
    {"cuMemGetAllocationGranularity", 10020, false},
    {"cuMemExportToShareableHandle", 10020, false},
    {"cuMemImportFromShareableHandle", 10020, false},
    {"cuMemMap", 10020, false},
    {"cuMemRelease", 10020, false},
    {"cuMemRetainAllocationHandle", 11000, false},
    {"cuMemSetAccess", 10020, false},
    {"cuMemUnmap", 10020, false},
    {"cuMemGetAllocationPropertiesFromHandle", 10020, false},
    {"cuPointerGetAttribute", 4000, false},
    {"cuMemGetHandleForAddressRange", 11070, false},
    {"cuMulticastAddDevice", 12010, false},
    {"cuMulticastBindMem", 12010, false},
    {"cuMulticastBindAddr", 12010, false},
    {"cuMulticastCreate", 12010, false},
    {"cuMulticastGetGranularity", 12010, false},
    {"cuMulticastUnbind", 12010, false},
    {"cuStreamBatchMemOp", 11070, false},
    {"cuStreamWaitValue32", 11070, false},
    {"cuStreamWaitValue64", 11070, false},
    {"cuStreamWriteValue32", 11070, false},
    {"cuStreamWriteValue64", 11070, false},
    // The runtime's own, for cudaStreamGetCaptureInfo.
    {"cuStreamIsCapturing", 10000, false},
};
constexpr size_t kSymbolCount = sizeof(kSymbols) / sizeof(kSymbols[0]);

struct Driver {
  bool ok = false;
  void* fn[kSymbolCount] = {};
};

void* Find(const Driver& d, const char* name) {
  for (size_t i = 0; i < kSymbolCount; ++i) {
    if (__builtin_strcmp(kSymbols[i].name, name) == 0) return d.fn[i];
  }
  return nullptr;
}

Driver Load() {
  Driver d;
  // The runtime opens the driver; the stand-in only uses one already loaded,
  // so that a program without CUDA never gets one.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) {
    dlerror();
    return d;
  }
  auto first = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  void* p = nullptr;
  int status = -1;
  if (first == nullptr || first("cuGetProcAddress", &p, kRuntimeVersion, kDefaultStream, &status) != kSuccess ||
      p == nullptr) {
    return d;
  }
  auto entry_point = reinterpret_cast<GetProcAddress>(p);
  d.ok = true;
  for (size_t i = 0; i < kSymbolCount; ++i) {
    void* f = nullptr;
    status = -1;
    CUresult rc = entry_point(kSymbols[i].name, &f, kSymbols[i].version, kDefaultStream, &status);
    if (rc == kSuccess && status == kProcFound) d.fn[i] = f;
    if (d.fn[i] == nullptr && kSymbols[i].required) d.ok = false;
  }
  return d;
}

const Driver& TheDriver() {
  static const Driver d = Load();
  return d;
}

}  // namespace

bool Loaded() { return TheDriver().ok; }

bool IsDevice(const void* p) {
  const Driver& d = TheDriver();
  auto get = reinterpret_cast<CUresult (*)(void*, int, uint64_t)>(Find(d, "cuPointerGetAttribute"));
  unsigned type = 0;
  return d.ok && get != nullptr && p != nullptr &&
         get(&type, kPointerMemoryType, reinterpret_cast<uint64_t>(p)) == kSuccess && type == kMemoryTypeDevice;
}

bool Capturing(void* stream) {
  const Driver& d = TheDriver();
  auto is = reinterpret_cast<CUresult (*)(void*, int*)>(Find(d, "cuStreamIsCapturing"));
  int status = 0;
  return d.ok && is != nullptr && is(stream, &status) == kSuccess && status != 0;
}

bool LaunchKernel(void* stream) {
  const Driver& d = TheDriver();
  auto launch = reinterpret_cast<CUresult (*)(const LaunchConfig*, void*, void**, void**)>(Find(d, "cuLaunchKernelEx"));
  if (!d.ok || launch == nullptr) return false;
  static char kernel;  // stands for NCCL's CUfunction
  LaunchConfig config{{1, 1, 1}, {64, 1, 1}, 0, stream, nullptr, 0};
  return launch(&config, &kernel, nullptr, nullptr) == kSuccess;
}

}  // namespace nccl_host::driver
