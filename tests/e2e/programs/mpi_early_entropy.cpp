// An MPI program whose results depend on entropy a library drew while it was
// loaded (early_entropy.cpp) and on entropy it draws itself after MPI_Init.
// Prints, per rank, the entropy and the sum every rank agreed on.
#include <mpi.h>
#include <sys/random.h>

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
  uint64_t mine = early_entropy_bytes ^ late, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d: early %016" PRIx64 " late %016" PRIx64 " sum %016" PRIx64 "\n", rank, size,
              early_entropy_bytes, late, sum);
  MPI_Finalize();
  return 0;
}
