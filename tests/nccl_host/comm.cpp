// Communicators of the host NCCL stand-in: creation from a unique id, split and
// shrink, teardown, queries, registration, custom operators, errors and versions.
//
// ncclCommInitRank builds its MPI communicator with MPI_Comm_split over
// MPI_COMM_WORLD, coloured by a hash of the unique id. That call is collective over
// the whole world, so EVERY world rank must create EVERY communicator made from a
// unique id, in the same order (a rank outside a communicator still calls
// ncclCommInitRank for it, with its own id: a real NCCL program would not need
// to). Split and shrink only involve the parent's members, as in NCCL.

#include <stdarg.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_host.h"
#include "profiler.h"
#include "reduce.h"

namespace nccl_host {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr int kShrinkTag = 0x5348;  // MPI_Comm_create_group's tag for ncclCommShrink

std::mutex last_error_mutex;
char last_error[1024] = "";

bool DebugWarnings() {
  const char* level = std::getenv("NCCL_DEBUG");
  if (level == nullptr) return false;
  const std::string l = level;
  return l == "WARN" || l == "INFO" || l == "TRACE";
}

uint64_t Fnv1a(const void* data, size_t size, uint64_t hash = 0xcbf29ce484222325ULL) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

uint64_t HostHash() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return Fnv1a(name, std::strlen(name));
}

// The device this process is on. NCCL takes the calling thread's current CUDA
// device; the stand-in, which never calls CUDA, takes NCCL_HOST_DEVICE (the host
// build of a program sets it where it would call cudaSetDevice), else the
// launcher's local rank, else 0.
int CurrentDevice() {
  for (const char* name : {"NCCL_HOST_DEVICE", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long device = std::strtol(value, &end, 10);
    if (*end == '\0' && device >= 0 && device < 1 << 20) return static_cast<int>(device);
  }
  return 0;
}

// Reads a config's blocking flag; `fallback` when there is no config or it leaves
// the flag undefined.
ncclResult_t ParseConfig(const ncclConfig_t* config, bool fallback, bool* blocking, const char* function) {
  *blocking = fallback;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    return Fail(ncclInvalidArgument, "%s: config is not initialised with NCCL_CONFIG_INITIALIZER", function);
  }
  if (config->blocking == NCCL_CONFIG_UNDEF_INT) return ncclSuccess;
  if (config->blocking != 0 && config->blocking != 1) {
    return Fail(ncclInvalidArgument, "%s: config blocking is %d, expected 0 or 1", function, config->blocking);
  }
  *blocking = config->blocking == 1;
  return ncclSuccess;
}

// The name a configuration gives a communicator, or "".
const char* ConfigName(const ncclConfig_t* config) {
  return config != nullptr && config->commName != NCCL_CONFIG_UNDEF_PTR ? config->commName : "";
}

// A child's hash from its parent's, the parent's count of splits so far and
// the colour, as NCCL derives it (the values differ from NCCL's; only their
// equality on every member matters).
uint64_t ChildHash(ncclComm* parent, int color) {
  const uint64_t parts[] = {parent->hash, ++parent->splits, static_cast<uint64_t>(static_cast<int64_t>(color))};
  return Fnv1a(parts, sizeof(parts));
}

// Wraps a new MPI communicator, tells a profiler plugin; returns
// ncclInProgress for a non-blocking one. `hash` is NCCL's commHash for it.
ncclResult_t MakeComm(MPI_Comm mpi, int device, bool blocking, uint64_t hash, const char* name, ncclComm_t* out) {
  auto* comm = new ncclComm;
  comm->mpi = mpi;
  PMPI_Comm_rank(mpi, &comm->rank);
  PMPI_Comm_size(mpi, &comm->size);
  comm->device = device;
  comm->blocking = blocking;
  comm->report_in_progress = !blocking;
  comm->name = name != nullptr ? name : "";
  profiler::InitComm(comm, hash);
  *out = comm;
  return blocking ? ncclSuccess : ncclInProgress;
}

void PrintVersionOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* level = std::getenv("NCCL_DEBUG");
    if (level != nullptr && (std::string(level) == "VERSION" || DebugWarnings())) {
      std::fprintf(stderr, "NCCL version %d.%d.%d+host (replay's test stand-in over MPI, host memory)\n",
                   NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    }
  });
}

struct PeerInfo {
  int rank;
  int nranks;
  int device;
  uint64_t host;
};

// The common part of every creation from unique ids.
ncclResult_t InitFromIds(ncclComm_t* out, int nranks, const ncclUniqueId* ids, int nids, int rank,
                         const ncclConfig_t* config, int device, const char* function) {
  if (out == nullptr) return Fail(ncclInvalidArgument, "%s: comm argument is NULL", function);
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Fail(ncclInvalidArgument, "%s: invalid rank %d, nranks %d", function, rank, nranks);
  }
  bool blocking = true;
  if (ncclResult_t r = ParseConfig(config, true, &blocking, function); r != ncclSuccess) return r;
  if (ncclResult_t r = EnsureMpi(); r != ncclSuccess) return r;
  PrintVersionOnce();

  const uint64_t hash = Fnv1a(ids, sizeof(ncclUniqueId) * static_cast<size_t>(nids));
  MPI_Comm mpi = MPI_COMM_NULL;
  PMPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(hash & 0x7fffffff), rank, &mpi);
  int size = 0;
  PMPI_Comm_size(mpi, &size);

  // Every member checks the same gathered facts, so all reach the same verdict.
  const PeerInfo mine = {rank, nranks, device, HostHash()};
  std::vector<PeerInfo> peers(static_cast<size_t>(size));
  PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, peers.data(), sizeof(mine), MPI_BYTE, mpi);
  ncclResult_t result = ncclSuccess;
  for (int i = 0; i < size && result == ncclSuccess; ++i) {
    const PeerInfo& p = peers[static_cast<size_t>(i)];
    if (size != nranks || p.nranks != nranks || p.rank != i) {
      result = Fail(ncclInvalidUsage,
                    "%s: %d processes share this unique id but were given nranks %d and ranks that are "
                    "not 0..nranks-1 exactly once",
                    function, size, nranks);
    }
  }
  // Two ranks on one device: NCCL refuses them on the ranks involved; here every
  // rank fails, each naming a pair (its own, if it is in one), so none is left
  // waiting on the others.
  for (int pass = 0; pass < 2 && result == ncclSuccess; ++pass) {
    for (int i = 0; i < size && result == ncclSuccess; ++i) {
      const int a = pass == 0 ? rank : i;
      for (int j = 0; j < size && result == ncclSuccess; ++j) {
        const PeerInfo& p = peers[static_cast<size_t>(a)];
        const PeerInfo& q = peers[static_cast<size_t>(j)];
        if (j != a && p.host == q.host && p.device == q.device) {
          result = Fail(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d", a, j,
                        p.device);
        }
      }
    }
  }
  if (result != ncclSuccess) {
    PMPI_Comm_free(&mpi);
    return result;
  }
  return MakeComm(mpi, device, blocking, hash, ConfigName(config), out);
}

}  // namespace

ncclResult_t Fail(ncclResult_t result, const char* format, ...) {
  std::lock_guard<std::mutex> lock(last_error_mutex);
  va_list args;
  va_start(args, format);
  std::vsnprintf(last_error, sizeof(last_error), format, args);
  va_end(args);
  if (DebugWarnings()) std::fprintf(stderr, "NCCL WARN %s\n", last_error);
  return result;
}

ncclResult_t EnsureMpi() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  int initialized = 0;
  int finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (finalized) return Fail(ncclSystemError, "MPI is finalized; the host stand-in cannot communicate");
  if (initialized) return ncclSuccess;
  if (PMPI_Init(nullptr, nullptr) != MPI_SUCCESS) return Fail(ncclSystemError, "MPI_Init failed");
  std::atexit([] {
    int done = 0;
    PMPI_Finalized(&done);
    if (!done) PMPI_Finalize();
  });
  return ncclSuccess;
}

ncclResult_t CheckComm(const ncclComm* comm, const char* function) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, "%s: comm argument is NULL", function);
  if (comm->magic != kCommMagic) return Fail(ncclInvalidArgument, "%s: comm is not a communicator", function);
  return ncclSuccess;
}

size_t TypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

namespace {

void DestroyComm(ncclComm* comm) {
  profiler::FinalizeComm(comm);
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (!finalized && comm->mpi != MPI_COMM_NULL) PMPI_Comm_free(&comm->mpi);
  for (Registration* r : comm->registrations) delete r;
  for (ncclWindow_t w : comm->windows) delete w;
  comm->magic = 0;
  delete comm;
}

}  // namespace
}  // namespace nccl_host

using nccl_host::CheckComm;
using nccl_host::Fail;

// Versions and ids.

NCCL_HOST_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return Fail(ncclInvalidArgument, "ncclGetVersion: version argument is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId argument is NULL");
  size_t filled = 0;
  while (filled < sizeof(uniqueId->internal)) {
    const ssize_t n = getrandom(uniqueId->internal + filled, sizeof(uniqueId->internal) - filled, 0);
    if (n < 0 && errno != EINTR) return Fail(ncclSystemError, "ncclGetUniqueId: getrandom: %s", std::strerror(errno));
    if (n > 0) filled += static_cast<size_t>(n);
  }
  return ncclSuccess;
}

NCCL_HOST_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

NCCL_HOST_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm;  // NCCL keeps one last error per process, too
  return nccl_host::last_error;
}

// Deprecated in nccl.h but still exported by NCCL: the stand-in reads NCCL_DEBUG
// at each use, so there is nothing to reload.
NCCL_HOST_API(void, ncclResetDebugInit, void) {}

// Creation.

NCCL_HOST_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return nccl_host::InitFromIds(comm, nranks, &commId, 1, rank, nullptr, nccl_host::CurrentDevice(),
                                "ncclCommInitRank");
}

NCCL_HOST_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
              ncclConfig_t* config) {
  return nccl_host::InitFromIds(comm, nranks, &commId, 1, rank, config, nccl_host::CurrentDevice(),
                                "ncclCommInitRankConfig");
}

NCCL_HOST_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
              ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommInitRankScalable: needs at least one unique id (nId %d)", nId);
  }
  return nccl_host::InitFromIds(newcomm, nranks, commIds, nId, myrank, config, nccl_host::CurrentDevice(),
                                "ncclCommInitRankScalable");
}

// One process, so one device: a communicator of one rank over MPI_COMM_SELF.
NCCL_HOST_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, "ncclCommInitAll: comm argument is NULL");
  if (ndev < 1) return Fail(ncclInvalidArgument, "ncclCommInitAll: invalid ndev %d", ndev);
  if (ndev > 1) {
    return Fail(ncclInvalidUsage,
                "ncclCommInitAll: the host stand-in runs one rank per process; ndev %d needs %d processes", ndev,
                ndev);
  }
  if (ncclResult_t r = nccl_host::EnsureMpi(); r != ncclSuccess) return r;
  nccl_host::PrintVersionOnce();
  MPI_Comm mpi = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_SELF, &mpi);
  const uint64_t hash = nccl_host::Fnv1a(&mpi, sizeof(mpi), static_cast<uint64_t>(getpid()));
  return nccl_host::MakeComm(mpi, devlist != nullptr ? devlist[0] : 0, true, hash, "", comm);
}

NCCL_HOST_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
              ncclConfig_t* config) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommSplit"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return Fail(ncclInvalidArgument, "ncclCommSplit: newcomm argument is NULL");
  if (color < NCCL_SPLIT_NOCOLOR) {
    return Fail(ncclInvalidArgument, "ncclCommSplit: color %d is neither >= 0 nor NCCL_SPLIT_NOCOLOR", color);
  }
  bool blocking = comm->blocking;  // a split inherits its parent's configuration
  if (ncclResult_t r = nccl_host::ParseConfig(config, comm->blocking, &blocking, "ncclCommSplit"); r != ncclSuccess) {
    return r;
  }
  MPI_Comm mpi = MPI_COMM_NULL;
  PMPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &mpi);
  const uint64_t hash = nccl_host::ChildHash(comm, color);
  if (mpi == MPI_COMM_NULL) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  return nccl_host::MakeComm(mpi, comm->device, blocking, hash, nccl_host::ConfigName(config), newcomm);
}

// Excluded ranks are presumed gone: only the remaining ones take part.
NCCL_HOST_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
              ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommShrink"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return Fail(ncclInvalidArgument, "ncclCommShrink: newcomm argument is NULL");
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return Fail(ncclInvalidArgument, "ncclCommShrink: unknown shrinkFlags %d", shrinkFlags);
  }
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr) ||
      excludeRanksCount >= comm->size) {
    return Fail(ncclInvalidArgument, "ncclCommShrink: cannot exclude %d of %d ranks", excludeRanksCount, comm->size);
  }
  std::vector<bool> excluded(static_cast<size_t>(comm->size), false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int r = excludeRanksList[i];
    if (r < 0 || r >= comm->size || excluded[static_cast<size_t>(r)]) {
      return Fail(ncclInvalidArgument, "ncclCommShrink: exclude list entry %d is out of range or repeated", r);
    }
    excluded[static_cast<size_t>(r)] = true;
  }
  if (excluded[static_cast<size_t>(comm->rank)]) {
    return Fail(ncclInvalidArgument, "ncclCommShrink: rank %d is excluded and must not call ncclCommShrink",
                comm->rank);
  }
  bool blocking = comm->blocking;
  if (ncclResult_t r = nccl_host::ParseConfig(config, comm->blocking, &blocking, "ncclCommShrink"); r != ncclSuccess) {
    return r;
  }
  MPI_Group parent_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  PMPI_Comm_group(comm->mpi, &parent_group);
  PMPI_Group_excl(parent_group, excludeRanksCount, excludeRanksList, &group);
  MPI_Comm mpi = MPI_COMM_NULL;
  PMPI_Comm_create_group(comm->mpi, group, nccl_host::kShrinkTag, &mpi);
  PMPI_Group_free(&group);
  PMPI_Group_free(&parent_group);
  const uint64_t hash = nccl_host::ChildHash(comm, -1);
  return nccl_host::MakeComm(mpi, comm->device, blocking, hash, nccl_host::ConfigName(config), newcomm);
}

// Teardown.

NCCL_HOST_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommFinalize"); r != ncclSuccess) return r;
  if (comm->finalized) return Fail(ncclInvalidUsage, "ncclCommFinalize: communicator is already finalized");
  comm->finalized = true;  // every call already ran to completion
  comm->report_in_progress = !comm->blocking;
  return comm->blocking ? ncclSuccess : ncclInProgress;
}

NCCL_HOST_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (ncclResult_t r = CheckComm(comm, "ncclCommDestroy"); r != ncclSuccess) return r;
  nccl_host::DestroyComm(comm);
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (ncclResult_t r = CheckComm(comm, "ncclCommAbort"); r != ncclSuccess) return r;
  nccl_host::DestroyComm(comm);
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommRevoke"); r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    return Fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT, not %d", revokeFlags);
  }
  comm->revoked = true;
  return ncclSuccess;
}

// Queries.

NCCL_HOST_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommGetAsyncError"); r != ncclSuccess) return r;
  if (asyncError == nullptr) return Fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError argument is NULL");
  *asyncError = comm->report_in_progress ? ncclInProgress : ncclSuccess;
  comm->report_in_progress = false;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommCount"); r != ncclSuccess) return r;
  if (count == nullptr) return Fail(ncclInvalidArgument, "ncclCommCount: count argument is NULL");
  *count = comm->size;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommCuDevice"); r != ncclSuccess) return r;
  if (device == nullptr) return Fail(ncclInvalidArgument, "ncclCommCuDevice: device argument is NULL");
  *device = comm->device;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommUserRank"); r != ncclSuccess) return r;
  if (rank == nullptr) return Fail(ncclInvalidArgument, "ncclCommUserRank: rank argument is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

// Registration: bookkeeping only; host memory needs none.

NCCL_HOST_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommRegister"); r != ncclSuccess) return r;
  if (buff == nullptr || handle == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommRegister: buff and handle must not be NULL");
  }
  auto* registration = new nccl_host::Registration{buff, size};
  comm->registrations.insert(registration);
  *handle = registration;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommDeregister"); r != ncclSuccess) return r;
  auto* registration = static_cast<nccl_host::Registration*>(handle);
  if (comm->registrations.erase(registration) == 0) {
    return Fail(ncclInvalidArgument, "ncclCommDeregister: handle %p is not registered on this communicator", handle);
  }
  delete registration;
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
              int winFlags) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommWindowRegister"); r != ncclSuccess) return r;
  if (buff == nullptr || win == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommWindowRegister: buff and win must not be NULL");
  }
  if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
    return Fail(ncclInvalidArgument, "ncclCommWindowRegister: unknown winFlags %d", winFlags);
  }
  *win = new ncclWindow_vidmem{comm, buff, size, winFlags};
  comm->windows.insert(*win);
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  if (ncclResult_t r = CheckComm(comm, "ncclCommWindowDeregister"); r != ncclSuccess) return r;
  if (comm->windows.erase(win) == 0) {
    return Fail(ncclInvalidArgument, "ncclCommWindowDeregister: window is not registered on this communicator");
  }
  delete win;
  return ncclSuccess;
}

// Memory: "device" memory is host memory, aligned as windows require.

NCCL_HOST_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) return Fail(ncclInvalidArgument, "ncclMemAlloc: ptr argument is NULL");
  if (posix_memalign(ptr, NCCL_WIN_REQUIRED_ALIGNMENT, size == 0 ? 1 : size) != 0) {
    *ptr = nullptr;
    return Fail(ncclSystemError, "ncclMemAlloc: out of host memory for %zu bytes", size);
  }
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclMemFree, void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

// Custom reduction operators.

NCCL_HOST_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
              ncclScalarResidence_t residence, ncclComm_t comm) {
  if (ncclResult_t r = CheckComm(comm, "ncclRedOpCreatePreMulSum"); r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr) {
    return Fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op and scalar must not be NULL");
  }
  const size_t size = nccl_host::TypeSize(datatype);
  if (size == 0) return Fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d", datatype);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    return Fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d", residence);
  }
  nccl_host::PreMulSum pre;
  pre.live = true;
  pre.type = datatype;
  pre.residence = residence;
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(pre.value, scalar, size);
  } else {
    pre.pointer = scalar;
  }
  size_t index = 0;
  while (index < comm->redops.size() && comm->redops[index].live) ++index;
  if (index == comm->redops.size()) comm->redops.emplace_back();
  comm->redops[index] = pre;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(index));
  return ncclSuccess;
}

NCCL_HOST_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  if (ncclResult_t r = CheckComm(comm, "ncclRedOpDestroy"); r != ncclSuccess) return r;
  const int value = static_cast<int>(op);
  const size_t index = static_cast<size_t>(value) - ncclNumOps;
  if (value < ncclNumOps || index >= comm->redops.size() || !comm->redops[index].live) {
    return Fail(ncclInvalidArgument, "ncclRedOpDestroy: %d is not an operator created on this communicator", value);
  }
  comm->redops[index].live = false;
  return ncclSuccess;
}
