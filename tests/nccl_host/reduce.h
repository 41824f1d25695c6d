// reduce.h: how the host NCCL stand-in reduces each NCCL datatype with MPI.
//
// Built-in sum, prod, max and min on integer, float32 and float64 data map to
// MPI's predefined operators; float16, bfloat16 and the float8 types use MPI user
// operators that widen to float and round back each step (host_float.h).
// ncclAvg and premultiplied sums follow NCCL: on floating-point types the input is
// premultiplied (by 1/nranks for ncclAvg) and then summed; on integer types ncclAvg
// sums and divides the result by nranks (truncating).
//
// The user operators are created on first use and shared by every communicator.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <cstddef>

#include "nccl_host.h"

namespace nccl_host {

// The MPI side of one reduction, resolved when the call is posted.
struct Reduction {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  bool premultiply = false;
  unsigned char scalar[8] = {};  // a value of the call's datatype
  int divide_by = 1;             // > 1: integer average, applied to the result
};

// Whether `op` may reduce `type` on `comm` (a built-in operator, or a live
// premultiplied sum created on `comm` for `type`). Fails with ncclInvalidArgument.
ncclResult_t CheckRedOp(const ncclComm* comm, ncclDataType_t type, ncclRedOp_t op, const char* function);

// Resolves a checked `op`. A device-resident premultiply scalar is read now.
Reduction Resolve(const ncclComm* comm, ncclDataType_t type, ncclRedOp_t op);

// data[i] *= scalar, in `type`'s arithmetic.
void Premultiply(void* data, size_t count, ncclDataType_t type, const unsigned char* scalar);

// data[i] /= divisor, for integer types.
void Divide(void* data, size_t count, ncclDataType_t type, int divisor);

}  // namespace nccl_host
