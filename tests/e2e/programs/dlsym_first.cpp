// libdlsym_first.so: defines replay_test_who() over the next definition of the
// same function, found with dlsym(RTLD_NEXT), as interposers do. RTLD_NEXT is
// resolved against the object that called dlsym: this library, so the next
// definition is libdlsym_second.so's. A dlsym that resolved it against itself
// would find this one again; the depth guard turns that into a wrong answer
// rather than endless recursion.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"))) int replay_test_who() {
  static thread_local int depth = 0;
  if (depth > 0) return -1000;
  ++depth;
  using Fn = int (*)();
  auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "replay_test_who"));
  int who = 100 + (next != nullptr ? next() : -1);
  --depth;
  return who;
}

// What dlsym(RTLD_NEXT) answers this library for a name nothing defines.
extern "C" __attribute__((visibility("default"))) const char* replay_test_next_error() {
  if (dlsym(RTLD_NEXT, "replay_test_nowhere") != nullptr) return "found";
  const char* e = dlerror();
  return e != nullptr ? e : "no error";
}
