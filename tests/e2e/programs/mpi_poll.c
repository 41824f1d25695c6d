/* A C MPI program that overlaps work with communication the way many do:
 * non-blocking exchanges around a ring, completed by polling MPI_Test and
 * MPI_Testall between slices of work, seeded from the process id so that no
 * two runs agree. How many polls a step takes depends on timing; what it
 * receives, on the other ranks' seeds. Prints, per rank, its result and polls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double Work(double x, int n) {
  for (int i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  srand((unsigned)getpid());
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  long polls = 0;
  double acc = 0, busy = 0;
  for (int step = 0; step < 8; ++step) {
    double out[4], in[4];
    for (int i = 0; i < 4; ++i) out[i] = rand() / (double)RAND_MAX;
    MPI_Request r[2];
    MPI_Irecv(in, 4, MPI_DOUBLE, prev, step, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, 4, MPI_DOUBLE, next, step, MPI_COMM_WORLD, &r[1]);
    int done = 0;
    if (step % 2 == 0) {
      while (!done) {
        MPI_Test(&r[0], &done, MPI_STATUS_IGNORE);
        busy = Work(busy, 200);
        ++polls;
      }
      MPI_Wait(&r[1], MPI_STATUS_IGNORE);
    } else {
      while (!done) {
        MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE);
        busy = Work(busy, 200);
        ++polls;
      }
    }
    for (int i = 0; i < 4; ++i) acc += in[i] * (step + 1);
  }
  double total = 0;
  MPI_Allreduce(&acc, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d of %d: acc %a total %a polls %ld\n", rank, size, acc, total, polls);
  MPI_Finalize();
  return 0;
}
