// options.h: mpi_train's command line.
#pragma once

#include <cstdint>
#include <string>

#include "faults.h"

namespace mpi_train {

struct Options {
  int64_t steps = 20;
  int params = 2048;  // weights plus one bias
  int batch = 32;     // points per rank per step
  float lr = 0.5f;
  uint64_t seed = 1;
  int64_t ckpt_every = 5;  // 0: never
  std::string ckpt_dir = "ckpt";
  int64_t resume = -1;  // step whose checkpoint to load; -1: start fresh
  FaultPlan faults;
  bool help = false;
};

// The --help text.
extern const char kUsage[];

// Parses argv. On a bad argument returns false and sets *error to one line naming it.
bool ParseOptions(int argc, char** argv, Options* options, std::string* error);

}  // namespace mpi_train
