#include "model.h"

#include <algorithm>
#include <cmath>

#include "rng.h"

namespace mpi_train {
namespace {

// Stream numbers for StreamSeed; shards add the rank so each rank's data differs.
constexpr uint64_t kTeacherStream = 1;
constexpr uint64_t kInitStream = 2;
constexpr uint64_t kShardStream = 1000;

// Label noise, so the task is not perfectly separable and the loss stays informative.
constexpr float kLabelNoise = 0.1f;

}  // namespace

Shard MakeShard(uint64_t seed, int rank, int dim, int size) {
  // Scaled by 1/sqrt(dim) so that the teacher's logits stay O(1) at any width.
  std::vector<float> teacher(static_cast<size_t>(dim));
  Rng teacher_rng(StreamSeed(seed, kTeacherStream));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (float& w : teacher) w = teacher_rng.Symmetric() * scale;

  Shard shard;
  shard.dim = dim;
  shard.size = size;
  shard.features.resize(static_cast<size_t>(size) * static_cast<size_t>(dim));
  shard.labels.resize(static_cast<size_t>(size));
  Rng rng(StreamSeed(seed, kShardStream + static_cast<uint64_t>(rank)));
  for (int i = 0; i < size; ++i) {
    float* x = &shard.features[static_cast<size_t>(i) * static_cast<size_t>(dim)];
    float logit = 0.0f;
    for (int j = 0; j < dim; ++j) {
      x[j] = rng.Symmetric();
      logit += teacher[static_cast<size_t>(j)] * x[j];
    }
    logit += kLabelNoise * rng.Symmetric();
    shard.labels[static_cast<size_t>(i)] = logit > 0.0f ? 1.0f : 0.0f;
  }
  return shard;
}

void InitParams(uint64_t seed, std::vector<float>* params) {
  Rng rng(StreamSeed(seed, kInitStream));
  for (float& p : *params) p = 0.01f * rng.Symmetric();
}

BatchResult LossAndGradient(const std::vector<float>& params, const Shard& shard,
                            const std::vector<int>& batch, std::vector<float>* grad) {
  const size_t dim = static_cast<size_t>(shard.dim);
  grad->assign(params.size(), 0.0f);
  BatchResult result;
  float loss_sum = 0.0f;
  for (int index : batch) {
    const float* x = &shard.features[static_cast<size_t>(index) * dim];
    const float y = shard.labels[static_cast<size_t>(index)];
    float z = params[dim];  // bias
    for (size_t j = 0; j < dim; ++j) z += params[j] * x[j];

    // Cross-entropy on logits, written so that exp never overflows.
    loss_sum += std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z)));
    const float p = 1.0f / (1.0f + std::exp(-z));
    const float err = p - y;
    for (size_t j = 0; j < dim; ++j) (*grad)[j] += err * x[j];
    (*grad)[dim] += err;
    if ((z > 0.0f) == (y > 0.5f)) ++result.correct;
  }
  const float inv_batch = 1.0f / static_cast<float>(batch.size());
  for (float& g : *grad) g *= inv_batch;
  result.loss = loss_sum * inv_batch;
  return result;
}

}  // namespace mpi_train
