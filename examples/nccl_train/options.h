// options.h: nccl_train's command line, which is mpi_train's (parsed by mpi_train's
// own code, examples/mpi_train/options.h) with one fault less and one more:
//
//   race    is refused: it sums losses in the order MPI_ANY_SOURCE receives match,
//           and NCCL has no wildcard receive
//   device  is added: a rank selects the device of the rank before it on its node,
//           which NCCL refuses when the communicator is created
//
// Options is built once from argv and then only read.
#pragma once

#include <string>
#include <vector>

#include "mpi_train/options.h"

namespace nccl_train {

struct Options {
  mpi_train::Options train;          // everything mpi_train takes, its faults included
  std::vector<int> device_faults;    // ranks given --fault device[:rank=R]

  // Retargets faults aimed past the last rank at the last rank, as mpi_train does.
  void ClampRanks(int world_size);

  // Whether --fault device targets `rank`.
  bool DeviceFault(int rank) const;
};

// The --help text.
std::string Usage();

// Parses argv. On a bad argument returns false and sets *error to one line naming it.
bool ParseOptions(int argc, char** argv, Options* options, std::string* error);

}  // namespace nccl_train
