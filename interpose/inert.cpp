#include "inert.h"

#include <unistd.h>

#include "replay/settings.h"

namespace replay::interpose {
namespace {

// 0 not read yet, 1 inert, 2 not. Constant-initialised.
int g_inert = 0;

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

}  // namespace

__attribute__((no_sanitize("address", "undefined"))) bool Inert() noexcept {
  int v = __atomic_load_n(&g_inert, __ATOMIC_ACQUIRE);
  if (__builtin_expect(v != 0, 1)) return v == 1;
  v = 2;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* value = ValueOf(*e, setting_names::disable);
    if (value != nullptr) {
      v = value[0] == '1' && value[1] == '\0' ? 1 : 2;
      break;
    }
  }
  __atomic_store_n(&g_inert, v, __ATOMIC_RELEASE);
  return v == 1;
}

}  // namespace replay::interpose
