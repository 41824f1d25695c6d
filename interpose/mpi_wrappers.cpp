// The MPI wrappers, one per row of mpi_api.def. Each forwards to the real
// function and returns its result unchanged; recording happens around the
// call and can never throw into the application.
#include "mpi_record.h"

#define REPLAY_EXPORT __attribute__((visibility("default")))

#define REPLAY_MPI(name, shape, kind, params, args, roles)                                   \
  extern "C" REPLAY_EXPORT int name params {                                                 \
    using Fn = int(*) params;                                                                \
    Fn real = reinterpret_cast<Fn>(::replay::interpose::RealMpi(::replay::interpose::kApi_##name)); \
    if (real == nullptr) return MPI_ERR_INTERN;                                              \
    ::replay::interpose::mpi::Call c(::replay::interpose::kApi_##name, ::replay::OpKind::k##kind, \
                                     ::replay::interpose::mpi::Shape::k##shape,             \
                                     reinterpret_cast<uint64_t>(__builtin_return_address(0))); \
    switch (c.Begin()) {                                                                     \
      case ::replay::interpose::mpi::Mode::kPass:                                            \
        return real args;                                                                    \
      case ::replay::interpose::mpi::Mode::kRerun: {                                         \
        roles;                                                                               \
        return c.Serve();                                                                    \
      }                                                                                      \
      case ::replay::interpose::mpi::Mode::kForce: {                                         \
        roles;                                                                               \
        if (c.Forced()) return c.ForcedResult();                                             \
        c.Enter();                                                                           \
        int rc = real args;                                                                  \
        c.Leave(rc);                                                                         \
        return rc;                                                                           \
      }                                                                                      \
      case ::replay::interpose::mpi::Mode::kRecord:                                          \
        break;                                                                               \
    }                                                                                        \
    roles;                                                                                   \
    c.Enter();                                                                               \
    int rc = real args;                                                                      \
    c.Leave(rc);                                                                             \
    return rc;                                                                               \
  }

#include "mpi_api.def"
#undef REPLAY_MPI
