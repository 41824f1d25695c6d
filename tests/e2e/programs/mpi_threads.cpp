// mpi_threads: MPI_THREAD_MULTIPLE with several threads communicating at once,
// each on its own duplicate of WORLD. Prints per-rank totals.
//
// Usage: mpi_threads THREADS ITERATIONS
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI_THREAD_MULTIPLE not available\n");
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int iterations = argc > 2 ? std::atoi(argv[2]) : 100;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<MPI_Comm> comms(threads);
  for (auto& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<long> totals(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      int right = (rank + 1) % size, left = (rank - 1 + size) % size;
      for (int i = 0; i < iterations; ++i) {
        long mine = rank * 1000 + t * 10 + i, got = 0, sum = 0;
        MPI_Sendrecv(&mine, 1, MPI_LONG, right, t, &got, 1, MPI_LONG, left, t, comms[t], MPI_STATUS_IGNORE);
        MPI_Allreduce(&got, &sum, 1, MPI_LONG, MPI_SUM, comms[t]);
        totals[t] += sum;
      }
    });
  }
  for (auto& th : pool) th.join();
  long all = 0;
  for (long v : totals) all += v;
  std::printf("rank %d total %ld\n", rank, all);
  for (auto& c : comms) MPI_Comm_free(&c);
  MPI_Finalize();
  return 0;
}
