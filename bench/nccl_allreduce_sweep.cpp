// nccl_allreduce_sweep: ncclAllReduce over a range of sizes on one-rank
// communicators of the visible GPUs (ncclCommInitAll, one process, no MPI), in
// the manner of nccl-tests' all_reduce_perf: per size, a warm-up, then ITERS
// allreduces enqueued back to back and one stream synchronisation, timed on
// the host. Prints one line per size: bytes, microseconds per allreduce,
// algorithm bandwidth (bytes / time) and a fingerprint of the result, so that
// runs with and without the preload are compared side by side
// (tests/gpu/device_check.sh does).
//
// Usage: nccl_allreduce_sweep [--min BYTES] [--max BYTES] [--factor F] [--iters N]
//                             [--devices N] [--sync-each] [--poison] [--resets N]
//   --sync-each  synchronise the stream after every allreduce (latency, not
//                throughput: what a training step that waits for its gradients sees)
//   --poison     element 3 of the input is a NaN and element 5 an infinity, so
//                that fingerprints count some
//   --resets N   after the sweep, destroy the communicators, reset every device
//                (cudaDeviceReset) and run the whole sweep again, N times: the
//                result column repeats, and with the preload must still equal
//                the run without it
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

void Cuda(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return;
  std::fprintf(stderr, "nccl_allreduce_sweep: %s: %s\n", what, cudaGetErrorString(r));
  std::exit(1);
}

void Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "nccl_allreduce_sweep: %s: %s\n", what, ncclGetErrorString(r));
  std::exit(1);
}

struct Args {
  size_t min = 8;
  size_t max = 256u << 20;
  size_t factor = 4;
  int iters = 50;
  int devices = 1;
  bool sync_each = false;
  bool poison = false;
  int resets = 0;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (s == "--sync-each") {
      a->sync_each = true;
      continue;
    }
    if (s == "--poison") {
      a->poison = true;
      continue;
    }
    if (v == nullptr) {
      std::fprintf(stderr, "nccl_allreduce_sweep: %s needs a value\n", s.c_str());
      return false;
    }
    ++i;
    if (s == "--min") {
      a->min = std::strtoull(v, nullptr, 10);
    } else if (s == "--max") {
      a->max = std::strtoull(v, nullptr, 10);
    } else if (s == "--factor") {
      a->factor = std::strtoull(v, nullptr, 10);
    } else if (s == "--iters") {
      a->iters = std::atoi(v);
    } else if (s == "--devices") {
      a->devices = std::atoi(v);
    } else if (s == "--resets") {
      a->resets = std::atoi(v);
    } else {
      std::fprintf(stderr, "nccl_allreduce_sweep: unknown argument %s (see the header of bench/nccl_allreduce_sweep.cpp)\n",
                   s.c_str());
      return false;
    }
  }
  return a->min >= 4 && a->max >= a->min && a->factor >= 2 && a->iters > 0 && a->devices > 0 && a->resets >= 0;
}

}  // namespace

// One sweep over fresh communicators, streams and buffers, released at its end.
void Sweep(const Args& a) {
  const int n = a.devices;
  std::vector<int> devs(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) devs[static_cast<size_t>(d)] = d;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  Nccl(ncclCommInitAll(comms.data(), n, devs.data()), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  std::vector<float*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    Cuda(cudaSetDevice(d), "cudaSetDevice");
    Cuda(cudaStreamCreateWithFlags(&streams[static_cast<size_t>(d)], cudaStreamNonBlocking), "cudaStreamCreate");
    Cuda(cudaMalloc(&send[static_cast<size_t>(d)], a.max), "cudaMalloc");
    Cuda(cudaMalloc(&recv[static_cast<size_t>(d)], a.max), "cudaMalloc");
    std::vector<float> host(a.max / sizeof(float));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 7 + static_cast<size_t>(d)) % 101) * 0.01f;
    if (a.poison && host.size() > 5) {
      host[3] = std::numeric_limits<float>::quiet_NaN();
      host[5] = std::numeric_limits<float>::infinity();
    }
    Cuda(cudaMemcpy(send[static_cast<size_t>(d)], host.data(), a.max, cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  auto enqueue = [&](size_t count) {
    Nccl(ncclGroupStart(), "ncclGroupStart");
    for (int d = 0; d < n; ++d) {
      size_t k = static_cast<size_t>(d);
      Nccl(ncclAllReduce(send[k], recv[k], count, ncclFloat, ncclSum, comms[k], streams[k]), "ncclAllReduce");
    }
    Nccl(ncclGroupEnd(), "ncclGroupEnd");
  };
  auto sync = [&] {
    for (int d = 0; d < n; ++d) {
      Cuda(cudaSetDevice(d), "cudaSetDevice");
      Cuda(cudaStreamSynchronize(streams[static_cast<size_t>(d)]), "cudaStreamSynchronize");
    }
  };

  std::printf("# nccl_allreduce_sweep: %d one-rank communicator(s), float sum, %d iterations per size%s\n", n, a.iters,
              a.sync_each ? ", synchronised after each" : "");
  std::printf("%12s %12s %10s %18s\n", "bytes", "us/op", "algbw GB/s", "result");
  for (size_t bytes = a.min; bytes <= a.max; bytes *= a.factor) {
    size_t count = bytes / sizeof(float);
    for (int i = 0; i < 5; ++i) enqueue(count);
    sync();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) {
      enqueue(count);
      if (a.sync_each) sync();
    }
    sync();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / a.iters;
    // A fingerprint of the first device's result: equal across runs with and
    // without the preload, or the preload changed what the application saw.
    std::vector<float> out(std::min<size_t>(count, 4096));
    Cuda(cudaSetDevice(0), "cudaSetDevice");
    Cuda(cudaMemcpy(out.data(), recv[0], out.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    uint64_t h = 1469598103934665603ull;
    for (float f : out) {
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      h = (h ^ bits) * 1099511628211ull;
    }
    std::printf("%12zu %12.2f %10.2f %18llx\n", bytes, us, static_cast<double>(bytes) / us / 1e3,
                static_cast<unsigned long long>(h));
    std::fflush(stdout);
  }
  for (int d = 0; d < n; ++d) {
    size_t k = static_cast<size_t>(d);
    Cuda(cudaSetDevice(d), "cudaSetDevice");
    Cuda(cudaFree(send[k]), "cudaFree");
    Cuda(cudaFree(recv[k]), "cudaFree");
    Cuda(cudaStreamDestroy(streams[k]), "cudaStreamDestroy");
    Nccl(ncclCommDestroy(comms[k]), "ncclCommDestroy");
  }
}

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) return 2;
  int have = 0;
  Cuda(cudaGetDeviceCount(&have), "cudaGetDeviceCount");
  if (have < a.devices) {
    std::fprintf(stderr, "nccl_allreduce_sweep: %d devices asked for, %d visible\n", a.devices, have);
    return 2;
  }
  for (int round = 0; round <= a.resets; ++round) {
    if (round > 0) {
      for (int d = 0; d < a.devices; ++d) {
        Cuda(cudaSetDevice(d), "cudaSetDevice");
        Cuda(cudaDeviceReset(), "cudaDeviceReset");
      }
      std::printf("# devices reset\n");
    }
    Sweep(a);
  }
  return 0;
}
