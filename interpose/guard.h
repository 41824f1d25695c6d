// guard.h: the re-entrancy guard every wrapper takes.
//
// Intercepted functions call each other (MPI_Init reads /dev/urandom, the
// recorder itself calls getrandom and PMPI functions): only the outermost call
// on a thread is recorded; nested ones pass straight through. A signal handler
// that interrupts a wrapper sees depth > 0 and also passes through.
#pragma once

namespace replay::interpose {

extern thread_local int t_depth __attribute__((tls_model("initial-exec")));

class Guard {
 public:
  Guard() { ++t_depth; }
  ~Guard() { --t_depth; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  bool outermost() const { return t_depth == 1; }
};

}  // namespace replay::interpose
