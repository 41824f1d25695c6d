// clock.h: timestamps cheap enough for every intercepted call.
//
// The hot path reads raw ticks (the TSC where it is invariant, otherwise
// CLOCK_MONOTONIC through the vDSO, both without a system call). The writer
// converts ticks to nanoseconds with a calibration it refines as time passes.
// Thread-safe: ReadTicks may be called from any thread and from signal handlers.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define REPLAY_HAVE_TSC 1
#endif

namespace replay {

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A wall-clock time (ns since the epoch) in UTC, by strftime's `format`;
// empty when the time is not known (zero or negative).
std::string FormatUtc(int64_t realtime_ns, const char* format) __attribute__((format(strftime, 2, 0)));

// Whether this CPU has an invariant TSC (constant rate, not stopped in sleep).
bool HaveInvariantTsc();
// Whether the CPU has PREFETCHW (a prefetch to write; CPUID 0x80000001, ECX
// bit 8). False where there is no TSC support compiled in (not x86-64).
bool HavePrefetchWrite();

// Ticks from the chosen source: TSC when `tsc`, else monotonic nanoseconds.
inline uint64_t ReadTicks(bool tsc) {
#ifdef REPLAY_HAVE_TSC
  if (tsc) return __rdtsc();
#endif
  (void)tsc;
  return static_cast<uint64_t>(MonotonicNs());
}

// Maps ticks to monotonic nanoseconds. Copyable; not thread-safe to Refine.
struct TickClock {
  bool tsc = false;
  uint64_t tick_base = 0;    // ticks at the reference instant
  int64_t mono_base_ns = 0;  // CLOCK_MONOTONIC at the same instant
  double ns_per_tick = 1.0;

  // Starts a clock now; with a TSC, a short first calibration.
  static TickClock Start(bool prefer_tsc);
  // Refines ns_per_tick from the time elapsed since the reference instant.
  void Refine();
  int64_t ToMonotonicNs(uint64_t ticks) const {
    int64_t dt = static_cast<int64_t>(ticks - tick_base);
    return mono_base_ns + static_cast<int64_t>(static_cast<double>(dt) * ns_per_tick);
  }
};

}  // namespace replay
