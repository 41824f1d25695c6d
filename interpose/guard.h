// guard.h: the re-entrancy guard every wrapper takes.
//
// Intercepted functions call each other (MPI_Init reads /dev/urandom, the
// recorder itself calls getrandom and PMPI functions): only the outermost call
// on a thread is recorded; nested ones pass straight through. A signal handler
// that interrupts a wrapper sees depth > 0 and also passes through.
#pragma once

namespace replay::interpose {

extern constinit thread_local int t_depth __attribute__((tls_model("initial-exec")));

// Whether this thread is one of the program's: the process's first thread, or
// one that has made a communication call the recorder sees. Clock reads are
// recorded and served only on these, not on the threads MPI and other
// libraries run for themselves (an event loop reads the clock at every turn).
extern constinit thread_local signed char t_program_thread __attribute__((tls_model("initial-exec")));
bool IsMainThread();
inline bool ProgramThread() {
  if (__builtin_expect(t_program_thread < 0, 0)) t_program_thread = IsMainThread() ? 1 : 0;
  return t_program_thread == 1;
}
inline void NoteProgramThread() { t_program_thread = 1; }

// Set while the calling thread is inside NCCL launching a group's work, as
// NCCL's profiler events say (nccl_profiler.h): the CUDA calls made there are
// NCCL's own, not the application's, and only its kernel launches count.
extern constinit thread_local const void* t_nccl_launch __attribute__((tls_model("initial-exec")));

class Guard {
 public:
  Guard() { ++t_depth; }
  ~Guard() { --t_depth; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  bool outermost() const { return t_depth == 1; }
};

}  // namespace replay::interpose
