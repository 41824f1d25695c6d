// dlsym_program: ordinary dynamic lookups, for tests/e2e/dlsym_hook_e2e_test.cpp,
// which runs it with and without the preload and expects the same output. It
// uses no CUDA, MPI or NCCL. Linked with libdlsym_first.so and then
// libdlsym_second.so, which both define replay_test_who(); the first calls the
// second's through dlsym(RTLD_NEXT). Prints one line per lookup, with the
// object a symbol was found in rather than its address:
//   who 102                      first's answer over second's (RTLD_NEXT)
//   default replay_test_who libdlsym_first.so same
//   ...
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

extern "C" int replay_test_who();
extern "C" const char* replay_test_next_error();
extern "C" int replay_test_second_id();

namespace {

// The object `p` lies in, by file name without its version: the same library
// may be loaded by different names (a sanitizer runtime preloaded by path).
std::string FileOf(void* p) {
  Dl_info info{};
  if (p == nullptr) return "null";
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  std::string name = slash != nullptr ? slash + 1 : info.dli_fname;
  size_t so = name.find(".so");
  return so != std::string::npos ? name.substr(0, so + 3) : name;
}

// A dlerror() message, with the objects it names by path named by file: the
// build directory is not the point, which object is.
std::string Message(const char* e) {
  if (e == nullptr) return "none";
  std::string s = e;
  size_t slash = s.rfind('/', s.find(':'));
  return slash != std::string::npos ? s.substr(slash + 1) : s;
}

std::string Error() { return Message(dlerror()); }

void Lookup(const char* label, void* handle, const char* name) {
  dlerror();
  void* p = dlsym(handle, name);
  std::string err = Error();
  std::printf("%s %s %s error=%s\n", label, name, FileOf(p).c_str(), err.c_str());
}

}  // namespace

int main() {
  std::printf("who %d\n", replay_test_who());
  std::printf("second %d\n", replay_test_second_id());
  std::printf("next-error %s\n", Message(replay_test_next_error()).c_str());

  Lookup("default", RTLD_DEFAULT, "replay_test_who");
  std::printf("default-is-linked %s\n",
              dlsym(RTLD_DEFAULT, "replay_test_who") == reinterpret_cast<void*>(&replay_test_who) ? "yes" : "no");
  Lookup("next", RTLD_NEXT, "replay_test_who");
  Lookup("next", RTLD_NEXT, "puts");
  Lookup("default", RTLD_DEFAULT, "strlen");
  Lookup("default", RTLD_DEFAULT, "replay_test_nowhere");
  // Names like the CUDA driver's, in a process without it.
  Lookup("default", RTLD_DEFAULT, "cuGetProcAddress_v2");
  Lookup("default", RTLD_DEFAULT, "cuStreamCreate");
  Lookup("next", RTLD_NEXT, "cuLaunchKernel");

  void* second = dlopen("libdlsym_second.so", RTLD_NOW | RTLD_NOLOAD);
  std::printf("second-loaded %s\n", second != nullptr ? "yes" : "no");
  if (second != nullptr) {
    Lookup("handle", second, "replay_test_who");
    Lookup("handle", second, "replay_test_nowhere");
    Lookup("handle", second, "cuEventRecord");
    dlclose(second);
  }
  void* self = dlopen(nullptr, RTLD_NOW);
  Lookup("self", self, "replay_test_who");
  Lookup("self", self, "main");
  return 0;
}
