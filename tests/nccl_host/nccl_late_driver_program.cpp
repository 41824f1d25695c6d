// nccl_late_driver_program: an NCCL program that loads the CUDA driver only
// after its first NCCL call, as programs do whose CUDA runtime loads libcuda on
// first use. First an allreduce on host memory; then libcuda.so.1 (the path
// given, the host driver stand-in) is loaded with dlopen and an allreduce runs
// on device memory from its cuMemAlloc. Prints "device sum S" (element 0 of
// the device result). Run under mpirun.
//
// Usage: nccl_late_driver_program PATH_TO_LIBCUDA
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "nccl_late_driver_program: %s failed\n", what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Check(argc == 2, "usage: nccl_late_driver_program PATH_TO_LIBCUDA;");
  ncclUniqueId id;
  if (rank == 0) Check(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  Check(ncclCommInitRank(&comm, size, id, rank) == ncclSuccess, "ncclCommInitRank");
  const size_t count = 256;
  std::vector<float> host(count, 1.0f + static_cast<float>(rank)), out(count);
  Check(ncclAllReduce(host.data(), out.data(), count, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess,
        "ncclAllReduce on host memory");

  void* cuda = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  Check(cuda != nullptr, "dlopen of the CUDA driver");
  using Alloc = int (*)(uint64_t*, size_t);
  using HtoD = int (*)(uint64_t, const void*, size_t);
  using DtoH = int (*)(void*, uint64_t, size_t);
  auto alloc = reinterpret_cast<Alloc>(dlsym(cuda, "cuMemAlloc_v2"));
  auto htod = reinterpret_cast<HtoD>(dlsym(cuda, "cuMemcpyHtoD_v2"));
  auto dtoh = reinterpret_cast<DtoH>(dlsym(cuda, "cuMemcpyDtoH_v2"));
  Check(alloc != nullptr && htod != nullptr && dtoh != nullptr, "the driver's functions");
  uint64_t d_in = 0, d_out = 0;
  Check(alloc(&d_in, count * sizeof(float)) == 0 && alloc(&d_out, count * sizeof(float)) == 0, "cuMemAlloc");
  Check(htod(d_in, host.data(), count * sizeof(float)) == 0, "cuMemcpyHtoD");
  Check(ncclAllReduce(reinterpret_cast<void*>(d_in), reinterpret_cast<void*>(d_out), count, ncclFloat, ncclSum, comm,
                      nullptr) == ncclSuccess,
        "ncclAllReduce on device memory");
  Check(dtoh(out.data(), d_out, count * sizeof(float)) == 0, "cuMemcpyDtoH");
  std::printf("rank %d device sum %g\n", rank, static_cast<double>(out[0]));
  ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
