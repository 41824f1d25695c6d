// nccl_allreduce_loop: the NCCL workload of bench/mpi_overhead.sh (SUITE=nccl),
// on the host NCCL stand-in (tests/nccl_host): one communicator over all
// ranks, made from a unique id sent over MPI; times ITERATIONS ncclAllReduce
// calls of BYTES bytes (floats, sum, host memory) after a barrier and prints
// rank 0's elapsed seconds, one number, so that a script can compare runs
// with and without the preload side by side.
//
// Usage: nccl_allreduce_loop BYTES ITERATIONS      (under mpirun)
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "nccl_allreduce_loop: %s: %s\n", what, ncclGetErrorString(r));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long bytes = argc > 1 ? std::atol(argv[1]) : 8;
  long iterations = argc > 2 ? std::atol(argv[2]) : 100000;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id;
  if (rank == 0) Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  Nccl(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  size_t count = static_cast<size_t>(std::max<long>(bytes / 4, 1));
  std::vector<float> in(count, 1.0f + static_cast<float>(rank)), out(count);
  for (int i = 0; i < 20; ++i) Nccl(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce");
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long i = 0; i < iterations; ++i) {
    in[0] = static_cast<float>(i);
    Nccl(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, comm, nullptr), "ncclAllReduce");
  }
  double t = MPI_Wtime() - t0;
  if (rank == 0) std::printf("%.6f\n", t);
  ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
