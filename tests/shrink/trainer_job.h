// trainer_job.h: a synthetic trace shaped like examples/mpi_train, for the
// shrinker's tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "analysis/synthetic_job.h"

namespace replay::testing {

// A 4-rank job shaped like examples/mpi_train: grad = dup(WORLD), metrics =
// split(WORLD, rank % 2); per step a ring exchange on WORLD (irecv, isend,
// waitall), a gradient allreduce on grad (2048 floats), a loss allreduce on
// WORLD (1 float). At `hang_step`, rank 1 skips the gradient allreduce and
// every rank then blocks where it is; the job is killed `wait_ms` later.
inline void Trainer(const std::string& dir, int steps, int hang_step, int ranks = 4, int wait_ms = 0) {
  SyntheticJob job(dir, ranks);
  job.InitAll();
  std::vector<uint64_t> world_seq(ranks, 0), grad_seq(ranks, 0);
  uint64_t grad = 0;
  std::vector<int32_t> all;
  for (int i = 0; i < ranks; ++i) all.push_back(i);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int32_t> parity;
    for (int i = r % 2; i < ranks; i += 2) parity.push_back(i);
    grad = job.Create(r, testing::kMpiCommDup, SyntheticJob::World(), ++world_seq[r], all);
    job.Create(r, testing::kMpiCommSplit, SyntheticJob::World(), ++world_seq[r], parity, r % 2);
  }
  for (int step = 1; step <= std::min(steps, hang_step); ++step) {
    for (int r = 0; r < ranks; ++r) {
      const int prev = (r + ranks - 1) % ranks, next = (r + 1) % ranks;
      uint64_t a = job.Irecv(r, prev, 1, static_cast<uint64_t>(step));
      uint64_t b = job.Isend(r, next, 1, static_cast<uint64_t>(step));
      job.Wait(r, {a, b}, 2, SyntheticJob::World(), 0, prev, 1);
      const bool hang = step == hang_step;
      if (!(hang && r == 1)) {
        job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, grad, ++grad_seq[r], 2048, 0, 0, !hang, 0, 0,
                       -1, 0x2000);
        if (hang) continue;
      }
      job.Collective(r, testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), ++world_seq[r], 1, 0, 0,
                     !hang, 0, 0, -1, 0x4000);
    }
  }
  if (hang_step <= steps && wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  for (int r = 0; r < ranks; ++r) {
    if (hang_step <= steps) {
      job.Die(r, SIGTERM);
    } else {
      job.Finalize(r);
    }
  }
}

}  // namespace replay::testing
