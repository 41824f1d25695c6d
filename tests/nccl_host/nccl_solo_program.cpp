// nccl_solo_program: a single-process NCCL program, started without a
// launcher: nothing but its NCCL communicator says which rank it is. Its data
// is seeded from getrandom, so two runs differ unless the second is served
// the first's entropy (replay rerun). For tests/e2e/nccl_profiler_e2e_test.cpp,
// built twice: against the host NCCL stand-in's libnccl.so.2, and with the
// stand-in linked in (nccl_solo_static), where only NCCL's profiler plugin
// interface sees it.
//
// Prints "seed S", then per step "step I sum X" (the allreduced buffer's sum,
// as hex float), and "rank R of N" from the communicator.
#include <nccl.h>
#include <sys/random.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

void Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "nccl_solo_program: %s: %s\n", what, ncclGetErrorString(r));
  std::exit(1);
}

}  // namespace

int main() {
  uint32_t seed = 0;
  if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed)) return 1;
  std::printf("seed %u\n", seed);
  ncclUniqueId id;
  Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclComm_t comm = nullptr;
  Check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank");
  int rank = -1, size = 0;
  Check(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  Check(ncclCommCount(comm, &size), "ncclCommCount");
  std::printf("rank %d of %d\n", rank, size);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> buf(1024), out(1024);
  for (int step = 0; step < 3; ++step) {
    for (float& v : buf) v = dist(gen);
    Check(ncclAllReduce(buf.data(), out.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce");
    Check(ncclBroadcast(out.data(), out.data(), out.size(), ncclFloat32, 0, comm, nullptr), "ncclBroadcast");
    float sum = 0.0f;
    for (float v : out) sum += v;
    std::printf("step %d sum %a\n", step, static_cast<double>(sum));
  }
  Check(ncclCommDestroy(comm), "ncclCommDestroy");
  return 0;
}
