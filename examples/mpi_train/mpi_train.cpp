// mpi_train: a small data-parallel trainer over MPI, the program that replay's
// README demo and end-to-end tests record and replay.
//
// Every rank holds a shard of synthetic data and a full copy of a logistic-regression
// model. Each step it computes a gradient on a minibatch of its shard, the ranks sum
// their gradients with an allreduce, and every rank applies the same averaged SGD
// update, so the copies stay identical. The communication is shaped like a real
// framework's: gradients travel on their own duplicated communicator, metrics on
// per-group sub-communicators with a non-blocking allreduce, the reported loss on
// MPI_COMM_WORLD, and neighbouring ranks exchange data-loader cursors point to point.
//
// Without --fault a run is deterministic (float32 throughout, fixed loop orders, no
// threads, all randomness from --seed), and losses print as hex floats (%a), so two
// runs can be compared bit for bit with diff. Each --fault commits one real bug of
// distributed training: a hang, a deadlock, a NaN, nondeterminism, a crash. README.md
// lists them with the symptom each reproduces.

#include <mpi.h>
#include <replay/replay.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.h"
#include "faults.h"
#include "model.h"
#include "options.h"
#include "rng.h"

namespace mpi_train {
namespace {

constexpr int kShardSize = 512;            // points per rank
constexpr uint64_t kSamplerStream = 2000;  // plus the rank; see StreamSeed
constexpr int kCursorTag = 1;
constexpr int kRaceTag = 7;
constexpr unsigned kMaxRaceJitterUs = 500;

struct Comms {
  int rank = 0;
  int size = 1;
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm grad = MPI_COMM_NULL;     // gradient traffic only, as frameworks keep it apart
  MPI_Comm metrics = MPI_COMM_NULL;  // the ranks of this rank's parity
};

uint64_t SeedFromOs() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) {
    std::perror("mpi_train: getrandom");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return seed;
}

// FNV-1a over the parameters' bytes: a short fingerprint to compare runs by.
uint64_t HashParams(const std::vector<float>& params) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(params.data());
  for (size_t i = 0; i < params.size() * sizeof(float); ++i) {
    hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  }
  return hash;
}

// Tells the next rank how far this rank's data loader has read, and checks that the
// previous rank is at the same step: a rank out of step would otherwise show up only
// later, as a hang or a wrong answer.
void ExchangeCursor(const Comms& comms, int64_t step, int64_t cursor) {
  if (comms.size == 1) return;
  int64_t mine[2] = {step, cursor};
  int64_t theirs[2] = {0, 0};
  const int next = (comms.rank + 1) % comms.size;
  const int prev = (comms.rank - 1 + comms.size) % comms.size;
  MPI_Request requests[2];
  MPI_Irecv(theirs, 2, MPI_INT64_T, prev, kCursorTag, comms.world, &requests[0]);
  MPI_Isend(mine, 2, MPI_INT64_T, next, kCursorTag, comms.world, &requests[1]);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  if (theirs[0] != step) {
    std::fprintf(stderr, "mpi_train: rank %d is at step %" PRId64 " but rank %d at %" PRId64 "\n",
                 comms.rank, step, prev, theirs[0]);
    MPI_Abort(comms.world, 1);
  }
}

// The race fault: rank 0 sums every rank's loss in the order the messages arrive.
// Float addition is not associative, so the last bits of the sum depend on that order,
// and through the learning rate, so does everything after it.
float ArrivalOrderLossSum(const Comms& comms, int64_t step, float local_loss) {
  float sum = local_loss;
  if (comms.rank == 0) {
    for (int i = 1; i < comms.size; ++i) {
      float loss = 0.0f;
      MPI_Recv(&loss, 1, MPI_FLOAT, MPI_ANY_SOURCE, kRaceTag, comms.world, MPI_STATUS_IGNORE);
      sum += loss;
    }
  } else {
    // Jitter from the clock, not the seed, so that the order really varies run to run.
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    Rng jitter(static_cast<uint64_t>(now) ^ (static_cast<uint64_t>(comms.rank) << 32) ^
               static_cast<uint64_t>(step));
    usleep(jitter.Below(kMaxRaceJitterUs));
    MPI_Send(&local_loss, 1, MPI_FLOAT, 0, kRaceTag, comms.world);
  }
  MPI_Bcast(&sum, 1, MPI_FLOAT, 0, comms.world);
  return sum;
}

void Train(const Options& options, const Comms& comms) {
  const FaultPlan& faults = options.faults;
  const bool unseeded = faults.Enabled(FaultKind::kUnseeded);
  const size_t num_params = static_cast<size_t>(options.params);
  const Shard shard = MakeShard(options.seed, comms.rank, options.params - 1, kShardSize);
  std::vector<float> params(num_params, 0.0f);
  Rng sampler(unseeded
                  ? SeedFromOs()
                  : StreamSeed(options.seed, kSamplerStream + static_cast<uint64_t>(comms.rank)));

  int64_t first_step = 1;
  if (options.resume >= 0) {
    // Every rank loads its own checkpoint; they were all taken after the same step,
    // so the copies agree without a broadcast.
    Checkpoint ckpt;
    std::string error;
    if (!LoadCheckpoint(options.ckpt_dir, comms.rank, comms.size, options.resume, num_params, &ckpt,
                        &error)) {
      std::fprintf(stderr, "mpi_train: rank %d: %s\n", comms.rank, error.c_str());
      MPI_Abort(comms.world, 1);
    }
    params = std::move(ckpt.params);
    sampler = Rng(ckpt.sampler_state);
    first_step = options.resume + 1;
  } else {
    // Only rank 0's initial values matter: the broadcast gives every rank the same start.
    if (comms.rank == 0) InitParams(unseeded ? SeedFromOs() : options.seed, &params);
    MPI_Bcast(params.data(), options.params, MPI_FLOAT, 0, comms.grad);
  }

  const float world_size = static_cast<float>(comms.size);
  std::vector<int> batch(static_cast<size_t>(options.batch));
  std::vector<float> grad;
  int group_counts[2] = {0, 0};  // correct, seen: the group's latest batches
  bool have_metrics = false;
  for (int64_t step = first_step; step <= options.steps; ++step) {
    ExchangeCursor(comms, step, (step - 1) * options.batch);

    for (int& index : batch) index = static_cast<int>(sampler.Below(kShardSize));
    const BatchResult local = LossAndGradient(params, shard, batch, &grad);

    if (faults.Fires(FaultKind::kCrash, comms.rank, step)) std::raise(SIGSEGV);
    if (faults.Fires(FaultKind::kNan, comms.rank, step)) {
      grad[0] = std::numeric_limits<float>::quiet_NaN();
    }

    float lr = options.lr;
    if (faults.Enabled(FaultKind::kRace)) {
      // Steps shrink as the mean loss falls; this is also how the order-dependent
      // bits of the sum reach the parameters and every later line.
      lr *= ArrivalOrderLossSum(comms, step, local.loss) / world_size;
    }

    // The metrics reduction starts now and overlaps the gradient allreduce, as
    // frameworks overlap logging with communication. The order fault moves it after
    // the loss allreduce on one rank, which its group partner waits for forever.
    const bool swap_order = faults.Fires(FaultKind::kOrder, comms.rank, step);
    const int counts[2] = {local.correct, options.batch};
    MPI_Request metrics_request = MPI_REQUEST_NULL;
    if (!swap_order) {
      MPI_Iallreduce(counts, group_counts, 2, MPI_INT, MPI_SUM, comms.metrics, &metrics_request);
    }

    // The hang fault skips this on one rank (rank-dependent control flow), which then
    // waits in the loss allreduce while the others wait here. The mismatch fault gives
    // it a shorter count on one rank than on the others.
    if (!faults.Fires(FaultKind::kHang, comms.rank, step)) {
      const int count = faults.Fires(FaultKind::kMismatch, comms.rank, step) ? options.params / 2
                                                                             : options.params;
      MPI_Allreduce(MPI_IN_PLACE, grad.data(), count, MPI_FLOAT, MPI_SUM, comms.grad);
    }
    for (size_t i = 0; i < num_params; ++i) params[i] -= lr * (grad[i] / world_size);

    float loss_sum = 0.0f;
    if (!swap_order) {
      MPI_Wait(&metrics_request, MPI_STATUS_IGNORE);
      MPI_Allreduce(&local.loss, &loss_sum, 1, MPI_FLOAT, MPI_SUM, comms.world);
    } else {
      MPI_Allreduce(&local.loss, &loss_sum, 1, MPI_FLOAT, MPI_SUM, comms.world);
      MPI_Iallreduce(counts, group_counts, 2, MPI_INT, MPI_SUM, comms.metrics, &metrics_request);
      MPI_Wait(&metrics_request, MPI_STATUS_IGNORE);
    }
    have_metrics = true;

    std::printf("step %" PRId64 " rank %d loss %a\n", step, comms.rank,
                static_cast<double>(local.loss));
    if (comms.rank == 0) {
      std::printf("step %" PRId64 " global-loss %a\n", step,
                  static_cast<double>(loss_sum / world_size));
    }
    std::fflush(stdout);

    if (options.ckpt_every > 0 && step % options.ckpt_every == 0) {
      const Checkpoint ckpt = {step, sampler.state(), params};
      std::string error;
      if (!SaveCheckpoint(options.ckpt_dir, comms.rank, comms.size, ckpt, &error)) {
        std::fprintf(stderr, "mpi_train: rank %d: %s\n", comms.rank, error.c_str());
        MPI_Abort(comms.world, 1);
      }
      REPLAY_MARK("checkpoint", step);
    }
  }

  std::printf("rank %d final-params %016" PRIx64 "\n", comms.rank, HashParams(params));
  int group_rank = 0;
  MPI_Comm_rank(comms.metrics, &group_rank);
  if (have_metrics && group_rank == 0) {
    std::printf("group %d accuracy %d/%d\n", comms.rank % 2, group_counts[0], group_counts[1]);
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace mpi_train

int main(int argc, char** argv) {
  using mpi_train::Comms;
  using mpi_train::Options;

  MPI_Init(&argc, &argv);
  Comms comms;
  MPI_Comm_rank(comms.world, &comms.rank);
  MPI_Comm_size(comms.world, &comms.size);

  // Every rank parses the same argv; rank 0 alone speaks, so an error is one line.
  Options options;
  std::string error;
  if (!mpi_train::ParseOptions(argc, argv, &options, &error)) {
    if (comms.rank == 0) std::fprintf(stderr, "mpi_train: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  if (options.help) {
    if (comms.rank == 0) std::fputs(mpi_train::kUsage, stdout);
    MPI_Finalize();
    return 0;
  }
  options.faults.ClampRanks(comms.size);

  MPI_Comm_dup(comms.world, &comms.grad);
  MPI_Comm_split(comms.world, comms.rank % 2, comms.rank, &comms.metrics);
  mpi_train::Train(options, comms);
  MPI_Comm_free(&comms.metrics);
  MPI_Comm_free(&comms.grad);

  MPI_Finalize();
  if (comms.rank == 0) {
    std::puts("EXIT-SUCCESS");
    std::fflush(stdout);
  }
  return 0;
}
