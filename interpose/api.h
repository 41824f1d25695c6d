// api.h: the ids and names of every intercepted function.
//
// Expanded from the family tables (mpi_api.def, nccl_api.def, rng_api.def); an id is the
// index of the function's name in the rank header's apiNames. Ids may change
// between versions of replay: traces carry their own name table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace replay::interpose {

enum ApiId : uint16_t {
#define REPLAY_MPI(name, ...) kApi_##name,
#include "mpi_api.def"
#undef REPLAY_MPI
#ifdef REPLAY_HAVE_NCCL
#define REPLAY_NCCL(name, ...) kApi_##name,
#include "nccl_api.def"
#undef REPLAY_NCCL
#endif
#define REPLAY_RNG(name, ...) kApi_##name,
#define REPLAY_RNG_OPEN(name, ...) kApi_##name,
#include "rng_api.def"
#undef REPLAY_RNG
#undef REPLAY_RNG_OPEN
  kApi_replay_mark,
#ifdef REPLAY_HAVE_NCCL
  // Not functions: a communicator seen and freed by NCCL's profiler plugin
  // interface (nccl_profiler.h), whose creating call is not known.
  kApi_ncclProfilerInit,
  kApi_ncclProfilerFinalize,
#endif
  kApiCount
};

const char* ApiName(ApiId id);
std::vector<std::string> AllApiNames();

}  // namespace replay::interpose
