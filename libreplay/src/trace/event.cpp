#include "replay/event.h"

#include <cstring>

namespace replay {
namespace {

template <size_t N>
std::string_view NameFrom(const std::string_view (&names)[N], size_t i) {
  return i < N ? names[i] : std::string_view("unknown");
}

}  // namespace

std::string_view EventKindName(EventKind kind) {
  static constexpr std::string_view kNames[] = {
      "?",     "op",   "ret",  "completion", "test",  "comm_create", "comm_free", "group",
      "entropy", "seed", "cuda", "mark",      "error", "signal",      "drop",      "info"};
  return NameFrom(kNames, static_cast<size_t>(kind));
}

std::string_view OpKindName(OpKind kind) {
  static constexpr std::string_view kNames[] = {
      "other",     "init",       "finalize",   "abort",        "barrier",
      "bcast",     "reduce",     "allreduce",  "gather",       "gatherv",
      "allgather", "allgatherv", "scatter",    "scatterv",     "alltoall",
      "alltoallv", "alltoallw",  "reduce_scatter", "reduce_scatter_block", "scan",
      "exscan",    "neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall",
      "neighbor_alltoallv", "neighbor_alltoallw", "send", "recv", "sendrecv", "probe",
      "mrecv",     "start",      "cancel",     "comm_create",  "comm_free",
      "rma",       "wait"};
  static_assert(std::size(kNames) == kOpKindCount);
  return NameFrom(kNames, static_cast<size_t>(kind));
}

bool IsCollective(OpKind kind) {
  return (kind >= OpKind::kBarrier && kind <= OpKind::kNeighborAlltoallw) ||
         kind == OpKind::kInit || kind == OpKind::kFinalize || kind == OpKind::kCommCreate ||
         kind == OpKind::kCommFree;
}

std::string_view DataTypeName(DataType type) {
  static constexpr std::string_view kNames[] = {
      "unknown", "int8",    "uint8",   "int16",      "uint16",     "int32",   "uint32",
      "int64",   "uint64",  "float16", "bfloat16",   "float32",    "float64", "float128",
      "complex64", "complex128", "byte", "bool", "fp8e4m3", "fp8e5m2", "pair", "derived"};
  static_assert(std::size(kNames) == kDataTypeCount);
  return NameFrom(kNames, static_cast<size_t>(type));
}

std::string_view RedOpName(RedOp op) {
  static constexpr std::string_view kNames[] = {
      "none", "sum", "prod", "max", "min", "avg", "land", "lor",
      "lxor", "band", "bor", "bxor", "minloc", "maxloc", "replace", "custom"};
  static_assert(std::size(kNames) == kRedOpCount);
  return NameFrom(kNames, static_cast<size_t>(op));
}

std::string_view EntropySourceName(EntropySource s) {
  static constexpr std::string_view kNames[] = {"getrandom",     "getentropy",    "/dev/urandom",
                                                "/dev/random",   "random_device", "clock_gettime",
                                                "gettimeofday",  "time",          "getrusage",
                                                "times",         "clock"};
  static_assert(std::size(kNames) == kEntropySourceCount);
  return NameFrom(kNames, static_cast<size_t>(s));
}

std::string_view SeedSourceName(SeedSource s) {
  static constexpr std::string_view kNames[] = {"srand",  "srandom", "rand_r", "initstate",
                                                "curand", "curand_offset", "other"};
  static_assert(std::size(kNames) == kSeedSourceCount);
  return NameFrom(kNames, static_cast<size_t>(s));
}

std::string_view CudaOpName(CudaOp op) {
  static constexpr std::string_view kNames[] = {
      "stream_create",  "stream_destroy",     "event_create",   "event_destroy",
      "event_record",   "stream_wait_event",  "event_synchronize", "event_query",
      "stream_synchronize", "stream_query",   "ctx_synchronize", "capture_begin",
      "capture_end",    "graph_instantiate",  "graph_launch",   "memcpy_async",
      "memset_async",   "memcpy",             "kernels",        "set_device"};
  static_assert(std::size(kNames) == kCudaOpCount);
  return NameFrom(kNames, static_cast<size_t>(op));
}

std::string_view ErrorSourceName(ErrorSource s) {
  static constexpr std::string_view kNames[] = {"mpi", "nccl", "cuda", "recorder"};
  static_assert(std::size(kNames) == kErrorSourceCount);
  return NameFrom(kNames, static_cast<size_t>(s));
}

size_t EventBodySize(EventKind kind) {
  switch (kind) {
#define REPLAY_SIZE_CASE_(kind_, type, field) \
  case EventKind::kind_:                      \
    return sizeof(type);
    REPLAY_EVENT_BODIES(REPLAY_SIZE_CASE_)
#undef REPLAY_SIZE_CASE_
  }
  return 0;
}

bool operator==(const Event& a, const Event& b) {
  if (a.index != b.index || a.time_ns != b.time_ns || a.thread != b.thread ||
      a.call_site != b.call_site || a.kind != b.kind || a.list != b.list || a.text != b.text) {
    return false;
  }
  switch (a.kind) {
#define REPLAY_EQ_CASE_(kind_, type, field) \
  case EventKind::kind_:                    \
    return a.field == b.field;
    REPLAY_EVENT_BODIES(REPLAY_EQ_CASE_)
#undef REPLAY_EQ_CASE_
  }
  return false;
}

Event Event::MakeInfo(std::string_view key, std::string_view value) {
  Event e;
  e.kind = EventKind::kInfo;
  e.info = InfoEvent{static_cast<uint32_t>(key.size())};
  e.text.assign(key);
  e.text.append(value);
  return e;
}

Event Event::MakeMark(std::string_view name, int64_t value) {
  Event e;
  e.kind = EventKind::kMark;
  e.mark = MarkEvent{value};
  e.text.assign(name);
  return e;
}

}  // namespace replay
