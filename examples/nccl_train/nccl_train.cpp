// nccl_train: mpi_train's data-parallel trainer on CUDA and NCCL, one GPU per rank;
// the program replay's NCCL tests record and re-run.
//
// Same model, data, seeds, options, faults and output as mpi_train, from
// mpi_train's own code (options.h says which faults differ): each rank computes
// the gradient of a logistic-regression model on a minibatch of its shard, the
// ranks sum their gradients, and every rank applies the same averaged SGD update. MPI only launches the job and carries
// NCCL's unique id from rank 0 to the others; all training traffic is NCCL on
// one stream, on three communicators shaped like a framework's: `world` (from the
// unique id), `grad` (a split of it, gradient traffic only) and `metrics` (split
// by rank parity). Gradients, parameters and the scalars that travel live in
// device memory; the gradient itself is computed on the host and copied over.
//
// Built twice from this source (device.h): nccl_train on the CUDA runtime and real
// NCCL, and nccl_train_host on host memory and the host NCCL stand-in, which
// runs anywhere MPI does. Without --fault both are deterministic and print losses
// as %a hex floats; README.md lists the faults.

#include <mpi.h>
#include <nccl.h>
#include <replay/replay.h>
#include <sys/random.h>

#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "device.h"
#include "mpi_train/checkpoint.h"
#include "mpi_train/faults.h"
#include "mpi_train/model.h"
#include "mpi_train/rng.h"
#include "options.h"

namespace nccl_train {
namespace {

using mpi_train::FaultKind;
using mpi_train::FaultPlan;
using mpi_train::Rng;

constexpr int kShardSize = 512;            // points per rank, as in mpi_train
constexpr uint64_t kSamplerStream = 2000;  // plus the rank; see mpi_train's StreamSeed

[[noreturn]] void Die(int rank, const std::string& message) {
  std::fprintf(stderr, "nccl_train: rank %d: %s\n", rank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void CheckNccl(ncclResult_t result, const char* call, int rank) {
  if (result == ncclSuccess) return;
  Die(rank, std::string(call) + ": " + ncclGetErrorString(result) + ": " + ncclGetLastError(nullptr));
}

#define NCCL_CHECK(call, rank) CheckNccl((call), #call, (rank))

struct Job {
  int rank = 0;
  int size = 1;
  int device = 0;
  ncclComm_t world = nullptr;
  ncclComm_t grad = nullptr;     // gradient traffic only, as frameworks keep it apart
  ncclComm_t metrics = nullptr;  // the ranks of this rank's parity
  device::Stream stream = nullptr;
};

// Device buffers, allocated once.
struct DeviceBuffers {
  float* params = nullptr;  // for the initial broadcast
  float* grad = nullptr;
  int64_t* cursor_out = nullptr;  // {step, cursor} to the next rank
  int64_t* cursor_in = nullptr;   // the same from the previous rank
  int32_t* counts = nullptr;      // {correct, seen} of this rank's batch
  int32_t* group_counts = nullptr;
  float* loss = nullptr;  // [0] this rank's, [1] the sum over ranks
};

uint64_t SeedFromOs(int rank) {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != static_cast<ssize_t>(sizeof(seed))) Die(rank, "getrandom failed");
  return seed;
}

// FNV-1a over the parameters' bytes, as mpi_train prints it.
uint64_t HashParams(const std::vector<float>& params) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(params.data());
  for (size_t i = 0; i < params.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

// This process's rank and rank count on its node.
std::pair<int, int> NodeRank() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return {rank, size};
}

// One device per rank of a node, unless the device fault gives a rank the device
// of the rank before it, which NCCL refuses when the communicator is created.
void SelectDevice(const Options& options, Job* job) {
  const auto [local_rank, local_size] = NodeRank();
  int slot = local_rank;
  if (options.DeviceFault(job->rank)) slot = (local_rank + local_size - 1) % local_size;
  const int count = device::Count();
  if (count < 1) Die(job->rank, "no device");
  job->device = slot % count;
  device::Select(job->device);
}

void CreateCommunicators(Job* job) {
  ncclUniqueId id;
  if (job->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id), job->rank);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_CHECK(ncclCommInitRank(&job->world, job->size, id, job->rank), job->rank);
  NCCL_CHECK(ncclCommSplit(job->world, 0, job->rank, &job->grad, nullptr), job->rank);
  NCCL_CHECK(ncclCommSplit(job->world, job->rank % 2, job->rank, &job->metrics, nullptr), job->rank);
  job->stream = device::CreateStream();
}

void DestroyCommunicators(Job* job) {
  device::DestroyStream(job->stream);
  for (ncclComm_t* comm : {&job->metrics, &job->grad, &job->world}) {
    NCCL_CHECK(ncclCommFinalize(*comm), job->rank);
    NCCL_CHECK(ncclCommDestroy(*comm), job->rank);
    *comm = nullptr;
  }
}

template <typename T>
T* AllocArray(size_t count) {
  return static_cast<T*>(device::Alloc(count * sizeof(T)));
}

// Tells the next rank how far this rank's data loader has read, and checks that
// the previous rank is at the same step: a grouped send and receive, as NCCL
// programs exchange with neighbours.
void ExchangeCursor(const Job& job, const DeviceBuffers& d, int64_t step, int64_t cursor) {
  if (job.size == 1) return;
  const int64_t mine[2] = {step, cursor};
  int64_t theirs[2] = {0, 0};
  const int next = (job.rank + 1) % job.size;
  const int prev = (job.rank - 1 + job.size) % job.size;
  device::CopyToDevice(d.cursor_out, mine, sizeof(mine), job.stream);
  NCCL_CHECK(ncclGroupStart(), job.rank);
  NCCL_CHECK(ncclSend(d.cursor_out, 2, ncclInt64, next, job.world, job.stream), job.rank);
  NCCL_CHECK(ncclRecv(d.cursor_in, 2, ncclInt64, prev, job.world, job.stream), job.rank);
  NCCL_CHECK(ncclGroupEnd(), job.rank);
  device::CopyToHost(theirs, d.cursor_in, sizeof(theirs), job.stream);
  device::Synchronize(job.stream);
  if (theirs[0] != step) {
    Die(job.rank, "at step " + std::to_string(step) + " but rank " + std::to_string(prev) + " is at " +
                      std::to_string(theirs[0]));
  }
}

void Train(const mpi_train::Options& options, const Job& job) {
  const FaultPlan& faults = options.faults;
  const bool unseeded = faults.Enabled(FaultKind::kUnseeded);
  const size_t num_params = static_cast<size_t>(options.params);
  const mpi_train::Shard shard = mpi_train::MakeShard(options.seed, job.rank, options.params - 1, kShardSize);
  std::vector<float> params(num_params, 0.0f);
  Rng sampler(unseeded ? SeedFromOs(job.rank)
                       : mpi_train::StreamSeed(options.seed, kSamplerStream + static_cast<uint64_t>(job.rank)));

  DeviceBuffers d;
  d.params = AllocArray<float>(num_params);
  d.grad = AllocArray<float>(num_params);
  d.cursor_out = AllocArray<int64_t>(2);
  d.cursor_in = AllocArray<int64_t>(2);
  d.counts = AllocArray<int32_t>(2);
  d.group_counts = AllocArray<int32_t>(2);
  d.loss = AllocArray<float>(2);

  int64_t first_step = 1;
  if (options.resume >= 0) {
    // Every rank loads its own checkpoint, all taken after the same step.
    mpi_train::Checkpoint ckpt;
    std::string error;
    if (!mpi_train::LoadCheckpoint(options.ckpt_dir, job.rank, job.size, options.resume, num_params, &ckpt,
                                   &error)) {
      Die(job.rank, error);
    }
    params = std::move(ckpt.params);
    sampler = Rng(ckpt.sampler_state);
    first_step = options.resume + 1;
  } else {
    // Only rank 0's initial values matter: the broadcast gives every rank the same start.
    if (job.rank == 0) mpi_train::InitParams(unseeded ? SeedFromOs(job.rank) : options.seed, &params);
    const size_t bytes = num_params * sizeof(float);
    device::CopyToDevice(d.params, params.data(), bytes, job.stream);
    NCCL_CHECK(ncclBroadcast(d.params, d.params, num_params, ncclFloat32, 0, job.grad, job.stream), job.rank);
    device::CopyToHost(params.data(), d.params, bytes, job.stream);
    device::Synchronize(job.stream);
  }

  const float world_size = static_cast<float>(job.size);
  std::vector<int> batch(static_cast<size_t>(options.batch));
  std::vector<float> grad;
  int32_t group_counts[2] = {0, 0};  // correct, seen: the group's latest batches
  bool have_metrics = false;
  for (int64_t step = first_step; step <= options.steps; ++step) {
    ExchangeCursor(job, d, step, (step - 1) * options.batch);

    for (int& index : batch) index = static_cast<int>(sampler.Below(kShardSize));
    const mpi_train::BatchResult local = mpi_train::LossAndGradient(params, shard, batch, &grad);

    if (faults.Fires(FaultKind::kCrash, job.rank, step)) std::raise(SIGSEGV);
    if (faults.Fires(FaultKind::kNan, job.rank, step)) grad[0] = std::numeric_limits<float>::quiet_NaN();

    const int32_t counts[2] = {local.correct, options.batch};
    const float losses[1] = {local.loss};
    device::CopyToDevice(d.grad, grad.data(), num_params * sizeof(float), job.stream);
    device::CopyToDevice(d.counts, counts, sizeof(counts), job.stream);
    device::CopyToDevice(d.loss, losses, sizeof(losses), job.stream);

    // Queued in the order a framework issues them: metrics, gradients, loss. The
    // order fault moves the metrics allreduce after the loss allreduce on one rank,
    // which its group partner then waits for forever.
    const bool swap_order = faults.Fires(FaultKind::kOrder, job.rank, step);
    if (!swap_order) {
      NCCL_CHECK(ncclAllReduce(d.counts, d.group_counts, 2, ncclInt32, ncclSum, job.metrics, job.stream), job.rank);
    }
    // The hang fault skips this on one rank (rank-dependent control flow), which then
    // waits in the loss allreduce while the others wait here. The mismatch fault gives
    // it a shorter count on one rank than on the others.
    if (!faults.Fires(FaultKind::kHang, job.rank, step)) {
      const size_t count = faults.Fires(FaultKind::kMismatch, job.rank, step) ? num_params / 2 : num_params;
      NCCL_CHECK(ncclAllReduce(d.grad, d.grad, count, ncclFloat32, ncclSum, job.grad, job.stream), job.rank);
    }
    NCCL_CHECK(ncclAllReduce(d.loss, d.loss + 1, 1, ncclFloat32, ncclSum, job.world, job.stream), job.rank);
    if (swap_order) {
      NCCL_CHECK(ncclAllReduce(d.counts, d.group_counts, 2, ncclInt32, ncclSum, job.metrics, job.stream), job.rank);
    }
    float loss_sum = 0.0f;
    device::CopyToHost(grad.data(), d.grad, num_params * sizeof(float), job.stream);
    device::CopyToHost(&loss_sum, d.loss + 1, sizeof(loss_sum), job.stream);
    device::CopyToHost(group_counts, d.group_counts, sizeof(group_counts), job.stream);
    device::Synchronize(job.stream);
    have_metrics = true;

    for (size_t i = 0; i < num_params; ++i) params[i] -= options.lr * (grad[i] / world_size);

    std::printf("step %" PRId64 " rank %d loss %a\n", step, job.rank, static_cast<double>(local.loss));
    if (job.rank == 0) {
      std::printf("step %" PRId64 " global-loss %a\n", step, static_cast<double>(loss_sum / world_size));
    }
    std::fflush(stdout);

    if (options.ckpt_every > 0 && step % options.ckpt_every == 0) {
      const mpi_train::Checkpoint ckpt = {step, sampler.state(), params};
      std::string error;
      if (!mpi_train::SaveCheckpoint(options.ckpt_dir, job.rank, job.size, ckpt, &error)) Die(job.rank, error);
      REPLAY_MARK("checkpoint", step);
    }
  }

  std::printf("rank %d final-params %016" PRIx64 "\n", job.rank, HashParams(params));
  int group_rank = 0;
  NCCL_CHECK(ncclCommUserRank(job.metrics, &group_rank), job.rank);
  if (have_metrics && group_rank == 0) {
    std::printf("group %d accuracy %d/%d\n", job.rank % 2, group_counts[0], group_counts[1]);
  }
  std::fflush(stdout);

  for (void* ptr : {static_cast<void*>(d.params), static_cast<void*>(d.grad), static_cast<void*>(d.cursor_out),
                    static_cast<void*>(d.cursor_in), static_cast<void*>(d.counts),
                    static_cast<void*>(d.group_counts), static_cast<void*>(d.loss)}) {
    device::Free(ptr);
  }
}

}  // namespace
}  // namespace nccl_train

int main(int argc, char** argv) {
  using nccl_train::Job;
  using nccl_train::Options;

  MPI_Init(&argc, &argv);
  Job job;
  MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job.size);

  // Every rank parses the same argv; rank 0 alone speaks, so an error is one line.
  Options options;
  std::string error;
  if (!nccl_train::ParseOptions(argc, argv, &options, &error)) {
    if (job.rank == 0) std::fprintf(stderr, "nccl_train: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  if (options.train.help) {
    if (job.rank == 0) std::fputs(nccl_train::Usage().c_str(), stdout);
    MPI_Finalize();
    return 0;
  }
  options.ClampRanks(job.size);

  nccl_train::SelectDevice(options, &job);
  nccl_train::CreateCommunicators(&job);
  nccl_train::Train(options.train, job);
  nccl_train::DestroyCommunicators(&job);

  MPI_Finalize();
  if (job.rank == 0) {
    std::puts("EXIT-SUCCESS");
    std::fflush(stdout);
  }
  return 0;
}
