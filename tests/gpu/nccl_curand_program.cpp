// nccl_curand_program: a single-process CUDA program, started without a
// launcher, whose data comes from cuRAND seeded from getrandom and goes
// through NCCL on a one-rank communicator; for tests/gpu/device_check.sh,
// which records it, re-runs it alone from its trace and compares.
//
// Prints "seed S", "rank R of N" (from the communicator), then per step "step
// I sum X" (the sum of the allreduced buffer, copied back, as a hex float).
// Two runs differ unless the second is served the first's entropy.
#include <cuda_runtime.h>
#include <curand.h>
#include <nccl.h>
#include <sys/random.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

[[noreturn]] void Fail(const char* what, const char* why) {
  std::fprintf(stderr, "nccl_curand_program: %s: %s\n", what, why);
  std::exit(1);
}
void Cuda(cudaError_t r, const char* what) {
  if (r != cudaSuccess) Fail(what, cudaGetErrorString(r));
}
void Nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) Fail(what, ncclGetErrorString(r));
}
void Curand(curandStatus_t r, const char* what) {
  if (r != CURAND_STATUS_SUCCESS) Fail(what, "cuRAND error");
}

}  // namespace

int main() {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) Fail("getrandom", "short read");
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  ncclUniqueId id;
  Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclComm_t comm = nullptr;
  Nccl(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank");
  int rank = -1, size = 0;
  Nccl(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  Nccl(ncclCommCount(comm, &size), "ncclCommCount");
  std::printf("rank %d of %d\n", rank, size);

  curandGenerator_t gen = nullptr;
  Curand(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
  Curand(curandSetPseudoRandomGeneratorSeed(gen, seed), "curandSetPseudoRandomGeneratorSeed");
  Curand(curandSetStream(gen, stream), "curandSetStream");
  constexpr size_t kCount = 1 << 20;
  float* in = nullptr;
  float* out = nullptr;
  Cuda(cudaMalloc(&in, kCount * sizeof(float)), "cudaMalloc");
  Cuda(cudaMalloc(&out, kCount * sizeof(float)), "cudaMalloc");
  std::vector<float> host(kCount);
  for (int step = 0; step < 3; ++step) {
    Curand(curandGenerateUniform(gen, in, kCount), "curandGenerateUniform");
    Nccl(ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, comm, stream), "ncclAllReduce");
    Cuda(cudaMemcpyAsync(host.data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    Cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    double sum = 0;
    for (float v : host) sum += v;
    std::printf("step %d sum %a\n", step, sum);
  }
  Curand(curandDestroyGenerator(gen), "curandDestroyGenerator");
  Cuda(cudaFree(in), "cudaFree");
  Cuda(cudaFree(out), "cudaFree");
  Nccl(ncclCommDestroy(comm), "ncclCommDestroy");
  Cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
