// model.h: logistic regression on synthetic data, the model mpi_train trains.
//
// A fixed "teacher" weight vector, the same on every rank, labels random points;
// each rank holds its own shard of points and the student learns the teacher's
// decision boundary. Everything is float32 with fixed loop orders, so a run is a
// pure function of its seed. Parameters are laid out as `dim` weights then a bias.
// Plain functions on caller-owned data; no shared state.
#pragma once

#include <cstdint>
#include <vector>

namespace mpi_train {

// One rank's training data: `size` points of `dim` features, row-major.
struct Shard {
  int dim = 0;
  int size = 0;
  std::vector<float> features;  // size * dim
  std::vector<float> labels;    // size, each 0 or 1
};

// Generates rank `rank`'s shard; the teacher depends only on `seed`.
Shard MakeShard(uint64_t seed, int rank, int dim, int size);

// Fills `params` with small random values drawn from `seed`.
void InitParams(uint64_t seed, std::vector<float>* params);

struct BatchResult {
  float loss = 0.0f;  // mean binary cross-entropy over the batch
  int correct = 0;    // points the current parameters classify correctly
};

// Computes the batch loss and writes its gradient with respect to `params` into
// `grad` (resized to match). `batch` holds indices into `shard`.
BatchResult LossAndGradient(const std::vector<float>& params, const Shard& shard,
                            const std::vector<int>& batch, std::vector<float>* grad);

}  // namespace mpi_train
