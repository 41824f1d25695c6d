#include "inert.h"

#include <unistd.h>

#include "replay/settings.h"

namespace replay::interpose {
namespace {

// `entry` is "NAME=VALUE": the value when NAME is `name`, else null. No libc
// call: this runs before a sanitizer runtime has set up its interceptors.
__attribute__((no_sanitize("address", "undefined"))) const char* ValueOf(const char* entry, const char* name) {
  while (*name != '\0') {
    if (*entry != *name) return nullptr;
    ++entry;
    ++name;
  }
  return *entry == '=' ? entry + 1 : nullptr;
}

// Whether the environment sets `name` to `value` exactly: 1 or 0, or -1 while
// the C library has not set `environ` up yet. A sanitizer runtime starts from
// the program's preinit_array, before the C library's own initialisation, and
// looks up the functions it wraps through our dlsym then.
__attribute__((no_sanitize("address", "undefined"))) int Is(const char* name, const char* value) {
  if (environ == nullptr) return -1;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* v = ValueOf(*e, name);
    if (v == nullptr) continue;
    while (*value != '\0' && *v == *value) {
      ++v;
      ++value;
    }
    return *value == '\0' && *v == '\0' ? 1 : 0;
  }
  return 0;
}

// A flag read once the environment can be read: 0 not read yet, 1 true,
// 2 false. Constant-initialised. False, and not kept, before then.
template <typename Read>
__attribute__((no_sanitize("address", "undefined"))) bool Once(int* flag, Read read) {
  int v = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
  if (__builtin_expect(v == 0, 0)) {
    int r = read();
    if (r < 0) return false;
    v = r == 1 ? 1 : 2;
    __atomic_store_n(flag, v, __ATOMIC_RELEASE);
  }
  return v == 1;
}

int g_inert = 0;
int g_driver = 0;

}  // namespace

__attribute__((no_sanitize("address", "undefined"))) bool Inert() noexcept {
  return Once(&g_inert, [] { return Is(setting_names::disable, "1"); });
}

__attribute__((no_sanitize("address", "undefined"))) bool WrapsDriver() noexcept {
  return Once(&g_driver, [] {
    int off = Is(setting_names::cuda_driver, "0");
    if (off < 0) return -1;
    return !Inert() && off == 0 ? 1 : 0;
  });
}

}  // namespace replay::interpose
