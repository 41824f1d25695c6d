// nccl_device_program: an NCCL program on "device" memory, for the tests of
// replay's device path without a GPU. Its buffers come from cuMemAlloc of the
// host CUDA driver stand-in (cuda_host.cpp), so the preload sees device
// pointers, watches CUDA events and stages device data through the driver,
// exactly as on a GPU; NCCL is the host stand-in.
//
// Each step: fill a send buffer on the host, copy it to the device, allreduce
// it into a device buffer, pass it to the next rank with a grouped
// send/receive, copy both results back and print a line per rank:
//   step S rank R sum <hex float of element 0> <FNV-1a of the buffer> ring <...>
//
// Options: --steps N (default 4), --count N elements (default 1024),
// --unseeded (the values come from getrandom), --nan RANK:STEP (that rank
// sends a NaN at that step), --collectives (each step also runs every other
// collective once, on device buffers of exactly the size each needs),
// --capture (after the steps, an allreduce on a stream capturing a CUDA graph
// in the global mode; prints what else the graph captured: "rank R captured
// nodes N", 0 unless something enqueued work of its own there), --launches N
// (with --capture: instantiate the graph and launch it N times), --skip-launch
// RANK (that rank launches it once less), --counters
// (at the end, what the driver stand-in counted: "rank R fingerprint kernels K
// device-to-host copies C", "rank R stale launches L dead queries Q" and "rank R
// page-locked allocations A"), --pause-us N (sleep that long after each step),
// --fault RANK (that rank's context takes a sticky CUDA error, as from a
// faulting kernel, right after the last step's allreduce is enqueued: the
// rank prints "rank R CUDA error E at step S" instead of its line and exits
// with 3), --reset (after the steps, synchronise the context and reset the
// device as cudaDeviceReset does, through the driver entry the CUDA runtime
// would look up, then allocate again and run two more steps), --bad-peer
// RANK:STEP (that rank, at that step, first sends to a peer one past the
// last rank: NCCL answers ncclInvalidArgument, and the rank prints "rank R
// ncclSend: error E" and exits with 3, which ends the job). Run under mpirun.
#include <mpi.h>
#include <nccl.h>
#include <dlfcn.h>
#include <sys/random.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
int cuMemAlloc_v2(uint64_t* dptr, size_t bytes);
int cuMemFree_v2(uint64_t dptr);
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t bytes);
int cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t bytes);
int cuStreamCreate(void** stream, unsigned flags);
int cuStreamDestroy_v2(void* stream);
int cuda_host_graph_nodes(void* graph);
void cuda_host_counters(int* fingerprint_kernels, int* device_to_host_copies);
void cuda_host_teardown_counters(int* stale_launches, int* dead_queries);
void cuda_host_fault(int code);
int cuda_host_page_locked_allocations();
}

namespace {

uint64_t Fnv(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

void Check(bool ok, int rank, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "nccl_device_program: rank %d: %s failed\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = 4;
  size_t count = 1024;
  bool unseeded = false;
  int nan_rank = -1, nan_step = -1;
  bool collectives = false;
  bool capture = false;
  bool counters = false;
  int fault_rank = -1;
  bool reset = false;
  int launches = 0;
  int skip_rank = -1;
  long pause_us = 0;
  int bad_rank = -1, bad_step = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--count" && i + 1 < argc) {
      count = static_cast<size_t>(std::atol(argv[++i]));
    } else if (a == "--unseeded") {
      unseeded = true;
    } else if (a == "--nan" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d:%d", &nan_rank, &nan_step) != 2) nan_rank = -1;
    } else if (a == "--collectives") {
      collectives = true;
    } else if (a == "--capture") {
      capture = true;
    } else if (a == "--counters") {
      counters = true;
    } else if (a == "--fault" && i + 1 < argc) {
      fault_rank = std::atoi(argv[++i]);
    } else if (a == "--reset") {
      reset = true;
    } else if (a == "--pause-us" && i + 1 < argc) {
      pause_us = std::atol(argv[++i]);
    } else if (a == "--launches" && i + 1 < argc) {
      launches = std::atoi(argv[++i]);
    } else if (a == "--skip-launch" && i + 1 < argc) {
      skip_rank = std::atoi(argv[++i]);
    } else if (a == "--bad-peer" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d:%d", &bad_rank, &bad_step) != 2) bad_rank = -1;
    } else {
      if (rank == 0) std::fprintf(stderr, "nccl_device_program: unknown argument %s\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  // Synchronisation goes through driver functions looked up as the CUDA
  // runtime looks up what it calls, so the preload sees it.
  auto sync_stream = reinterpret_cast<int (*)(void*)>(dlsym(RTLD_DEFAULT, "cuStreamSynchronize"));
  auto sync_context = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "cuCtxSynchronize"));
  Check(sync_stream != nullptr && sync_context != nullptr, rank, "dlsym of the synchronisation functions");
  uint32_t seed = 12345u + static_cast<uint32_t>(rank);
  if (unseeded) Check(getrandom(&seed, sizeof(seed), 0) == sizeof(seed), rank, "getrandom");

  ncclUniqueId id;
  if (rank == 0) Check(ncclGetUniqueId(&id) == ncclSuccess, rank, "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  Check(ncclCommInitRank(&comm, size, id, rank) == ncclSuccess, rank, "ncclCommInitRank");

  const size_t bytes = count * sizeof(float);
  // --collectives: a buffer of `count` elements per rank, and one to receive into.
  const size_t all_bytes = bytes * static_cast<size_t>(size);
  uint64_t d_send = 0, d_sum = 0, d_ring = 0, d_all = 0, d_all_out = 0;
  void *send = nullptr, *sum = nullptr, *ring = nullptr, *all = nullptr, *all_out = nullptr;
  auto allocate = [&] {
    Check(cuMemAlloc_v2(&d_send, bytes) == 0 && cuMemAlloc_v2(&d_sum, bytes) == 0 &&
              cuMemAlloc_v2(&d_ring, bytes) == 0,
          rank, "cuMemAlloc");
    send = reinterpret_cast<void*>(d_send);
    sum = reinterpret_cast<void*>(d_sum);
    ring = reinterpret_cast<void*>(d_ring);
    if (collectives) {
      Check(cuMemAlloc_v2(&d_all, all_bytes) == 0 && cuMemAlloc_v2(&d_all_out, all_bytes) == 0, rank, "cuMemAlloc");
      std::vector<float> halves(count * static_cast<size_t>(size), 0.5f);
      Check(cuMemcpyHtoD_v2(d_all, halves.data(), all_bytes) == 0, rank, "cuMemcpyHtoD");
      all = reinterpret_cast<void*>(d_all);
      all_out = reinterpret_cast<void*>(d_all_out);
    }
  };
  allocate();
  std::vector<float> host(count), out(count), back(count);
  int faulted = 0;
  auto run_step = [&](int step) {
    for (size_t i = 0; i < count; ++i) {
      seed = seed * 1664525u + 1013904223u;
      host[i] = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
    }
    if (rank == nan_rank && step == nan_step) host[count / 2] = std::nanf("");
    Check(cuMemcpyHtoD_v2(d_send, host.data(), bytes) == 0, rank, "cuMemcpyHtoD");
    Check(ncclAllReduce(send, sum, count, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, rank, "ncclAllReduce");
    if (rank == fault_rank && step == steps) cuda_host_fault(700);  // CUDA_ERROR_ILLEGAL_ADDRESS
    if (rank == bad_rank && step == bad_step) {
      const ncclResult_t rc = ncclSend(send, count, ncclFloat32, size, comm, nullptr);
      std::printf("rank %d ncclSend: error %d\n", rank, static_cast<int>(rc));
      std::fflush(stdout);
      std::exit(3);
    }
    Check(ncclGroupStart() == ncclSuccess, rank, "ncclGroupStart");
    Check(ncclSend(send, count, ncclFloat32, (rank + 1) % size, comm, nullptr) == ncclSuccess, rank, "ncclSend");
    Check(ncclRecv(ring, count, ncclFloat32, (rank + size - 1) % size, comm, nullptr) == ncclSuccess, rank,
          "ncclRecv");
    Check(ncclGroupEnd() == ncclSuccess, rank, "ncclGroupEnd");
    if (collectives) {
      const int root = step % size;
      Check(ncclBroadcast(send, sum, count, ncclFloat32, root, comm, nullptr) == ncclSuccess, rank, "ncclBroadcast");
      Check(ncclBcast(sum, count, ncclFloat32, root, comm, nullptr) == ncclSuccess, rank, "ncclBcast");
      Check(ncclReduce(send, sum, count, ncclFloat32, ncclMax, root, comm, nullptr) == ncclSuccess, rank,
            "ncclReduce");
      Check(ncclAllGather(send, all, count, ncclFloat32, comm, nullptr) == ncclSuccess, rank, "ncclAllGather");
      Check(ncclReduceScatter(all, sum, count, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, rank,
            "ncclReduceScatter");
      Check(ncclAlltoAll(all, all_out, count, ncclFloat32, comm, nullptr) == ncclSuccess, rank, "ncclAlltoAll");
      Check(ncclGather(send, all_out, count, ncclFloat32, root, comm, nullptr) == ncclSuccess, rank, "ncclGather");
      Check(ncclScatter(all, ring, count, ncclFloat32, root, comm, nullptr) == ncclSuccess, rank, "ncclScatter");
    }
    if (int rc = sync_stream(nullptr); rc != 0) {
      Check(rank == fault_rank, rank, "cuStreamSynchronize");
      std::printf("rank %d CUDA error %d at step %d\n", rank, rc, step);
      std::fflush(stdout);
      faulted = rc;
      return;
    }
    Check(cuMemcpyDtoH_v2(out.data(), d_sum, bytes) == 0 && cuMemcpyDtoH_v2(back.data(), d_ring, bytes) == 0, rank,
          "cuMemcpyDtoH");
    std::printf("step %d rank %d sum %a %016llx ring %016llx\n", step, rank, static_cast<double>(out[0]),
                static_cast<unsigned long long>(Fnv(out.data(), bytes)),
                static_cast<unsigned long long>(Fnv(back.data(), bytes)));
    std::fflush(stdout);
    if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
  };
  for (int step = 1; step <= steps; ++step) run_step(step);
  if (reset && faulted == 0) {
    Check(sync_context() == 0, rank, "cuCtxSynchronize");
    // Looked up as the CUDA runtime looks up what it calls.
    using Reset = int (*)(int);
    auto device_reset = reinterpret_cast<Reset>(dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxReset_v2"));
    Check(device_reset != nullptr && device_reset(0) == 0, rank, "cuDevicePrimaryCtxReset");
    allocate();  // the reset freed every allocation
    for (int step = steps + 1; step <= steps + 2; ++step) run_step(step);
  }
  if (capture) {
    // The graph calls, looked up as the CUDA runtime looks up what it calls.
    auto begin_capture = reinterpret_cast<int (*)(void*, int)>(dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2"));
    auto end_capture = reinterpret_cast<int (*)(void*, void**)>(dlsym(RTLD_DEFAULT, "cuStreamEndCapture"));
    auto instantiate = reinterpret_cast<int (*)(void**, void*, unsigned long long)>(
        dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags"));
    auto launch = reinterpret_cast<int (*)(void*, void*)>(dlsym(RTLD_DEFAULT, "cuGraphLaunch"));
    Check(begin_capture != nullptr && end_capture != nullptr && instantiate != nullptr && launch != nullptr, rank,
          "dlsym of the graph functions");
    void* stream = nullptr;
    Check(cuStreamCreate(&stream, 1) == 0, rank, "cuStreamCreate");
    Check(begin_capture(stream, 0) == 0, rank, "cuStreamBeginCapture");
    Check(ncclAllReduce(send, sum, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(stream)) ==
              ncclSuccess,
          rank, "ncclAllReduce (captured)");
    void* graph = nullptr;
    Check(end_capture(stream, &graph) == 0, rank, "cuStreamEndCapture");
    std::printf("rank %d captured nodes %d\n", rank, cuda_host_graph_nodes(graph));
    std::fflush(stdout);
    if (launches > 0) {
      void* exec = nullptr;
      Check(instantiate(&exec, graph, 0) == 0, rank, "cuGraphInstantiateWithFlags");
      const int mine = rank == skip_rank ? launches - 1 : launches;
      for (int i = 0; i < mine; ++i) Check(launch(exec, stream) == 0, rank, "cuGraphLaunch");
      Check(sync_stream(stream) == 0, rank, "cuStreamSynchronize");
      std::printf("rank %d launched the graph %d times\n", rank, mine);
      std::fflush(stdout);
    }
    cuStreamDestroy_v2(stream);
  }
  if (counters) {
    int kernels = 0, copies = 0;
    cuda_host_counters(&kernels, &copies);
    std::printf("rank %d fingerprint kernels %d device-to-host copies %d\n", rank, kernels, copies);
    int stale = 0, dead = 0;
    cuda_host_teardown_counters(&stale, &dead);
    std::printf("rank %d stale launches %d dead queries %d\n", rank, stale, dead);
    std::printf("rank %d page-locked allocations %d\n", rank, cuda_host_page_locked_allocations());
    std::fflush(stdout);
  }
  cuMemFree_v2(d_send);
  cuMemFree_v2(d_sum);
  cuMemFree_v2(d_ring);
  if (collectives) {
    cuMemFree_v2(d_all);
    cuMemFree_v2(d_all_out);
  }
  ncclCommDestroy(comm);
  MPI_Finalize();
  return faulted != 0 ? 3 : 0;
}
