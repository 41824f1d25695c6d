// repro_library.h: the C functions repro programs (ReproProgram, replay/shrink.h)
// make their calls through.
//
// One function per call a program makes (allreduce, isend, nccl_allreduce,
// group_end, ...): it allocates buffers of the right sizes for the call, with
// synthetic bytes (device memory for NCCL), makes it, reports an error, and
// frees or keeps the buffers. A rank's calls are then one line each. Making
// each kind of call from one place is also what the recorded loop did and what
// `replay drive` does, so that `replay check` of a recording of the program
// breaks ties between ranks (by what a call site did before) the same way.
//
// The functions are C99 that compiles without warnings under -Wall -Wextra;
// MPI functions need <mpi.h>, NCCL ones <cuda.h> and <nccl.h> and a global
// `stream`, as the program declares them.
#pragma once

#include <set>
#include <string>

namespace replay::shrink {

// The definitions of the functions named in `used` and of those they need,
// in an order a C compiler takes. Unknown names are ignored.
std::string ReproLibrary(const std::set<std::string>& used);

}  // namespace replay::shrink
