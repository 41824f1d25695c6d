// mpi_allreduce_loop: the workload of the recorder's overhead benchmark. Times
// ITERATIONS MPI_Allreduce calls of BYTES bytes (floats, sum) after a barrier
// and prints rank 0's elapsed seconds, one number, so that a script can compare
// runs with and without the preload side by side.
//
// Usage: mpi_allreduce_loop BYTES ITERATIONS
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long bytes = argc > 1 ? std::atol(argv[1]) : 8;
  long iterations = argc > 2 ? std::atol(argv[2]) : 100000;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int count = static_cast<int>(std::max<long>(bytes / 4, 1));
  std::vector<float> in(static_cast<size_t>(count), 1.0f + static_cast<float>(rank)), out(in.size());
  // Warm up the transport, then measure.
  for (int i = 0; i < 100; ++i) MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long i = 0; i < iterations; ++i) {
    in[0] = static_cast<float>(i);
    MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  double t = MPI_Wtime() - t0;
  if (rank == 0) std::printf("%.6f\n", t);
  MPI_Finalize();
  return 0;
}
