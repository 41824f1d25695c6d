// nccl_host.h: internals of the host-memory NCCL stand-in (README.md), a TEST
// BACKEND: libnccl.so.2 built from this folder implements the NCCL 2.28 API over
// MPI on host memory, so that NCCL programs run, and replay records them, on
// machines without a GPU. It is never a substitute for NCCL in production.
//
// Model: one MPI process per NCCL rank. A communicator is an MPI communicator;
// "device" buffers are host memory; nothing waits on streams (driver.h). A call executes when it
// is made, or, inside ncclGroupStart/End, at the outermost ncclGroupEnd, where
// every queued call is posted as a non-blocking MPI operation and then all are
// waited for together (so send/recv pairs in one group never deadlock).
//
// Thread-safety: group state is per thread, as in NCCL; the last-error string is
// process-wide. MPI is used at whatever thread level the application initialised
// it with, so concurrent calls from several threads need MPI_THREAD_MULTIPLE.
// All MPI calls go through the PMPI_ entry points, so that an MPI interposer (such
// as replay's preload) never mistakes the stand-in's traffic for the program's.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

// Defines `ret func(args)` with NCCL's exported-symbol shape (NCCL's NCCL_API with
// PROFAPI): `func` is a weak symbol and `p##func` a strong alias of it, so that an
// interposer that defines `func` can still reach the implementation as `p##func`.
// Internal code never calls through either name; it calls the nccl_host:: helpers,
// so that an interposer sees each application call exactly once.
#define NCCL_HOST_API(ret, func, ...)                                              \
  extern "C" __attribute__((visibility("default"), alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"), weak)) ret func(__VA_ARGS__)

namespace nccl_host {

constexpr uint64_t kCommMagic = 0x6e63636c686f7374ULL;  // "ncclhost"

// A reduction operator made by ncclRedOpCreatePreMulSum: sum after multiplying
// each rank's input by a scalar of the operator's datatype.
struct PreMulSum {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char value[8] = {};       // the scalar, for ncclScalarHostImmediate
  const void* pointer = nullptr;     // read at each use, for ncclScalarDevice
};

struct Registration {
  void* buff;
  size_t size;
};

}  // namespace nccl_host

// The object behind ncclComm_t.
struct ncclComm {
  uint64_t magic = nccl_host::kCommMagic;
  MPI_Comm mpi = MPI_COMM_NULL;  // owned; rank and size equal NCCL's
  int rank = 0;
  int size = 1;
  int device = 0;
  bool blocking = true;
  bool finalized = false;
  bool revoked = false;
  // A non-blocking communicator reports ncclInProgress once from
  // ncclCommGetAsyncError after init, split, shrink and finalize, as NCCL does
  // while its background work runs; then ncclSuccess.
  bool report_in_progress = false;
  std::vector<nccl_host::PreMulSum> redops;  // op value ncclNumOps + index
  // What NCCL's profiler plugin interface sees of it (profiler.h).
  std::string name;                  // the configuration's commName
  uint64_t hash = 0;                 // NCCL's commHash
  uint64_t splits = 0;               // children made by ncclCommSplit or ncclCommShrink
  uint64_t seq[16] = {};             // collective sequence numbers, per NCCL collective function
  void* profiler_context = nullptr;  // what the plugin's init returned
  std::set<nccl_host::Registration*> registrations;
  std::set<ncclWindow_t> windows;
};

// The object behind ncclWindow_t: bookkeeping only.
struct ncclWindow_vidmem {
  ncclComm* comm;
  void* buff;
  size_t size;
  int flags;
};

namespace nccl_host {

// Records `message` (printf-style) as the text ncclGetLastError returns, prints it
// when NCCL_DEBUG asks for warnings, and returns `result`.
ncclResult_t Fail(ncclResult_t result, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Initialises MPI if the program has not (a single-process NCCL program), and
// finalises it at exit in that case.
ncclResult_t EnsureMpi();

// Checks that `comm` is a live communicator of this stand-in.
ncclResult_t CheckComm(const ncclComm* comm, const char* function);

// Bytes per element, or 0 for an invalid type.
size_t TypeSize(ncclDataType_t type);

// ncclGroupStart / ncclGroupEnd on the calling thread. `simulate` discards the
// queued calls instead of running them and fills `sim_info`.
ncclResult_t GroupStart();
ncclResult_t GroupEnd(ncclSimInfo_t* sim_info, bool simulate);

}  // namespace nccl_host
