// mpi_allreduce_loop: the workload of the recorder's overhead benchmark. Times
// ITERATIONS MPI_Allreduce calls of BYTES bytes (floats, sum) after a barrier
// and prints rank 0's elapsed seconds, one number, so that a script can compare
// runs with and without the preload side by side.
//
// With EVICT_KB, each call is preceded by stores to every cache line of a
// buffer that large, as a training step's compute or a network stack's path
// would evict the caches between two calls; the number printed is then the
// time spent inside the calls alone, so that the eviction's own cost (the
// same with and without the preload) is not in it.
//
// Usage: mpi_allreduce_loop BYTES ITERATIONS [EVICT_KB]
#include <mpi.h>

#include <chrono>
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
  long evict_kb = argc > 3 ? std::atol(argv[3]) : 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = 0;
  if (evict_kb <= 0) {
    double t0 = MPI_Wtime();
    for (long i = 0; i < iterations; ++i) {
      in[0] = static_cast<float>(i);
      MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    t = MPI_Wtime() - t0;
  } else {
    std::vector<char> evict(static_cast<size_t>(evict_kb) << 10);
    using Clock = std::chrono::steady_clock;
    Clock::duration inside{};
    for (long i = 0; i < iterations; ++i) {
      for (size_t k = 0; k < evict.size(); k += 64) evict[k] = static_cast<char>(i);
      in[0] = static_cast<float>(i);
      auto t0 = Clock::now();
      MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      inside += Clock::now() - t0;
    }
    t = std::chrono::duration<double>(inside).count();
  }
  if (rank == 0) std::printf("%.6f\n", t);
  MPI_Finalize();
  return 0;
}
