// The NCCL wrappers, one per row of nccl_api.def. Each forwards to NCCL's own
// profiling alias (pncclX) when the library has it, else to the next ncclX,
// and returns its result unchanged. The function is looked up once
// (nccl::NcclFunction) and kept.
#include <atomic>

#include "nccl_record.h"

#define REPLAY_EXPORT __attribute__((visibility("default")))

namespace {

template <typename Fn>
Fn NextNccl(std::atomic<void*>& slot, const char* name) {
  void* p = slot.load(std::memory_order_acquire);
  if (__builtin_expect(p == nullptr, 0)) {
    p = ::replay::interpose::nccl::NcclFunction(name);
    slot.store(p, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace

#define REPLAY_NCCL(name, shape, kind, params, args, roles)                                     \
  extern "C" REPLAY_EXPORT ncclResult_t name params {                                           \
    static std::atomic<void*> real_##name{nullptr};                                            \
    using Fn = ncclResult_t(*) params;                                                          \
    ::replay::interpose::nccl::Call c(::replay::interpose::kApi_##name, ::replay::OpKind::k##kind, \
                                      ::replay::interpose::nccl::Shape::k##shape,              \
                                      reinterpret_cast<uint64_t>(__builtin_return_address(0))); \
    Fn real = NextNccl<Fn>(real_##name, #name);                                                 \
    switch (c.Begin()) {                                                                        \
      case ::replay::interpose::nccl::Mode::kRerun: {                                           \
        roles;                                                                                  \
        return c.Serve();                                                                       \
      }                                                                                         \
      case ::replay::interpose::nccl::Mode::kPass:                                              \
        return real != nullptr ? real args : ncclSystemError;                                   \
      case ::replay::interpose::nccl::Mode::kRecord:                                            \
        break;                                                                                  \
    }                                                                                           \
    if (real == nullptr) return ncclSystemError;                                                \
    roles;                                                                                      \
    c.Enter();                                                                                  \
    ncclResult_t rc = real args;                                                                \
    c.Leave(rc);                                                                                \
    return rc;                                                                                  \
  }

#include "nccl_api.def"
#undef REPLAY_NCCL
