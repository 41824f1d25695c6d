// mpi_fork: a rank that forks a helper process (as data loaders do), which
// draws entropy and exits, while the rank goes on communicating.
#include <mpi.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int round = 0; round < 3; ++round) {
    pid_t child = fork();
    if (child == 0) {
      unsigned char bytes[16];
      (void)!getrandom(bytes, sizeof(bytes), 0);
      srand(bytes[0]);
      _exit(rand() % 2 == 0 ? 0 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    long mine = rank + round, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    std::printf("rank %d round %d sum %ld child %d\n", rank, round, sum, WEXITSTATUS(status));
  }
  MPI_Finalize();
  return 0;
}
