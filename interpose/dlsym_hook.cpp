#include "dlsym_hook.h"

#include <dlfcn.h>

#ifndef REPLAY_HAVE_DLSYM_HOOK

void* replay::interpose::RealDlsym(void* handle, const char* name) { return dlsym(handle, name); }

#else

#include "cuda_hook.h"
#include "cuda_imports.h"
#include "inert.h"

namespace replay::interpose {
namespace {

#if defined(__aarch64__)
constexpr const char* kBaseVersion = "GLIBC_2.17";
#else
constexpr const char* kBaseVersion = "GLIBC_2.2.5";
#endif

cuda::DlsymFn g_real = nullptr;  // accessed with __atomic builtins only

void* NoDlsym(void*, const char*) { return nullptr; }

// Runs before a sanitizer runtime is ready, when that runtime's start-up looks
// its interceptors up: nothing on this path may be instrumented or call what is.
__attribute__((no_sanitize("address", "undefined"))) cuda::DlsymFn RealDlsymFunction() {
  cuda::DlsymFn f = __atomic_load_n(&g_real, __ATOMIC_ACQUIRE);
  if (__builtin_expect(f != nullptr, 1)) return f;
  // dlsym moved into libc, with a new version, in glibc 2.34.
  void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (p == nullptr) p = dlvsym(RTLD_NEXT, "dlsym", kBaseVersion);
  f = p != nullptr ? reinterpret_cast<cuda::DlsymFn>(p) : &NoDlsym;
  __atomic_store_n(&g_real, f, __ATOMIC_RELEASE);
  return f;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) { return RealDlsymFunction()(handle, name); }

}  // namespace replay::interpose

// What dlsym_trampoline.S does with a lookup: returns `replacement` unless it
// is null, else jumps to `real`. Two pointers, returned in two registers.
struct ReplayDlsymHookResult {
  void* replacement;
  void* real;
};

extern "C" __attribute__((visibility("hidden"), no_sanitize("address", "undefined"))) ReplayDlsymHookResult
replay_dlsym_hook(void* handle, const char* name) noexcept {
  using namespace replay::interpose;
  cuda::DlsymFn real = RealDlsymFunction();
  ReplayDlsymHookResult r{nullptr, reinterpret_cast<void*>(real)};
  if (!WrapsDriver()) return r;
  // A module the program opened and now looks into may be linked against
  // libcuda (cuda_imports.h).
  if (handle != RTLD_DEFAULT && handle != RTLD_NEXT) cuda::PatchObjectOf(handle);
  // Every wrapped name starts with "cu"; anything else goes straight through.
  if (name != nullptr && name[0] == 'c' && name[1] == 'u') r.replacement = cuda::WrapperForSymbol(handle, name, real);
  return r;
}

#endif  // REPLAY_HAVE_DLSYM_HOOK
