/* A C MPI program whose last rank lingers before a stage, so that the others
 * wait inside MPI_Init or MPI_Finalize for it (Open MPI synchronises all ranks
 * in both) or keep exchanging messages: a place for tests to kill a rank.
 *
 *   mpi_stages init|run|finalize SECONDS
 *
 * init: the last rank sleeps before MPI_Init; run: every rank exchanges
 * messages around a ring for SECONDS; finalize: the last rank sleeps before
 * MPI_Finalize. Prints "stage STAGE" on rank 0 as it enters each stage. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void Linger(double seconds) { usleep((useconds_t)(seconds * 1e6)); }

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mpi_stages init|run|finalize SECONDS\n");
    return 2;
  }
  const char* stage = argv[1];
  double seconds = atof(argv[2]);
  const char* env_rank = getenv("OMPI_COMM_WORLD_RANK");
  const char* env_size = getenv("OMPI_COMM_WORLD_SIZE");
  int last = env_rank != NULL && env_size != NULL && atoi(env_rank) == atoi(env_size) - 1;
  if (strcmp(stage, "init") == 0 && last) Linger(seconds);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) printf("stage run\n");
  fflush(stdout);
  double until = MPI_Wtime() + (strcmp(stage, "run") == 0 ? seconds : 0.1);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  long rounds = 0;
  do {
    int out = rank, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, next, 0, &in, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int go = MPI_Wtime() < until, all = 0;
    MPI_Allreduce(&go, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    ++rounds;
    if (!all) break;
    Linger(0.001);
  } while (1);
  if (rank == 0) printf("stage finalize after %ld rounds\n", rounds);
  fflush(stdout);
  if (strcmp(stage, "finalize") == 0 && rank == size - 1) Linger(seconds);
  MPI_Finalize();
  return 0;
}
