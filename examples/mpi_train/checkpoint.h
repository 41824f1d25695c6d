// checkpoint.h: one rank's training state on disk, for --ckpt-every and --resume.
//
// A checkpoint holds everything the rest of the run depends on: the step, the
// parameters and the batch-sampling RNG's state. Resuming from it therefore prints
// the same lines as a run that never stopped. The file is native-endian binary;
// it is meant to be read back on the machine that wrote it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpi_train {

struct Checkpoint {
  int64_t step = 0;
  uint64_t sampler_state = 0;
  std::vector<float> params;
};

// DIR/rank-<R>-step-<S>.ckpt
std::string CheckpointPath(const std::string& dir, int rank, int64_t step);

// Writes rank `rank`'s checkpoint under `dir`, creating `dir` if needed. The file
// appears whole or not at all (written aside, then renamed), so a crash mid-write
// never leaves a torn checkpoint to resume from. Returns false and sets *error on
// failure.
bool SaveCheckpoint(const std::string& dir, int rank, int world_size, const Checkpoint& ckpt,
                    std::string* error);

// Reads the checkpoint rank `rank` wrote at `step`, checking that it was written by
// a run of the same shape (world size, parameter count). Returns false and sets
// *error on failure.
bool LoadCheckpoint(const std::string& dir, int rank, int world_size, int64_t step,
                    size_t num_params, Checkpoint* ckpt, std::string* error);

}  // namespace mpi_train
