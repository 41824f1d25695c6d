// mpi_signals: a rank that dies, or is asked to die, in a chosen way after a
// few collectives, with or without a handler of its own.
//
// Usage: mpi_signals MODE   (MODE on rank 0 only; the other ranks wait in a barrier)
//   term-handler   installs a SIGTERM handler (prints, exits 7), then raises SIGTERM
//   term-default   raises SIGTERM with no handler
//   abort          calls abort()
//   segv           writes through a null pointer, with a SIGSEGV handler installed
//                  by signal() that prints and re-raises
//   int-ignored    ignores SIGINT, raises it, carries on and finishes normally
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>

namespace {

void OnTerm(int) {
  const char msg[] = "handler: SIGTERM\n";
  (void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  _exit(7);
}

void OnSegv(int signo) {
  const char msg[] = "handler: SIGSEGV\n";
  (void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  signal(signo, SIG_DFL);
  raise(signo);
}

// A real invalid store, not raise(): the fault comes from the hardware. Kept
// out of UBSan's sight, which would stop the program first.
volatile uintptr_t g_null_address = 0;
__attribute__((noinline, no_sanitize("undefined"))) void StoreToNull() {
  *reinterpret_cast<volatile int*>(g_null_address) = 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "term-default";
  for (int i = 0; i < 3; ++i) {
    long v = i, s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  std::printf("rank %d ready\n", rank);
  std::fflush(stdout);
  if (rank == 0) {
    if (std::strcmp(mode, "term-handler") == 0) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof(sa));
      sa.sa_handler = OnTerm;
      sigaction(SIGTERM, &sa, nullptr);
      raise(SIGTERM);
    } else if (std::strcmp(mode, "term-default") == 0) {
      raise(SIGTERM);
    } else if (std::strcmp(mode, "abort") == 0) {
      abort();
    } else if (std::strcmp(mode, "segv") == 0) {
      signal(SIGSEGV, OnSegv);
      StoreToNull();
    } else if (std::strcmp(mode, "int-ignored") == 0) {
      signal(SIGINT, SIG_IGN);
      raise(SIGINT);
      std::printf("rank 0 survived SIGINT\n");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("rank %d done\n", rank);
  MPI_Finalize();
  return 0;
}
