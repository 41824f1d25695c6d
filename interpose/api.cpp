#include "api.h"

namespace replay::interpose {
namespace {

const char* const kNames[] = {
#define REPLAY_MPI(name, ...) #name,
#include "mpi_api.def"
#undef REPLAY_MPI
#ifdef REPLAY_HAVE_NCCL
#define REPLAY_NCCL(name, ...) #name,
#include "nccl_api.def"
#undef REPLAY_NCCL
#endif
#define REPLAY_RNG(name, ...) #name,
#define REPLAY_RNG_OPEN(name, ...) #name,
#include "rng_api.def"
#undef REPLAY_RNG
#undef REPLAY_RNG_OPEN
    "replay_mark",
#ifdef REPLAY_HAVE_NCCL
    "ncclProfilerInit",
    "ncclProfilerFinalize",
#endif
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kApiCount);

}  // namespace

const char* ApiName(ApiId id) { return id < kApiCount ? kNames[id] : "?"; }

std::vector<std::string> AllApiNames() { return std::vector<std::string>(kNames, kNames + kApiCount); }

}  // namespace replay::interpose
