#include "reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "host_float.h"

namespace nccl_host {
namespace {

struct Sum {
  float operator()(float a, float b) const { return a + b; }
};
struct Prod {
  float operator()(float a, float b) const { return a * b; }
};
struct Max {
  float operator()(float a, float b) const { return std::fmax(a, b); }
};
struct Min {
  float operator()(float a, float b) const { return std::fmin(a, b); }
};

// An MPI user function on a narrow format: widen, combine, round back.
template <typename Format, typename Bits, typename Combine>
void NarrowUserFn(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const Bits*>(in);
  auto* b = static_cast<Bits*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Format::Encode(Combine{}(Format::Decode(a[i]), Format::Decode(b[i])));
}

template <typename Format, typename Bits>
constexpr MPI_User_function* kNarrowOps[4] = {
    &NarrowUserFn<Format, Bits, Sum>, &NarrowUserFn<Format, Bits, Prod>,
    &NarrowUserFn<Format, Bits, Max>, &NarrowUserFn<Format, Bits, Min>};

// Index of a narrow type in NarrowMpiOp(), or -1.
int NarrowIndex(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return 0;
    case ncclBfloat16: return 1;
    case ncclFloat8e4m3: return 2;
    case ncclFloat8e5m2: return 3;
    default: return -1;
  }
}

// [narrow type][sum, prod, max, min], created once MPI is up.
MPI_Op NarrowMpiOp(int type_index, int op) {
  static std::once_flag once;
  static MPI_Op ops[4][4];
  std::call_once(once, [] {
    MPI_User_function* const* functions[4] = {kNarrowOps<Half, uint16_t>, kNarrowOps<Bf16, uint16_t>,
                                              kNarrowOps<Fp8E4M3, uint8_t>, kNarrowOps<Fp8E5M2, uint8_t>};
    for (int t = 0; t < 4; ++t) {
      for (int o = 0; o < 4; ++o) PMPI_Op_create(functions[t][o], /*commute=*/1, &ops[t][o]);
    }
  });
  return ops[type_index][op];
}

MPI_Datatype MpiType(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclFloat16:
    case ncclBfloat16: return MPI_UINT16_T;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op PredefinedOp(ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}

bool IsInteger(ncclDataType_t type) { return type <= ncclUint64; }

// Calls f(T{}) with T the C type of a non-narrow `type`, or f(Format{}) for narrow ones.
template <typename F>
void Dispatch(ncclDataType_t type, F&& f) {
  switch (type) {
    case ncclInt8: f(int8_t{}); break;
    case ncclUint8: f(uint8_t{}); break;
    case ncclInt32: f(int32_t{}); break;
    case ncclUint32: f(uint32_t{}); break;
    case ncclInt64: f(int64_t{}); break;
    case ncclUint64: f(uint64_t{}); break;
    case ncclFloat32: f(float{}); break;
    case ncclFloat64: f(double{}); break;
    case ncclFloat16: f(Half{}); break;
    case ncclBfloat16: f(Bf16{}); break;
    case ncclFloat8e4m3: f(Fp8E4M3{}); break;
    case ncclFloat8e5m2: f(Fp8E5M2{}); break;
    default: break;
  }
}

template <typename T>
constexpr bool kIsNarrow = std::is_same_v<T, Half> || std::is_same_v<T, Bf16> ||
                           std::is_same_v<T, Fp8E4M3> || std::is_same_v<T, Fp8E5M2>;

template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, Fp8E4M3> || std::is_same_v<T, Fp8E5M2>, uint8_t,
                                   std::conditional_t<kIsNarrow<T>, uint16_t, T>>;

// Writes 1/n in `type` into `scalar`.
void Reciprocal(ncclDataType_t type, int n, unsigned char* scalar) {
  Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    Storage<T> value;
    if constexpr (kIsNarrow<T>) {
      value = T::Encode(1.0f / static_cast<float>(n));
    } else {
      value = static_cast<T>(T{1} / static_cast<T>(n));
    }
    std::memcpy(scalar, &value, sizeof(value));
  });
}

}  // namespace

ncclResult_t CheckRedOp(const ncclComm* comm, ncclDataType_t type, ncclRedOp_t op, const char* function) {
  const int value = static_cast<int>(op);
  if (value >= 0 && value < ncclNumOps) return ncclSuccess;
  const size_t index = static_cast<size_t>(value) - ncclNumOps;
  if (value < 0 || index >= comm->redops.size() || !comm->redops[index].live) {
    return Fail(ncclInvalidArgument, "%s: invalid reduction operation %d", function, value);
  }
  if (comm->redops[index].type != type) {
    return Fail(ncclInvalidArgument, "%s: reduction operation %d was created for datatype %d, not %d",
                function, value, static_cast<int>(comm->redops[index].type), static_cast<int>(type));
  }
  return ncclSuccess;
}

Reduction Resolve(const ncclComm* comm, ncclDataType_t type, ncclRedOp_t op) {
  Reduction r;
  r.type = MpiType(type);
  ncclRedOp_t base = op;
  if (static_cast<int>(op) >= ncclNumOps) {
    const PreMulSum& pre = comm->redops[static_cast<size_t>(op) - ncclNumOps];
    r.premultiply = true;
    std::memcpy(r.scalar, pre.residence == ncclScalarDevice ? pre.pointer : pre.value, TypeSize(type));
    base = ncclSum;
  } else if (op == ncclAvg) {
    base = ncclSum;
    if (IsInteger(type)) {
      r.divide_by = comm->size;
    } else {
      r.premultiply = true;
      Reciprocal(type, comm->size, r.scalar);
    }
  }
  const int narrow = NarrowIndex(type);
  r.op = narrow < 0 ? PredefinedOp(base) : NarrowMpiOp(narrow, static_cast<int>(base));
  return r;
}

void Premultiply(void* data, size_t count, ncclDataType_t type, const unsigned char* scalar) {
  Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    using S = Storage<T>;
    S s;
    std::memcpy(&s, scalar, sizeof(s));
    auto* x = static_cast<S*>(data);
    for (size_t i = 0; i < count; ++i) {
      if constexpr (kIsNarrow<T>) {
        x[i] = T::Encode(T::Decode(x[i]) * T::Decode(s));
      } else {
        x[i] = static_cast<S>(x[i] * s);
      }
    }
  });
}

void Divide(void* data, size_t count, ncclDataType_t type, int divisor) {
  Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      auto* x = static_cast<T*>(data);
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(x[i] / static_cast<T>(divisor));
    }
  });
}

}  // namespace nccl_host
