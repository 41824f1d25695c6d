// REPLAY_CHECK: invariants that stay checked in release builds.
//
// A failed check is a bug in replay, not bad input: it prints the condition, the
// source location and the values named after it, then aborts. Expected failures
// (I/O, corrupt traces) are Statuses instead. Never use in the interposer's
// wrappers, where nothing may abort the application.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace replay::internal {

template <typename... Args>
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const char* names,
                              const Args&... values) {
  std::ostringstream os;
  os << "replay: internal check failed at " << file << ":" << line << ": " << cond;
  if constexpr (sizeof...(values) > 0) {
    os << "; " << names << " =";
    ((os << " " << values), ...);
  }
  os << "\n";
  std::string s = os.str();
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::abort();
}

}  // namespace replay::internal

#define REPLAY_CHECK(cond, ...)                                                          \
  do {                                                                                   \
    if (__builtin_expect(!(cond), 0))                                                    \
      ::replay::internal::CheckFailed(__FILE__, __LINE__, #cond, #__VA_ARGS__            \
                                      __VA_OPT__(, ) __VA_ARGS__);                       \
  } while (0)
