// The CUDA driver wrappers, from cuda_api.def: a few wrapper slots per
// signature, each bound to one real function, and the lookups that hand them
// out.
#include "cuda_hook.h"

#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <string>
#include <string_view>

#include "cuda_events.h"
#include "cuda_record.h"
#include "log.h"

namespace replay::interpose::cuda {
namespace {

constexpr int kSlots = 4;

enum Row : int {
#define REPLAY_CUDA(fn, ...) kRow_##fn,
#define REPLAY_CUDA_RESOLVE(fn, ...) kRow_##fn,
#define REPLAY_CUDA_TEARDOWN(fn, ...) kRow_##fn,
#include "cuda_api.def"
#undef REPLAY_CUDA
#undef REPLAY_CUDA_RESOLVE
#undef REPLAY_CUDA_TEARDOWN
  kRowCount
};

// One real function a wrapper forwards to. Bound once (state 0 free, 1 being
// bound, 2 bound), never unbound: the application keeps the pointer.
struct Slot {
  std::atomic<void*> real{nullptr};
  std::atomic<int> state{0};
  bool per_thread = false;
};
Slot g_slots[kRowCount][kSlots];

#define REPLAY_CUDA(fn, op, typedef_name, procs, names, params, args, roles)                                         \
  using Fn_##fn = CUresult(*) params;                                                                       \
  template <int S>                                                                                          \
  CUresult W_##fn params noexcept {                                                                         \
    const Slot& slot = g_slots[kRow_##fn][S];                                                               \
    Fn_##fn real = reinterpret_cast<Fn_##fn>(slot.real.load(std::memory_order_acquire));                   \
    Call c(CudaOp::k##op, slot.per_thread, reinterpret_cast<uint64_t>(__builtin_return_address(0)));        \
    if (!c.Begin()) return real args;                                                                       \
    roles;                                                                                                  \
    CUresult rc = real args;                                                                                \
    c.Leave(rc);                                                                                            \
    return rc;                                                                                              \
  }                                                                                                         \
  void* Wrapper_##fn(int s) {                                                                               \
    static constexpr Fn_##fn kWrappers[kSlots] = {&W_##fn<0>, &W_##fn<1>, &W_##fn<2>, &W_##fn<3>};        \
    return reinterpret_cast<void*>(kWrappers[s]);                                                           \
  }

#define REPLAY_CUDA_RESOLVE(fn, typedef_name, procs, names, params, args, roles)                                     \
  using Fn_##fn = CUresult(*) params;                                                                       \
  template <int S>                                                                                          \
  CUresult W_##fn params noexcept {                                                                         \
    Fn_##fn real = reinterpret_cast<Fn_##fn>(g_slots[kRow_##fn][S].real.load(std::memory_order_acquire));   \
    Resolution c;                                                                                           \
    roles;                                                                                                  \
    CUresult rc = real args;                                                                                \
    if (rc == kSuccess) WrapResolved(c.symbol, c.pfn, c.version, c.flags);                                  \
    return rc;                                                                                              \
  }                                                                                                         \
  void* Wrapper_##fn(int s) {                                                                               \
    static constexpr Fn_##fn kWrappers[kSlots] = {&W_##fn<0>, &W_##fn<1>, &W_##fn<2>, &W_##fn<3>};        \
    return reinterpret_cast<void*>(kWrappers[s]);                                                           \
  }

#define REPLAY_CUDA_TEARDOWN(fn, typedef_name, procs, names, params, args, what)                                     \
  using Fn_##fn = CUresult(*) params;                                                                       \
  template <int S>                                                                                          \
  CUresult W_##fn params noexcept {                                                                         \
    Fn_##fn real = reinterpret_cast<Fn_##fn>(g_slots[kRow_##fn][S].real.load(std::memory_order_acquire));   \
    Teardown t what;                                                                                        \
    CUresult rc = real args;                                                                                \
    t.Finish(rc);                                                                                           \
    return rc;                                                                                              \
  }                                                                                                         \
  void* Wrapper_##fn(int s) {                                                                               \
    static constexpr Fn_##fn kWrappers[kSlots] = {&W_##fn<0>, &W_##fn<1>, &W_##fn<2>, &W_##fn<3>};        \
    return reinterpret_cast<void*>(kWrappers[s]);                                                           \
  }

#include "cuda_api.def"
#undef REPLAY_CUDA
#undef REPLAY_CUDA_RESOLVE
#undef REPLAY_CUDA_TEARDOWN

struct RowInfo {
  const char* fn;
  const char* procs;  // "name@since[-until] ..."
  const char* names;  // "symbol symbol_ptsz ..."
  void* (*wrapper)(int slot);
};

// Constant-initialised: dlsym may be called before any constructor of ours.
constexpr RowInfo kRows[] = {
#define REPLAY_CUDA(fn, op, typedef_name, procs, names, ...) {#fn, procs, names, &Wrapper_##fn},
#define REPLAY_CUDA_RESOLVE(fn, typedef_name, procs, names, ...) {#fn, procs, names, &Wrapper_##fn},
#define REPLAY_CUDA_TEARDOWN(fn, typedef_name, procs, names, ...) {#fn, procs, names, &Wrapper_##fn},
#include "cuda_api.def"
#undef REPLAY_CUDA
#undef REPLAY_CUDA_RESOLVE
#undef REPLAY_CUDA_TEARDOWN
};
static_assert(sizeof(kRows) / sizeof(kRows[0]) == kRowCount);

// The next space-separated word of `*p`, or false at the end.
bool NextWord(const char** p, std::string_view* word) {
  const char* s = *p;
  while (*s == ' ') ++s;
  if (*s == '\0') return false;
  const char* e = s;
  while (*e != ' ' && *e != '\0') ++e;
  *word = std::string_view(s, static_cast<size_t>(e - s));
  *p = e;
  return true;
}

bool PerThreadName(std::string_view name) { return name.ends_with("_ptsz") || name.ends_with("_ptds"); }

// The row that exports `name`.
int FindName(std::string_view name, bool* per_thread) {
  for (int row = 0; row < kRowCount; ++row) {
    const char* p = kRows[row].names;
    std::string_view word;
    while (NextWord(&p, &word)) {
      if (word == name) {
        *per_thread = PerThreadName(word);
        return row;
      }
    }
  }
  return -1;
}

int ParseVersion(std::string_view s) {
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') break;
    v = v * 10 + (ch - '0');
  }
  return v;
}

// The row cuGetProcAddress(name, version) resolves to.
int FindProc(std::string_view name, int version) {
  for (int row = 0; row < kRowCount; ++row) {
    const char* p = kRows[row].procs;
    std::string_view word;
    while (NextWord(&p, &word)) {
      size_t at = word.find('@');
      if (at == std::string_view::npos || word.substr(0, at) != name) continue;
      std::string_view range = word.substr(at + 1);
      size_t dash = range.find('-');
      int since = ParseVersion(range.substr(0, dash));
      int until = dash == std::string_view::npos ? 0 : ParseVersion(range.substr(dash + 1));
      if (version >= since && (until == 0 || version < until)) return row;
    }
  }
  return -1;
}

// The wrapper bound to `real` in one of the row's slots, binding a free slot
// if none is; null when all are bound to other functions.
void* Bind(int row, void* real, bool per_thread) {
  for (int s = 0; s < kSlots; ++s) {
    Slot& slot = g_slots[row][s];
    int state = slot.state.load(std::memory_order_acquire);
    if (state == 0 && slot.state.compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
      slot.per_thread = per_thread;
      slot.real.store(real, std::memory_order_release);
      slot.state.store(2, std::memory_order_release);
      return kRows[row].wrapper(s);
    }
    while (state == 1) {
      sched_yield();
      state = slot.state.load(std::memory_order_acquire);
    }
    if (slot.real.load(std::memory_order_acquire) == real && slot.per_thread == per_thread) {
      return kRows[row].wrapper(s);
    }
  }
  WarnOnce(kRows[row].fn, std::string(kRows[row].fn) + " resolves to more than " + std::to_string(kSlots) +
                              " different functions in this process; calls through the others are not recorded");
  return nullptr;
}

bool MaybeCuda(const char* name) { return name != nullptr && name[0] == 'c' && name[1] == 'u'; }

// The wrapper for the function exported as `name`, which `real()` finds; null
// when `name` is not wrapped, nothing is found or no slot is free. `real` is
// called only for a wrapped name.
template <typename FindReal>
void* WrapName(const char* name, FindReal real) {
  if (!MaybeCuda(name)) return nullptr;
  try {
    bool per_thread = false;
    int row = FindName(name, &per_thread);
    if (row < 0) return nullptr;
    void* p = real();
    return p != nullptr ? Bind(row, p, per_thread) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void* WrapperForSymbol(void* handle, const char* name, DlsymFn real) {
  // RTLD_NEXT is resolved against the caller, whom only the C library's own
  // dlsym sees.
  if (handle == RTLD_NEXT) return nullptr;
  return WrapName(name, [&] { return real(handle, name); });
}

bool Wraps(const char* name) {
  bool per_thread = false;
  return MaybeCuda(name) && FindName(name, &per_thread) >= 0;
}

void* WrapperForImport(const char* name, void* real) {
  return WrapName(name, [real] { return real; });
}

void WrapResolved(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (!MaybeCuda(symbol) || pfn == nullptr || *pfn == nullptr) return;
  try {
    // A driver older than the version asked for gives its newest variant.
    int driver = DriverVersion();
    if (driver > 0 && version > driver) version = driver;
    bool per_thread = (flags & kProcPerThread) != 0;
    int row = FindProc(symbol, version);
    if (row < 0) row = FindName(symbol, &per_thread);
    if (row < 0) return;
    if (void* w = Bind(row, *pfn, per_thread)) *pfn = w;
  } catch (...) {
  }
}

}  // namespace replay::interpose::cuda
