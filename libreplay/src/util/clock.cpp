#include "util/clock.h"

#ifdef REPLAY_HAVE_TSC
#include <cpuid.h>
#endif

namespace replay {

std::string FormatUtc(int64_t realtime_ns, const char* format) {
  if (realtime_ns <= 0) return "";
  const time_t secs = static_cast<time_t>(realtime_ns / 1'000'000'000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[64];
  // The callers' formats are checked where they are written (the declaration
  // carries strftime's format attribute).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const size_t n = std::strftime(buf, sizeof(buf), format, &tm);
#pragma GCC diagnostic pop
  return std::string(buf, n);
}

namespace {

// Bit `bit` of register ECX (`edx` false) or EDX of extended CPUID leaf `leaf`;
// false when the CPU has no such leaf.
bool ExtendedCpuidBit(unsigned leaf, bool edx_register, unsigned bit) {
#ifdef REPLAY_HAVE_TSC
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < leaf) return false;
  __get_cpuid(leaf, &eax, &ebx, &ecx, &edx);
  return ((edx_register ? edx : ecx) & (1u << bit)) != 0;
#else
  (void)leaf;
  (void)edx_register;
  (void)bit;
  return false;
#endif
}

}  // namespace

bool HaveInvariantTsc() { return ExtendedCpuidBit(0x80000007, /*edx_register=*/true, 8); }

bool HavePrefetchWrite() { return ExtendedCpuidBit(0x80000001, /*edx_register=*/false, 8); }

namespace {

// One (ticks, ns) pair read as close together as possible.
void ReadPair(bool tsc, uint64_t* ticks, int64_t* ns) {
  uint64_t best_gap = ~0ull;
  for (int i = 0; i < 5; ++i) {
    uint64_t t0 = ReadTicks(tsc);
    int64_t n = MonotonicNs();
    uint64_t t1 = ReadTicks(tsc);
    if (t1 - t0 < best_gap) {
      best_gap = t1 - t0;
      *ticks = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

}  // namespace

TickClock TickClock::Start(bool prefer_tsc) {
  TickClock c;
  c.tsc = prefer_tsc && HaveInvariantTsc();
  if (!c.tsc) {
    c.mono_base_ns = MonotonicNs();
    c.tick_base = static_cast<uint64_t>(c.mono_base_ns);
    c.ns_per_tick = 1.0;
    return c;
  }
  ReadPair(true, &c.tick_base, &c.mono_base_ns);
  // A first estimate over ~1 ms; Refine() improves it as the run goes on.
  uint64_t t;
  int64_t n;
  do {
    ReadPair(true, &t, &n);
  } while (n - c.mono_base_ns < 1000000);
  c.ns_per_tick = static_cast<double>(n - c.mono_base_ns) / static_cast<double>(t - c.tick_base);
  return c;
}

void TickClock::Refine() {
  if (!tsc) return;
  uint64_t t;
  int64_t n;
  ReadPair(true, &t, &n);
  if (n - mono_base_ns < 100000000 || t <= tick_base) return;  // wait for 100 ms of history
  ns_per_tick = static_cast<double>(n - mono_base_ns) / static_cast<double>(t - tick_base);
}

}  // namespace replay
