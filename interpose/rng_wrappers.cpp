// The randomness and file wrappers, one per row of rng_api.def.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/types.h>

#include <atomic>

#include "inert.h"
#include "rng_record.h"

#define REPLAY_EXPORT __attribute__((visibility("default")))
#define REPLAY_UNPAREN(...) __VA_ARGS__
// The arguments after the real function's: none for a function of none.
#define REPLAY_MORE_ARGS(...) __VA_OPT__(, ) __VA_ARGS__

namespace {

// The next definition of `name` after ours; resolved once, then cached.
template <typename Fn>
Fn Next(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_acquire);
  if (__builtin_expect(p == nullptr, 0)) {
    p = dlsym(RTLD_NEXT, name);
    slot.store(p, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace

#define REPLAY_RNG(name, ret, params, args)                                                   \
  extern "C" REPLAY_EXPORT ret name params noexcept {                                         \
    static std::atomic<void*> real_##name{nullptr};                                          \
    using Fn = ret(*) params;                                                                 \
    Fn real = Next<Fn>(real_##name, #name);                                                   \
    if (real != nullptr && ::replay::interpose::Inert()) return real args;                    \
    return ::replay::interpose::rng::On_##name(                                               \
        real REPLAY_MORE_ARGS args, reinterpret_cast<uint64_t>(__builtin_return_address(0)));  \
  }

#define REPLAY_RNG_OPEN(name, params, args)                                                   \
  extern "C" REPLAY_EXPORT int name(REPLAY_UNPAREN params, ...) noexcept {                    \
    static std::atomic<void*> real_##name{nullptr};                                          \
    using Fn = int (*)(REPLAY_UNPAREN params, ...);                                           \
    mode_t mode = 0;                                                                          \
    if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {                         \
      va_list ap;                                                                             \
      va_start(ap, flags);                                                                    \
      mode = static_cast<mode_t>(va_arg(ap, int));                                            \
      va_end(ap);                                                                             \
    }                                                                                         \
    Fn real = Next<Fn>(real_##name, #name);                                                   \
    if (real == nullptr) return -1;                                                           \
    if (::replay::interpose::Inert()) return real(REPLAY_UNPAREN args, mode);                 \
    return ::replay::interpose::rng::Opened(real(REPLAY_UNPAREN args, mode), path);           \
  }

#include "rng_api.def"
#undef REPLAY_RNG
#undef REPLAY_RNG_OPEN
