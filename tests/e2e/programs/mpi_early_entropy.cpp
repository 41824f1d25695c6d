// An MPI program whose results depend on entropy a library drew while it was
// loaded (early_entropy.cpp), on entropy it draws itself after MPI_Init and on
// the clocks (a seed taken from the time, a timing reduced across ranks, CPU
// time reduced as benchmarks report it).
// Prints, per rank, what it drew and read, and the sum every rank agreed on.
#include <mpi.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/times.h>
#include <time.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>

extern "C" uint64_t early_entropy_bytes;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  uint64_t late = 0;
  if (getrandom(&late, sizeof(late), 0) != static_cast<ssize_t>(sizeof(late))) late = 0;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  timeval tv{};
  gettimeofday(&tv, nullptr);
  const double t0 = MPI_Wtime();
  const uint64_t clocks = static_cast<uint64_t>(ts.tv_nsec) ^ static_cast<uint64_t>(tv.tv_usec) ^
                          static_cast<uint64_t>(time(nullptr)) ^ static_cast<uint64_t>(t0 * 1e9);
  uint64_t mine = early_entropy_bytes ^ late ^ clocks, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  double elapsed = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  tms ticks{};
  const clock_t since_boot = times(&ticks);
  const uint64_t cpu = (static_cast<uint64_t>(usage.ru_utime.tv_usec) ^ static_cast<uint64_t>(usage.ru_stime.tv_usec) ^
                        static_cast<uint64_t>(usage.ru_maxrss) ^ static_cast<uint64_t>(since_boot) ^
                        static_cast<uint64_t>(ticks.tms_utime) ^ static_cast<uint64_t>(clock()));
  uint64_t cpu_sum = 0;
  MPI_Allreduce(&cpu, &cpu_sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d: early %016" PRIx64 " late %016" PRIx64 " clocks %016" PRIx64 " sum %016" PRIx64
              " slowest %a cpu %016" PRIx64 " cpu sum %016" PRIx64 "\n",
              rank, size, early_entropy_bytes, late, clocks, sum, slowest, cpu, cpu_sum);
  MPI_Finalize();
  return 0;
}
