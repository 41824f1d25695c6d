// nccl_host_check: the host NCCL stand-in's specification, as an MPI program that
// ctest runs under mpirun at 1, 2 and 4 ranks.
//
// Every collective's result is compared, element for element, with the same
// operation computed by MPI on the same data. The data are small integers (and
// quarters of them), exact in every NCCL datatype down to float8, so results do
// not depend on the order in which ranks' contributions are added and a
// comparison can demand equality. Every section runs on every rank; rank 0
// prints one line per section and the exit status says whether all held.

#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "host_float.h"

namespace {

int world_rank = 0;
int world_size = 1;
int failures = 0;
const char* section = "";

void Failure(const char* file, int line, const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: %s:%d: %s [in: %s]\n", world_rank, file, line, what.c_str(), section);
}

#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) Failure(__FILE__, __LINE__, "EXPECT(" #cond ") failed"); \
  } while (0)

#define EXPECT_RESULT(call, expected)                                                                     \
  do {                                                                                                    \
    const ncclResult_t got_ = (call);                                                                     \
    if (got_ != (expected)) {                                                                             \
      Failure(__FILE__, __LINE__,                                                                         \
              std::string(#call) + " returned " + std::to_string(got_) + ", expected " #expected " (" +   \
                  ncclGetLastError(nullptr) + ")");                                                       \
    }                                                                                                     \
  } while (0)

#define NCCL_OK(call) EXPECT_RESULT(call, ncclSuccess)

// Runs one section on every rank; rank 0 reports it.
void Section(const char* spec, const std::function<void()>& body) {
  section = spec;
  const int before = failures;
  body();
  int failed = failures > before ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (world_rank == 0) std::printf("%s %s\n", any ? "FAILED" : "ok    ", spec);
  std::fflush(stdout);
}

// ---- datatypes -------------------------------------------------------------------

struct Type {
  ncclDataType_t nccl;
  const char* name;
  bool is_signed;
  bool is_integer;
};

constexpr Type kTypes[] = {
    {ncclInt8, "int8", true, true},          {ncclUint8, "uint8", false, true},
    {ncclInt32, "int32", true, true},        {ncclUint32, "uint32", false, true},
    {ncclInt64, "int64", true, true},        {ncclUint64, "uint64", false, true},
    {ncclFloat16, "float16", true, false},   {ncclBfloat16, "bfloat16", true, false},
    {ncclFloat32, "float32", true, false},   {ncclFloat64, "float64", true, false},
    {ncclFloat8e4m3, "float8e4m3", true, false}, {ncclFloat8e5m2, "float8e5m2", true, false},
};

size_t Size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

template <typename T>
T Get(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void Put(void* p, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

double Load(ncclDataType_t t, const void* p, size_t i) {
  switch (t) {
    case ncclInt8: return Get<int8_t>(p, i);
    case ncclUint8: return Get<uint8_t>(p, i);
    case ncclInt32: return Get<int32_t>(p, i);
    case ncclUint32: return Get<uint32_t>(p, i);
    case ncclInt64: return static_cast<double>(Get<int64_t>(p, i));
    case ncclUint64: return static_cast<double>(Get<uint64_t>(p, i));
    case ncclFloat16: return nccl_host::Half::Decode(Get<uint16_t>(p, i));
    case ncclBfloat16: return nccl_host::Bf16::Decode(Get<uint16_t>(p, i));
    case ncclFloat32: return Get<float>(p, i);
    case ncclFloat64: return Get<double>(p, i);
    case ncclFloat8e4m3: return nccl_host::Fp8E4M3::Decode(Get<uint8_t>(p, i));
    case ncclFloat8e5m2: return nccl_host::Fp8E5M2::Decode(Get<uint8_t>(p, i));
    default: return std::nan("");
  }
}

void Store(ncclDataType_t t, void* p, size_t i, double v) {
  const auto f = static_cast<float>(v);
  switch (t) {
    case ncclInt8: Put(p, i, static_cast<int8_t>(v)); break;
    case ncclUint8: Put(p, i, static_cast<uint8_t>(v)); break;
    case ncclInt32: Put(p, i, static_cast<int32_t>(v)); break;
    case ncclUint32: Put(p, i, static_cast<uint32_t>(v)); break;
    case ncclInt64: Put(p, i, static_cast<int64_t>(v)); break;
    case ncclUint64: Put(p, i, static_cast<uint64_t>(v)); break;
    case ncclFloat16: Put(p, i, nccl_host::Half::Encode(f)); break;
    case ncclBfloat16: Put(p, i, nccl_host::Bf16::Encode(f)); break;
    case ncclFloat32: Put(p, i, f); break;
    case ncclFloat64: Put(p, i, v); break;
    case ncclFloat8e4m3: Put(p, i, nccl_host::Fp8E4M3::Encode(f)); break;
    case ncclFloat8e5m2: Put(p, i, nccl_host::Fp8E5M2::Encode(f)); break;
    default: break;
  }
}

// Element i of `rank`'s input: small integers, a product of them a power of two.
double Value(const Type& t, ncclRedOp_t op, size_t i, int rank) {
  const auto k = static_cast<int>(i % 1009) + 3 * rank;
  if (op == ncclProd) return t.is_signed ? std::vector<double>{1, 2, -1}[static_cast<size_t>(k % 3)] : 1 + k % 2;
  return t.is_signed ? (k * 7 % 5) - 2 : k * 7 % 5;
}

struct Buffer {
  std::vector<unsigned char> bytes;
  Buffer(ncclDataType_t t, size_t count) : bytes(Size(t) * count, 0xee) {}
  void* data() { return bytes.data(); }
};

MPI_Op MpiOp(ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}

// What NCCL's reduction of `in` over `mpi` gives, computed by MPI in double:
// exact for our data. ncclAvg divides the sum; integer types truncate.
std::vector<double> Reference(const std::vector<double>& in, const Type& t, ncclRedOp_t op, MPI_Comm mpi) {
  std::vector<double> out(in.size());
  MPI_Allreduce(in.data(), out.data(), static_cast<int>(in.size()), MPI_DOUBLE, MpiOp(op), mpi);
  int n = 1;
  MPI_Comm_size(mpi, &n);
  if (op == ncclAvg) {
    for (double& v : out) v = t.is_integer ? std::trunc(v / n) : v / n;
  }
  return out;
}

const char* OpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

// Compares `count` elements of `got` with `want`, reporting the first difference.
void ExpectEqual(const Type& t, const void* got, const std::vector<double>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = Load(t.nccl, got, i);
    if (g != want[i]) {
      Failure(__FILE__, __LINE__,
              what + " " + t.name + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", MPI says " +
                  std::to_string(want[i]));
      return;
    }
  }
}

ncclComm_t MakeWorldComm() {
  ncclUniqueId id;
  if (world_rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, world_size, id, world_rank));
  return comm;
}

constexpr size_t kCount = 1037;
constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

// ---- sections --------------------------------------------------------------------

void AllReduceEveryTypeAndOp(ncclComm_t comm) {
  for (const Type& t : kTypes) {
    for (ncclRedOp_t op : kOps) {
      std::vector<double> in(kCount);
      Buffer send(t.nccl, kCount), recv(t.nccl, kCount), inplace(t.nccl, kCount);
      for (size_t i = 0; i < kCount; ++i) {
        in[i] = Value(t, op, i, world_rank);
        Store(t.nccl, send.data(), i, in[i]);
        Store(t.nccl, inplace.data(), i, in[i]);
      }
      const std::vector<double> want = Reference(in, t, op, MPI_COMM_WORLD);
      NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, t.nccl, op, comm, nullptr));
      ExpectEqual(t, recv.data(), want, std::string("allreduce ") + OpName(op));
      NCCL_OK(ncclAllReduce(inplace.data(), inplace.data(), kCount, t.nccl, op, comm, nullptr));
      ExpectEqual(t, inplace.data(), want, std::string("in-place allreduce ") + OpName(op));
    }
  }
}

void LargeAllReduce(ncclComm_t comm) {
  constexpr size_t n = size_t{1} << 20;  // 4 MiB of float32: MPI's segmented paths
  const Type t = kTypes[8];
  std::vector<double> in(n);
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(in[i] = Value(t, ncclSum, i, world_rank));
  NCCL_OK(ncclAllReduce(data.data(), data.data(), n, ncclFloat32, ncclSum, comm, nullptr));
  ExpectEqual(t, data.data(), Reference(in, t, ncclSum, MPI_COMM_WORLD), "large allreduce");
}

void ReduceAndReduceScatter(ncclComm_t comm) {
  for (const Type& t : kTypes) {
    for (ncclRedOp_t op : {ncclSum, ncclMax, ncclAvg}) {
      const int root = world_size - 1;
      std::vector<double> in(kCount * static_cast<size_t>(world_size));
      Buffer send(t.nccl, in.size()), recv(t.nccl, in.size());
      for (size_t i = 0; i < in.size(); ++i) Store(t.nccl, send.data(), i, in[i] = Value(t, op, i, world_rank));

      // Reduce: the first kCount elements, to the last rank.
      std::vector<double> head(in.begin(), in.begin() + kCount);
      const std::vector<double> reduced = Reference(head, t, op, MPI_COMM_WORLD);
      NCCL_OK(ncclReduce(send.data(), recv.data(), kCount, t.nccl, op, root, comm, nullptr));
      if (world_rank == root) ExpectEqual(t, recv.data(), reduced, std::string("reduce ") + OpName(op));

      // ReduceScatter: rank r gets block r of the reduction of everything.
      const std::vector<double> all = Reference(in, t, op, MPI_COMM_WORLD);
      const std::vector<double> mine(all.begin() + static_cast<std::ptrdiff_t>(kCount) * world_rank,
                                     all.begin() + static_cast<std::ptrdiff_t>(kCount) * (world_rank + 1));
      NCCL_OK(ncclReduceScatter(send.data(), recv.data(), kCount, t.nccl, op, comm, nullptr));
      ExpectEqual(t, recv.data(), mine, std::string("reduce-scatter ") + OpName(op));

      // In place: the output is the rank's own block of the input.
      void* block = send.bytes.data() + Size(t.nccl) * kCount * static_cast<size_t>(world_rank);
      NCCL_OK(ncclReduceScatter(send.data(), block, kCount, t.nccl, op, comm, nullptr));
      ExpectEqual(t, block, mine, std::string("in-place reduce-scatter ") + OpName(op));
    }
  }
}

// Bytes `rank` contributes: distinct per rank and position.
std::vector<unsigned char> Pattern(size_t bytes, int rank, int salt) {
  std::vector<unsigned char> p(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 31 + static_cast<size_t>(rank) * 7 + salt);
  return p;
}

void DataMovement(ncclComm_t comm) {
  const auto n = static_cast<size_t>(world_size);
  const auto me = static_cast<size_t>(world_rank);
  for (ncclDataType_t type : {ncclUint8, ncclInt32, ncclFloat64, ncclBfloat16}) {
    const size_t block = kCount * Size(type);
    const int bytes = static_cast<int>(block);
    for (int root = 0; root < world_size; ++root) {
      // Broadcast and Bcast.
      std::vector<unsigned char> data = Pattern(block, world_rank, 1);
      std::vector<unsigned char> out(block, 0), want = data;
      MPI_Bcast(want.data(), bytes, MPI_BYTE, root, MPI_COMM_WORLD);
      NCCL_OK(ncclBroadcast(data.data(), out.data(), kCount, type, root, comm, nullptr));
      EXPECT(out == want);
      NCCL_OK(ncclBcast(data.data(), kCount, type, root, comm, nullptr));
      EXPECT(data == want);

      // Gather, and in place at the root.
      data = Pattern(block, world_rank, 2);
      std::vector<unsigned char> gathered(block * n, 0), want_gathered(block * n, 0);
      MPI_Gather(data.data(), bytes, MPI_BYTE, want_gathered.data(), bytes, MPI_BYTE, root, MPI_COMM_WORLD);
      NCCL_OK(ncclGather(data.data(), gathered.data(), kCount, type, root, comm, nullptr));
      if (world_rank == root) EXPECT(gathered == want_gathered);
      std::vector<unsigned char> in_place(block * n, 0);
      std::memcpy(in_place.data() + block * me, data.data(), block);
      NCCL_OK(ncclGather(in_place.data() + block * me, in_place.data(), kCount, type, root, comm, nullptr));
      if (world_rank == root) EXPECT(in_place == want_gathered);

      // Scatter, and in place at the root.
      std::vector<unsigned char> whole = Pattern(block * n, world_rank, 3);
      std::vector<unsigned char> part(block, 0), want_part(block, 0);
      MPI_Scatter(whole.data(), bytes, MPI_BYTE, want_part.data(), bytes, MPI_BYTE, root, MPI_COMM_WORLD);
      NCCL_OK(ncclScatter(whole.data(), part.data(), kCount, type, root, comm, nullptr));
      EXPECT(part == want_part);
      void* own = world_rank == root ? whole.data() + block * me : part.data();
      NCCL_OK(ncclScatter(whole.data(), own, kCount, type, root, comm, nullptr));
      EXPECT(std::memcmp(own, want_part.data(), block) == 0);
    }

    // AllGather, and in place.
    std::vector<unsigned char> data = Pattern(block, world_rank, 4);
    std::vector<unsigned char> all(block * n, 0), want_all(block * n, 0);
    MPI_Allgather(data.data(), bytes, MPI_BYTE, want_all.data(), bytes, MPI_BYTE, MPI_COMM_WORLD);
    NCCL_OK(ncclAllGather(data.data(), all.data(), kCount, type, comm, nullptr));
    EXPECT(all == want_all);
    std::vector<unsigned char> in_place(block * n, 0);
    std::memcpy(in_place.data() + block * me, data.data(), block);
    NCCL_OK(ncclAllGather(in_place.data() + block * me, in_place.data(), kCount, type, comm, nullptr));
    EXPECT(in_place == want_all);

    // AlltoAll, and in place.
    std::vector<unsigned char> mixed = Pattern(block * n, world_rank, 5);
    std::vector<unsigned char> swapped(block * n, 0), want_swapped(block * n, 0);
    MPI_Alltoall(mixed.data(), bytes, MPI_BYTE, want_swapped.data(), bytes, MPI_BYTE, MPI_COMM_WORLD);
    NCCL_OK(ncclAlltoAll(mixed.data(), swapped.data(), kCount, type, comm, nullptr));
    EXPECT(swapped == want_swapped);
    NCCL_OK(ncclAlltoAll(mixed.data(), mixed.data(), kCount, type, comm, nullptr));
    EXPECT(mixed == want_swapped);
  }
}

void PreMulSum(ncclComm_t comm) {
  for (const Type& t : kTypes) {
    // Scalars that keep every partial sum exact: 2 and 3 on integers, 1/2 and 1/4
    // on floating point (down to float8). The host one is copied at creation, the
    // device one read at each use.
    const double host_scalar = t.is_integer ? 2.0 : 0.5;
    const double device_value = t.is_integer ? 3.0 : 0.25;
    unsigned char host[8], device[8];
    Store(t.nccl, host, 0, host_scalar);
    Store(t.nccl, device, 0, 1.0);
    ncclRedOp_t host_op, device_op;
    NCCL_OK(ncclRedOpCreatePreMulSum(&host_op, host, t.nccl, ncclScalarHostImmediate, comm));
    NCCL_OK(ncclRedOpCreatePreMulSum(&device_op, device, t.nccl, ncclScalarDevice, comm));
    Store(t.nccl, host, 0, 5.0);             // too late: host scalars are copied
    Store(t.nccl, device, 0, device_value);  // in time: device scalars are read when used

    std::vector<double> in(kCount);
    Buffer send(t.nccl, kCount), recv(t.nccl, kCount);
    for (size_t i = 0; i < kCount; ++i) Store(t.nccl, send.data(), i, in[i] = Value(t, ncclSum, i, world_rank));
    const std::vector<double> sum = Reference(in, t, ncclSum, MPI_COMM_WORLD);
    std::vector<double> want = sum;
    for (double& v : want) v *= host_scalar;
    NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, t.nccl, host_op, comm, nullptr));
    ExpectEqual(t, recv.data(), want, "premulsum (host scalar) allreduce");
    want = sum;
    for (double& v : want) v *= device_value;
    NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, t.nccl, device_op, comm, nullptr));
    ExpectEqual(t, recv.data(), want, "premulsum (device scalar) allreduce");

    const ncclDataType_t other = t.nccl == ncclFloat32 ? ncclFloat64 : ncclFloat32;
    EXPECT_RESULT(ncclAllReduce(send.data(), recv.data(), kCount, other, host_op, comm, nullptr),
                  ncclInvalidArgument);
    NCCL_OK(ncclRedOpDestroy(host_op, comm));
    NCCL_OK(ncclRedOpDestroy(device_op, comm));
    EXPECT_RESULT(ncclRedOpDestroy(host_op, comm), ncclInvalidArgument);
    EXPECT_RESULT(ncclAllReduce(send.data(), recv.data(), kCount, t.nccl, host_op, comm, nullptr),
                  ncclInvalidArgument);
  }
}

void GroupRing(ncclComm_t comm) {
  // 4 MiB messages, far past any eager limit: blocking sends would deadlock.
  constexpr size_t n = size_t{1} << 20;
  const int next = (world_rank + 1) % world_size;
  const int prev = (world_rank + world_size - 1) % world_size;
  std::vector<int32_t> out(n, world_rank), in(n, -1);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclSend(out.data(), n, ncclInt32, next, comm, nullptr));
  NCCL_OK(ncclRecv(in.data(), n, ncclInt32, prev, comm, nullptr));
  NCCL_OK(ncclGroupEnd());
  EXPECT(in == std::vector<int32_t>(n, prev));

  // Every pair at once, sends posted before receives.
  std::vector<std::vector<int32_t>> from(static_cast<size_t>(world_size), std::vector<int32_t>(n / 8, -1));
  std::vector<int32_t> mine(n / 8, world_rank * 10);
  NCCL_OK(ncclGroupStart());
  for (int p = 0; p < world_size; ++p) NCCL_OK(ncclSend(mine.data(), n / 8, ncclInt32, p, comm, nullptr));
  for (int p = 0; p < world_size; ++p) {
    NCCL_OK(ncclRecv(from[static_cast<size_t>(p)].data(), n / 8, ncclInt32, p, comm, nullptr));
  }
  NCCL_OK(ncclGroupEnd());
  for (int p = 0; p < world_size; ++p) EXPECT(from[static_cast<size_t>(p)] == std::vector<int32_t>(n / 8, p * 10));
}

void GroupDefersToOutermostEnd(ncclComm_t comm) {
  std::vector<int32_t> send(kCount, 1), recv(kCount, -7);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, nullptr));
  NCCL_OK(ncclGroupEnd());
  EXPECT(recv == std::vector<int32_t>(kCount, -7));  // not yet
  send.assign(kCount, 2);                             // read when the group runs
  NCCL_OK(ncclGroupEnd());
  EXPECT(recv == std::vector<int32_t>(kCount, 2 * world_size));
}

void GroupAcrossCommunicators(ncclComm_t comm) {
  ncclComm_t half = nullptr;
  NCCL_OK(ncclCommSplit(comm, world_rank % 2, world_rank, &half, nullptr));
  int half_size = 0;
  NCCL_OK(ncclCommCount(half, &half_size));
  int32_t a = world_rank, b = world_rank, sum_all = -1, sum_half = -1;
  int32_t gathered[64] = {};
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(&a, &sum_half, 1, ncclInt32, ncclSum, half, nullptr));
  NCCL_OK(ncclAllGather(&b, gathered, 1, ncclInt32, comm, nullptr));
  NCCL_OK(ncclAllReduce(&a, &sum_all, 1, ncclInt32, ncclSum, comm, nullptr));
  NCCL_OK(ncclGroupEnd());
  int32_t want_half = 0;
  for (int r = world_rank % 2; r < world_size; r += 2) want_half += r;
  EXPECT(sum_half == want_half);
  EXPECT(sum_all == world_size * (world_size - 1) / 2);
  for (int r = 0; r < world_size; ++r) EXPECT(gathered[r] == r);
  NCCL_OK(ncclCommDestroy(half));
}

void GroupErrorsAndSimulation(ncclComm_t comm) {
  EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_RESULT(ncclGroupSimulateEnd(&info), ncclInvalidUsage);

  // A bad call fails at once; the group then fails and none of its calls run.
  std::vector<int32_t> send(kCount, 1), recv(kCount, -7);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, nullptr));
  EXPECT_RESULT(ncclAllReduce(send.data(), recv.data(), kCount, ncclNumTypes, ncclSum, comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT(recv == std::vector<int32_t>(kCount, -7));

  // Simulation estimates and runs nothing.
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, nullptr));
  NCCL_OK(ncclGroupSimulateEnd(&info));
  EXPECT(info.estimatedTime > 0.0f);
  EXPECT(recv == std::vector<int32_t>(kCount, -7));
  ncclSimInfo_t bad = info;
  bad.magic = 0;
  NCCL_OK(ncclGroupStart());
  EXPECT_RESULT(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);

  // The thread is out of the group again: a plain call runs.
  NCCL_OK(ncclAllReduce(send.data(), recv.data(), kCount, ncclInt32, ncclSum, comm, nullptr));
  EXPECT(recv == std::vector<int32_t>(kCount, world_size));
}

void Split(ncclComm_t comm) {
  // By parity, keys reversing the order.
  ncclComm_t parity = nullptr;
  NCCL_OK(ncclCommSplit(comm, world_rank % 2, -world_rank, &parity, nullptr));
  int count = 0, rank = -1;
  NCCL_OK(ncclCommCount(parity, &count));
  NCCL_OK(ncclCommUserRank(parity, &rank));
  MPI_Comm mpi;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &mpi);
  int mpi_size = 0, mpi_rank = 0;
  MPI_Comm_size(mpi, &mpi_size);
  MPI_Comm_rank(mpi, &mpi_rank);
  EXPECT(count == mpi_size);
  EXPECT(rank == mpi_rank);
  const Type t = kTypes[2];
  std::vector<double> in(kCount);
  std::vector<int32_t> data(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<int32_t>(in[i] = Value(t, ncclSum, i, world_rank));
  NCCL_OK(ncclAllReduce(data.data(), data.data(), kCount, ncclInt32, ncclSum, parity, nullptr));
  ExpectEqual(t, data.data(), Reference(in, t, ncclSum, mpi), "allreduce on a split");
  MPI_Comm_free(&mpi);

  // NCCL_SPLIT_NOCOLOR: no communicator. A split of a split works too.
  ncclComm_t some = reinterpret_cast<ncclComm_t>(&count);
  NCCL_OK(ncclCommSplit(parity, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, 0, &some, nullptr));
  EXPECT((some == nullptr) == (rank == 0));
  if (some != nullptr) {
    NCCL_OK(ncclCommCount(some, &count));
    EXPECT(count == mpi_size - 1);
    NCCL_OK(ncclCommDestroy(some));
  }
  EXPECT_RESULT(ncclCommSplit(parity, -5, 0, &some, nullptr), ncclInvalidArgument);
  NCCL_OK(ncclCommDestroy(parity));
}

void Shrink(ncclComm_t comm) {
  int exclude = world_size - 1;
  ncclComm_t smaller = nullptr;
  if (world_size == 1) {
    EXPECT_RESULT(ncclCommShrink(comm, &exclude, 1, &smaller, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
    return;
  }
  if (world_rank == exclude) return;  // the excluded rank is presumed gone and does not call
  NCCL_OK(ncclCommShrink(comm, &exclude, 1, &smaller, nullptr, NCCL_SHRINK_DEFAULT));
  int count = 0, rank = -1;
  NCCL_OK(ncclCommCount(smaller, &count));
  NCCL_OK(ncclCommUserRank(smaller, &rank));
  EXPECT(count == world_size - 1);
  EXPECT(rank == world_rank);
  int32_t one = 1, total = 0;
  NCCL_OK(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, smaller, nullptr));
  EXPECT(total == world_size - 1);
  NCCL_OK(ncclCommDestroy(smaller));
  int bad = world_size;
  EXPECT_RESULT(ncclCommShrink(comm, &bad, 1, &smaller, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommShrink(comm, &exclude, 1, &smaller, nullptr, 99), ncclInvalidArgument);
}

void Creation() {
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  EXPECT(version == 22809);
  ncclUniqueId a, b;
  NCCL_OK(ncclGetUniqueId(&a));
  NCCL_OK(ncclGetUniqueId(&b));
  EXPECT(std::memcmp(&a, &b, sizeof(a)) != 0);

  // Two communicators from two ids, created in the same order everywhere; the
  // second numbers the ranks backwards.
  ncclUniqueId ids[2];
  if (world_rank == 0) {
    ncclGetUniqueId(&ids[0]);
    ncclGetUniqueId(&ids[1]);
  }
  MPI_Bcast(ids, sizeof(ids), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t forward = nullptr, backward = nullptr;
  NCCL_OK(ncclCommInitRank(&forward, world_size, ids[0], world_rank));
  NCCL_OK(ncclCommInitRank(&backward, world_size, ids[1], world_size - 1 - world_rank));
  int rank = -1, count = 0, device = -1;
  NCCL_OK(ncclCommUserRank(backward, &rank));
  NCCL_OK(ncclCommCount(backward, &count));
  NCCL_OK(ncclCommCuDevice(forward, &device));
  EXPECT(rank == world_size - 1 - world_rank);
  EXPECT(count == world_size);
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT(device == (local != nullptr ? std::atoi(local) : 0));
  int32_t r = world_rank, gathered[64] = {};
  NCCL_OK(ncclAllGather(&r, gathered, 1, ncclInt32, backward, nullptr));
  for (int i = 0; i < world_size; ++i) EXPECT(gathered[i] == world_size - 1 - i);
  NCCL_OK(ncclCommFinalize(forward));
  NCCL_OK(ncclCommDestroy(forward));
  NCCL_OK(ncclCommDestroy(backward));

  // Scalable init from several ids; a non-blocking config reports progress once.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t scalable = nullptr;
  EXPECT_RESULT(ncclCommInitRankScalable(&scalable, world_size, world_rank, 2, ids, &config), ncclInProgress);
  ncclResult_t state = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(scalable, &state));
  EXPECT(state == ncclInProgress);
  NCCL_OK(ncclCommGetAsyncError(scalable, &state));
  EXPECT(state == ncclSuccess);
  EXPECT_RESULT(ncclCommFinalize(scalable), ncclInProgress);
  NCCL_OK(ncclCommDestroy(scalable));

  ncclComm_t configured = nullptr;
  config.blocking = NCCL_CONFIG_UNDEF_INT;
  NCCL_OK(ncclCommInitRankConfig(&configured, world_size, ids[0], world_rank, &config));
  NCCL_OK(ncclCommGetAsyncError(configured, &state));
  EXPECT(state == ncclSuccess);
  NCCL_OK(ncclCommDestroy(configured));
  ncclConfig_t garbage = config;
  garbage.magic = 0;
  EXPECT_RESULT(ncclCommInitRankConfig(&configured, world_size, ids[0], world_rank, &garbage), ncclInvalidArgument);

  // One process, one device.
  ncclComm_t single = nullptr;
  const int dev = 0;
  NCCL_OK(ncclCommInitAll(&single, 1, &dev));
  NCCL_OK(ncclCommCount(single, &count));
  EXPECT(count == 1);
  float x = 2.5f, y = 0.0f;
  NCCL_OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, single, nullptr));
  EXPECT(y == 2.5f);
  NCCL_OK(ncclCommDestroy(single));
  ncclComm_t two[2];
  const int devs[2] = {0, 1};
  EXPECT_RESULT(ncclCommInitAll(two, 2, devs), ncclInvalidUsage);
  EXPECT_RESULT(ncclCommInitAll(two, 0, devs), ncclInvalidArgument);
}

void CreationErrors() {
  ncclUniqueId id;
  if (world_rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  EXPECT_RESULT(ncclCommInitRank(&comm, world_size, id, world_size), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommInitRank(nullptr, world_size, id, world_rank), ncclInvalidArgument);
  // More ranks promised than processes came: NCCL would wait forever; the stand-in says so.
  EXPECT_RESULT(ncclCommInitRank(&comm, world_size + 1, id, world_rank), ncclInvalidUsage);

  // Two ranks on one device, as real NCCL refuses them.
  setenv("NCCL_HOST_DEVICE", "0", 1);
  const ncclResult_t dup = ncclCommInitRank(&comm, world_size, id, world_rank);
  unsetenv("NCCL_HOST_DEVICE");
  if (world_size == 1) {
    EXPECT(dup == ncclSuccess);
    if (dup == ncclSuccess) ncclCommDestroy(comm);
  } else {
    EXPECT(dup == ncclInvalidUsage);
    EXPECT(std::strstr(ncclGetLastError(nullptr), "Duplicate GPU") != nullptr);
  }
}

void ArgumentErrors(ncclComm_t comm) {
  std::vector<float> buf(kCount, 1.0f);
  float* b = buf.data();
  EXPECT_RESULT(ncclAllReduce(b, b, kCount, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT(std::strstr(ncclGetLastError(nullptr), "NULL") != nullptr);
  EXPECT_RESULT(ncclAllReduce(b, b, kCount, static_cast<ncclDataType_t>(-1), ncclSum, comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(b, b, kCount, ncclNumTypes, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(b, b, kCount, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps + 7), comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(b, b, kCount, ncclFloat32, static_cast<ncclRedOp_t>(-1), comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(b, b, std::numeric_limits<size_t>::max(), ncclFloat32, ncclSum, comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(b, nullptr, kCount, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_RESULT(ncclReduce(b, b, kCount, ncclFloat32, ncclSum, world_size, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclBroadcast(b, b, kCount, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclBcast(b, kCount, ncclFloat32, world_size, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclGather(b, b, 1, ncclFloat32, world_size, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclScatter(b, b, 1, ncclFloat32, -2, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclSend(b, kCount, ncclFloat32, world_size, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclRecv(b, kCount, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclAllGather(b, b, std::numeric_limits<size_t>::max() / 2, ncclFloat32, comm, nullptr),
                ncclInvalidArgument);
  EXPECT_RESULT(ncclAlltoAll(b, nullptr, 1, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  int value = 0;
  EXPECT_RESULT(ncclCommCount(nullptr, &value), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommCount(comm, nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommUserRank(nullptr, &value), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommCuDevice(nullptr, &value), ncclInvalidArgument);
  ncclResult_t async = ncclInternalError;
  EXPECT_RESULT(ncclCommGetAsyncError(nullptr, &async), ncclInvalidArgument);
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess);
  EXPECT_RESULT(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommFinalize(nullptr), ncclInvalidArgument);
  NCCL_OK(ncclCommDestroy(nullptr));
  NCCL_OK(ncclCommAbort(nullptr));
  EXPECT(std::string(ncclGetErrorString(ncclSuccess)) == "no error");
  EXPECT(std::string(ncclGetErrorString(ncclInvalidArgument)).rfind("invalid argument", 0) == 0);
  EXPECT(std::string(ncclGetErrorString(ncclInvalidUsage)).rfind("invalid usage", 0) == 0);
  EXPECT(std::string(ncclGetErrorString(static_cast<ncclResult_t>(99))) == "unknown result code");
}

void Lifecycle(ncclComm_t comm) {
  ncclComm_t dup = nullptr;
  NCCL_OK(ncclCommSplit(comm, 0, world_rank, &dup, nullptr));
  float x = 1.0f;
  EXPECT_RESULT(ncclCommRevoke(dup, 1), ncclInvalidArgument);
  NCCL_OK(ncclCommRevoke(dup, NCCL_REVOKE_DEFAULT));
  EXPECT_RESULT(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, dup, nullptr), ncclInvalidUsage);
  NCCL_OK(ncclCommAbort(dup));

  NCCL_OK(ncclCommSplit(comm, 0, world_rank, &dup, nullptr));
  NCCL_OK(ncclCommFinalize(dup));
  EXPECT_RESULT(ncclCommFinalize(dup), ncclInvalidUsage);
  EXPECT_RESULT(ncclBcast(&x, 1, ncclFloat32, 0, dup, nullptr), ncclInvalidUsage);
  int count = 0;
  NCCL_OK(ncclCommCount(dup, &count));  // queries still answer
  EXPECT(count == world_size);
  NCCL_OK(ncclCommDestroy(dup));
}

void RegistrationAndMemory(ncclComm_t comm) {
  void* mem = nullptr;
  NCCL_OK(ncclMemAlloc(&mem, 1 << 16));
  EXPECT(mem != nullptr && reinterpret_cast<uintptr_t>(mem) % NCCL_WIN_REQUIRED_ALIGNMENT == 0);
  void* handle = nullptr;
  NCCL_OK(ncclCommRegister(comm, mem, 1 << 16, &handle));
  EXPECT(handle != nullptr);
  ncclWindow_t win = nullptr;
  NCCL_OK(ncclCommWindowRegister(comm, mem, 1 << 16, &win, NCCL_WIN_COLL_SYMMETRIC));
  EXPECT(win != nullptr);
  // Registered buffers work as any other.
  auto* data = static_cast<int32_t*>(mem);
  data[0] = 1;
  NCCL_OK(ncclAllReduce(data, data, 1, ncclInt32, ncclSum, comm, nullptr));
  EXPECT(data[0] == world_size);
  NCCL_OK(ncclCommWindowDeregister(comm, win));
  EXPECT_RESULT(ncclCommWindowDeregister(comm, win), ncclInvalidArgument);
  NCCL_OK(ncclCommDeregister(comm, handle));
  EXPECT_RESULT(ncclCommDeregister(comm, handle), ncclInvalidArgument);
  EXPECT_RESULT(ncclCommRegister(comm, nullptr, 16, &handle), ncclInvalidArgument);
  EXPECT_RESULT(ncclMemAlloc(nullptr, 16), ncclInvalidArgument);
  NCCL_OK(ncclMemFree(mem));
}

void IsTheStandIn() {
  Dl_info info = {};
  EXPECT(dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) != 0);
  EXPECT(info.dli_fname != nullptr && std::strstr(info.dli_fname, "nccl_host/libnccl.so") != nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  Section("the loaded libnccl.so.2 is the host stand-in", IsTheStandIn);
  Section("ids, init by rank, config, scalable and all; ranks, counts and devices", Creation);
  Section("bad creation arguments and duplicate devices fail on every rank alike", CreationErrors);
  ncclComm_t comm = MakeWorldComm();
  Section("allreduce equals MPI for every datatype and sum, prod, max, min, avg, in and out of place",
          [&] { AllReduceEveryTypeAndOp(comm); });
  Section("a 4 MiB allreduce equals MPI", [&] { LargeAllReduce(comm); });
  Section("reduce and reduce-scatter equal MPI, in and out of place", [&] { ReduceAndReduceScatter(comm); });
  Section("broadcast, bcast, gather, scatter, allgather, alltoall equal MPI from every root, in and out of place",
          [&] { DataMovement(comm); });
  Section("premultiplied sums: host scalars copied at creation, device scalars read at use",
          [&] { PreMulSum(comm); });
  Section("a grouped ring and all-pairs exchange of 4 MiB messages do not deadlock", [&] { GroupRing(comm); });
  Section("grouped calls run at the outermost ncclGroupEnd and read their buffers then",
          [&] { GroupDefersToOutermostEnd(comm); });
  Section("a group spans communicators", [&] { GroupAcrossCommunicators(comm); });
  Section("group misuse, a failed call inside a group, and ncclGroupSimulateEnd",
          [&] { GroupErrorsAndSimulation(comm); });
  Section("split by color and key equals MPI_Comm_split; NCCL_SPLIT_NOCOLOR gives NULL", [&] { Split(comm); });
  Section("shrink excludes a rank that does not take part", [&] { Shrink(comm); });
  Section("bad arguments return ncclInvalidArgument and set the last error", [&] { ArgumentErrors(comm); });
  Section("revoked and finalized communicators refuse work", [&] { Lifecycle(comm); });
  Section("registration, windows and ncclMemAlloc", [&] { RegistrationAndMemory(comm); });
  ncclCommDestroy(comm);

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0) std::printf("%s: %d failure(s) at %d rank(s)\n", total ? "FAILED" : "PASSED", total, world_size);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
