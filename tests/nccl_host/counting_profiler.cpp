// libnccl-profiler-counting.so: an NCCL profiler plugin (v5 only) that
// stands for one a user runs (NCCL Inspector, say), for
// tests/e2e/nccl_profiler_e2e_test.cpp: it asks for the events a recorder
// does not (proxy operations and kernel channels among them), counts those it
// is given by type, checks that every parent it is handed is one of its own
// handles, and at each finalize writes to $COUNTING_PROFILER_OUT/<pid>:
//   comm <hash> rank <r> of <n> starts <N> stops <N> bad-parents <N> type <t>=<N> ...
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "nccl_profiler_abi.h"

namespace {

namespace abi = replay::nccl_profiler;

struct Context {
  uint64_t hash;
  int rank;
  int nranks;
  std::mutex mu;
  std::set<void*> handles;  // every handle given out, never reused
  std::map<uint64_t, int> starts;
  int stops = 0;
  int bad_parents = 0;
};

struct Handle {
  Context* ctx;
  uint64_t type;
};

ncclResult_t Init(void** context, uint64_t hash, int* mask, const char*, int, int nranks, int rank,
                  abi::DebugLogger) {
  *context = new Context{hash, rank, nranks, {}, {}, {}, 0, 0};
  *mask = abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kColl | abi::kP2p | abi::kProxyOp | abi::kKernelCh;
  return ncclSuccess;
}

ncclResult_t Start(void* context, void** handle, abi::DescrV5* d) {
  auto* ctx = static_cast<Context*>(context);
  auto* h = new Handle{ctx, d->type};
  std::lock_guard<std::mutex> lock(ctx->mu);
  ++ctx->starts[d->type];
  if (d->parent != nullptr && ctx->handles.count(d->parent) == 0) ++ctx->bad_parents;
  ctx->handles.insert(h);
  *handle = h;
  return ncclSuccess;
}

ncclResult_t Stop(void* handle) {
  auto* h = static_cast<Handle*>(handle);
  std::lock_guard<std::mutex> lock(h->ctx->mu);
  ++h->ctx->stops;
  return ncclSuccess;
}

ncclResult_t Record(void*, int, abi::StateArgs*) { return ncclSuccess; }

ncclResult_t Finalize(void* context) {
  auto* ctx = static_cast<Context*>(context);
  const char* dir = std::getenv("COUNTING_PROFILER_OUT");
  if (dir == nullptr) return ncclSuccess;
  std::string path = std::string(dir) + "/" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return ncclSuccess;
  int starts = 0;
  for (const auto& [type, n] : ctx->starts) starts += n;
  std::fprintf(f, "comm %llu rank %d of %d starts %d stops %d bad-parents %d", static_cast<unsigned long long>(ctx->hash),
               ctx->rank, ctx->nranks, starts, ctx->stops, ctx->bad_parents);
  for (const auto& [type, n] : ctx->starts) std::fprintf(f, " type %llu=%d", static_cast<unsigned long long>(type), n);
  std::fprintf(f, "\n");
  std::fclose(f);
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const abi::PluginV5 ncclProfiler_v5 = {"counting", &Init, &Start,
                                                                                       &Stop, &Record, &Finalize};
