#include "shrink/repro_library.h"

#include <map>
#include <sstream>
#include <vector>

namespace replay::shrink {
namespace {

struct Function {
  const char* name;
  const char* needs;  // names of the functions it calls, space-separated
  const char* code;
};

// In an order where every function comes after those it needs.
const Function kFunctions[] = {
    // MPI.
    {"mpi_check", "", R"C(
/* An error is reported and the rank goes on, as the recorded job did. */
static void mpi_check(int rc, const char *call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fprintf(stderr, "rank %d: %s: %s\n", rank, call, msg);
}
)C"},
    {"buffer", "", R"C(
/* `count` elements of `type`; the values do not matter. */
static void *buffer(int count, MPI_Datatype type) {
  int size = 1;
  MPI_Type_size(type, &size);
  size_t bytes = (size_t)(count > 0 ? count : 0) * (size_t)(size > 0 ? size : 1);
  unsigned char *b = malloc(bytes > 0 ? bytes : 1);
  for (size_t i = 0; i < bytes; ++i) b[i] = (unsigned char)((i * 131 + (size_t)rank) & 0x3f);
  return b;
}
)C"},
    {"keep", "", R"C(
/* What a non-blocking call uses lives until the end. */
static void *kept[4096];
static int nkept;
static void *keep(void *p) {
  if (nkept < (int)(sizeof kept / sizeof kept[0])) kept[nkept++] = p;
  return p;
}
)C"},
    {"comm_size", "", R"C(
static int comm_size(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  return n;
}
)C"},
    {"comm_rank", "", R"C(
static int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
)C"},
    {"displs_of", "", R"C(
/* Displacements of `n` blocks of `counts` one after the other; their total in *total. */
static int *displs_of(const int *counts, int n, int *total) {
  int *d = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  int t = 0;
  for (int i = 0; i < n; ++i) {
    d[i] = t;
    t += counts[i];
  }
  *total = t;
  return d;
}
)C"},
    {"mpi_barrier", "mpi_check", R"C(
static void mpi_barrier(MPI_Comm comm) { mpi_check(MPI_Barrier(comm), "MPI_Barrier"); }
)C"},
    {"mpi_ibarrier", "mpi_check", R"C(
static void mpi_ibarrier(MPI_Comm comm, MPI_Request *req) { mpi_check(MPI_Ibarrier(comm, req), "MPI_Ibarrier"); }
)C"},
    {"mpi_bcast", "mpi_check buffer", R"C(
static void mpi_bcast(int count, MPI_Datatype type, int root, MPI_Comm comm) {
  void *b = buffer(count, type);
  mpi_check(MPI_Bcast(b, count, type, root, comm), "MPI_Bcast");
  free(b);
}
)C"},
    {"mpi_ibcast", "mpi_check buffer keep", R"C(
static void mpi_ibcast(int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  mpi_check(MPI_Ibcast(keep(buffer(count, type)), count, type, root, comm, req), "MPI_Ibcast");
}
)C"},
    {"mpi_reduce", "mpi_check buffer", R"C(
static void mpi_reduce(int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  void *s = buffer(count, type), *r = buffer(count, type);
  mpi_check(MPI_Reduce(s, r, count, type, op, root, comm), "MPI_Reduce");
  free(s);
  free(r);
}
)C"},
    {"mpi_ireduce", "mpi_check buffer keep", R"C(
static void mpi_ireduce(int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count, type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Ireduce(s, r, count, type, op, root, comm, req), "MPI_Ireduce");
}
)C"},
    {"mpi_allreduce", "mpi_check buffer", R"C(
static void mpi_allreduce(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  void *s = buffer(count, type), *r = buffer(count, type);
  mpi_check(MPI_Allreduce(s, r, count, type, op, comm), "MPI_Allreduce");
  free(s);
  free(r);
}
)C"},
    {"mpi_iallreduce", "mpi_check buffer keep", R"C(
static void mpi_iallreduce(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count, type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Iallreduce(s, r, count, type, op, comm, req), "MPI_Iallreduce");
}
)C"},
    {"mpi_scan", "mpi_check buffer", R"C(
static void mpi_scan(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  void *s = buffer(count, type), *r = buffer(count, type);
  mpi_check(MPI_Scan(s, r, count, type, op, comm), "MPI_Scan");
  free(s);
  free(r);
}
)C"},
    {"mpi_iscan", "mpi_check buffer keep", R"C(
static void mpi_iscan(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count, type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Iscan(s, r, count, type, op, comm, req), "MPI_Iscan");
}
)C"},
    {"mpi_exscan", "mpi_check buffer", R"C(
static void mpi_exscan(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  void *s = buffer(count, type), *r = buffer(count, type);
  mpi_check(MPI_Exscan(s, r, count, type, op, comm), "MPI_Exscan");
  free(s);
  free(r);
}
)C"},
    {"mpi_iexscan", "mpi_check buffer keep", R"C(
static void mpi_iexscan(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count, type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Iexscan(s, r, count, type, op, comm, req), "MPI_Iexscan");
}
)C"},
    {"mpi_gather", "mpi_check buffer comm_size", R"C(
static void mpi_gather(int scount, MPI_Datatype type, int rcount, int root, MPI_Comm comm) {
  void *s = buffer(scount, type), *r = buffer(rcount * comm_size(comm), type);
  mpi_check(MPI_Gather(s, scount, type, r, rcount, type, root, comm), "MPI_Gather");
  free(s);
  free(r);
}
)C"},
    {"mpi_igather", "mpi_check buffer keep comm_size", R"C(
static void mpi_igather(int scount, MPI_Datatype type, int rcount, int root, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(scount, type)), *r = keep(buffer(rcount * comm_size(comm), type));
  mpi_check(MPI_Igather(s, scount, type, r, rcount, type, root, comm, req), "MPI_Igather");
}
)C"},
    {"mpi_allgather", "mpi_check buffer comm_size", R"C(
static void mpi_allgather(int scount, MPI_Datatype type, int rcount, MPI_Comm comm) {
  void *s = buffer(scount, type), *r = buffer(rcount * comm_size(comm), type);
  mpi_check(MPI_Allgather(s, scount, type, r, rcount, type, comm), "MPI_Allgather");
  free(s);
  free(r);
}
)C"},
    {"mpi_iallgather", "mpi_check buffer keep comm_size", R"C(
static void mpi_iallgather(int scount, MPI_Datatype type, int rcount, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(scount, type)), *r = keep(buffer(rcount * comm_size(comm), type));
  mpi_check(MPI_Iallgather(s, scount, type, r, rcount, type, comm, req), "MPI_Iallgather");
}
)C"},
    {"mpi_scatter", "mpi_check buffer comm_size", R"C(
static void mpi_scatter(int count, MPI_Datatype type, int root, MPI_Comm comm) {
  void *s = buffer(count * comm_size(comm), type), *r = buffer(count, type);
  mpi_check(MPI_Scatter(s, count, type, r, count, type, root, comm), "MPI_Scatter");
  free(s);
  free(r);
}
)C"},
    {"mpi_iscatter", "mpi_check buffer keep comm_size", R"C(
static void mpi_iscatter(int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count * comm_size(comm), type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Iscatter(s, count, type, r, count, type, root, comm, req), "MPI_Iscatter");
}
)C"},
    {"mpi_alltoall", "mpi_check buffer comm_size", R"C(
static void mpi_alltoall(int count, MPI_Datatype type, MPI_Comm comm) {
  void *s = buffer(count * comm_size(comm), type), *r = buffer(count * comm_size(comm), type);
  mpi_check(MPI_Alltoall(s, count, type, r, count, type, comm), "MPI_Alltoall");
  free(s);
  free(r);
}
)C"},
    {"mpi_ialltoall", "mpi_check buffer keep comm_size", R"C(
static void mpi_ialltoall(int count, MPI_Datatype type, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count * comm_size(comm), type)), *r = keep(buffer(count * comm_size(comm), type));
  mpi_check(MPI_Ialltoall(s, count, type, r, count, type, comm, req), "MPI_Ialltoall");
}
)C"},
    {"mpi_reduce_scatter_block", "mpi_check buffer comm_size", R"C(
static void mpi_reduce_scatter_block(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  void *s = buffer(count * comm_size(comm), type), *r = buffer(count, type);
  mpi_check(MPI_Reduce_scatter_block(s, r, count, type, op, comm), "MPI_Reduce_scatter_block");
  free(s);
  free(r);
}
)C"},
    {"mpi_ireduce_scatter_block", "mpi_check buffer keep comm_size", R"C(
static void mpi_ireduce_scatter_block(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  void *s = keep(buffer(count * comm_size(comm), type)), *r = keep(buffer(count, type));
  mpi_check(MPI_Ireduce_scatter_block(s, r, count, type, op, comm, req), "MPI_Ireduce_scatter_block");
}
)C"},
    {"mpi_gatherv", "mpi_check buffer comm_size displs_of", R"C(
static void mpi_gatherv(int scount, MPI_Datatype type, const int *counts, int root, MPI_Comm comm) {
  int total = 0;
  int *displs = displs_of(counts, comm_size(comm), &total);
  void *s = buffer(scount, type), *r = buffer(total, type);
  mpi_check(MPI_Gatherv(s, scount, type, r, counts, displs, type, root, comm), "MPI_Gatherv");
  free(s);
  free(r);
  free(displs);
}
)C"},
    {"mpi_igatherv", "mpi_check buffer keep comm_size displs_of", R"C(
static void mpi_igatherv(int scount, MPI_Datatype type, const int *counts, int root, MPI_Comm comm, MPI_Request *req) {
  int total = 0;
  int *displs = keep(displs_of(counts, comm_size(comm), &total));
  void *s = keep(buffer(scount, type)), *r = keep(buffer(total, type));
  mpi_check(MPI_Igatherv(s, scount, type, r, counts, displs, type, root, comm, req), "MPI_Igatherv");
}
)C"},
    {"mpi_allgatherv", "mpi_check buffer comm_size displs_of", R"C(
static void mpi_allgatherv(int scount, MPI_Datatype type, const int *counts, MPI_Comm comm) {
  int total = 0;
  int *displs = displs_of(counts, comm_size(comm), &total);
  void *s = buffer(scount, type), *r = buffer(total, type);
  mpi_check(MPI_Allgatherv(s, scount, type, r, counts, displs, type, comm), "MPI_Allgatherv");
  free(s);
  free(r);
  free(displs);
}
)C"},
    {"mpi_iallgatherv", "mpi_check buffer keep comm_size displs_of", R"C(
static void mpi_iallgatherv(int scount, MPI_Datatype type, const int *counts, MPI_Comm comm, MPI_Request *req) {
  int total = 0;
  int *displs = keep(displs_of(counts, comm_size(comm), &total));
  void *s = keep(buffer(scount, type)), *r = keep(buffer(total, type));
  mpi_check(MPI_Iallgatherv(s, scount, type, r, counts, displs, type, comm, req), "MPI_Iallgatherv");
}
)C"},
    {"mpi_scatterv", "mpi_check buffer comm_size displs_of", R"C(
static void mpi_scatterv(const int *counts, MPI_Datatype type, int rcount, int root, MPI_Comm comm) {
  int total = 0;
  int *displs = displs_of(counts, comm_size(comm), &total);
  void *s = buffer(total, type), *r = buffer(rcount, type);
  mpi_check(MPI_Scatterv(s, counts, displs, type, r, rcount, type, root, comm), "MPI_Scatterv");
  free(s);
  free(r);
  free(displs);
}
)C"},
    {"mpi_iscatterv", "mpi_check buffer keep comm_size displs_of", R"C(
static void mpi_iscatterv(const int *counts, MPI_Datatype type, int rcount, int root, MPI_Comm comm, MPI_Request *req) {
  int total = 0;
  int *displs = keep(displs_of(counts, comm_size(comm), &total));
  void *s = keep(buffer(total, type)), *r = keep(buffer(rcount, type));
  mpi_check(MPI_Iscatterv(s, counts, displs, type, r, rcount, type, root, comm, req), "MPI_Iscatterv");
}
)C"},
    {"mpi_reduce_scatter", "mpi_check buffer comm_size comm_rank displs_of", R"C(
static void mpi_reduce_scatter(const int *counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  int total = 0;
  free(displs_of(counts, comm_size(comm), &total));
  void *s = buffer(total, type), *r = buffer(counts[comm_rank(comm)], type);
  mpi_check(MPI_Reduce_scatter(s, r, counts, type, op, comm), "MPI_Reduce_scatter");
  free(s);
  free(r);
}
)C"},
    {"mpi_ireduce_scatter", "mpi_check buffer keep comm_size comm_rank displs_of", R"C(
static void mpi_ireduce_scatter(const int *counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
  int total = 0;
  free(displs_of(counts, comm_size(comm), &total));
  void *s = keep(buffer(total, type)), *r = keep(buffer(counts[comm_rank(comm)], type));
  mpi_check(MPI_Ireduce_scatter(s, r, counts, type, op, comm, req), "MPI_Ireduce_scatter");
}
)C"},
    {"mpi_alltoallv", "mpi_check buffer comm_size displs_of", R"C(
static void mpi_alltoallv(const int *scounts, const int *rcounts, MPI_Datatype type, MPI_Comm comm) {
  int stotal = 0, rtotal = 0;
  int *sdispls = displs_of(scounts, comm_size(comm), &stotal), *rdispls = displs_of(rcounts, comm_size(comm), &rtotal);
  void *s = buffer(stotal, type), *r = buffer(rtotal, type);
  mpi_check(MPI_Alltoallv(s, scounts, sdispls, type, r, rcounts, rdispls, type, comm), "MPI_Alltoallv");
  free(s);
  free(r);
  free(sdispls);
  free(rdispls);
}
)C"},
    {"mpi_ialltoallv", "mpi_check buffer keep comm_size displs_of", R"C(
static void mpi_ialltoallv(const int *scounts, const int *rcounts, MPI_Datatype type, MPI_Comm comm, MPI_Request *req) {
  int stotal = 0, rtotal = 0;
  int *sdispls = keep(displs_of(scounts, comm_size(comm), &stotal));
  int *rdispls = keep(displs_of(rcounts, comm_size(comm), &rtotal));
  void *s = keep(buffer(stotal, type)), *r = keep(buffer(rtotal, type));
  mpi_check(MPI_Ialltoallv(s, scounts, sdispls, type, r, rcounts, rdispls, type, comm, req), "MPI_Ialltoallv");
}
)C"},
    {"mpi_send", "mpi_check buffer", R"C(
static void mpi_send(int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  void *b = buffer(count, type);
  mpi_check(MPI_Send(b, count, type, dest, tag, comm), "MPI_Send");
  free(b);
}
)C"},
    {"mpi_ssend", "mpi_check buffer", R"C(
static void mpi_ssend(int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  void *b = buffer(count, type);
  mpi_check(MPI_Ssend(b, count, type, dest, tag, comm), "MPI_Ssend");
  free(b);
}
)C"},
    {"mpi_isend", "mpi_check buffer keep", R"C(
static void mpi_isend(int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  mpi_check(MPI_Isend(keep(buffer(count, type)), count, type, dest, tag, comm, req), "MPI_Isend");
}
)C"},
    {"mpi_issend", "mpi_check buffer keep", R"C(
static void mpi_issend(int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
  mpi_check(MPI_Issend(keep(buffer(count, type)), count, type, dest, tag, comm, req), "MPI_Issend");
}
)C"},
    {"mpi_recv", "mpi_check buffer", R"C(
static void mpi_recv(int count, MPI_Datatype type, int source, int tag, MPI_Comm comm) {
  void *b = buffer(count, type);
  mpi_check(MPI_Recv(b, count, type, source, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
  free(b);
}
)C"},
    {"mpi_irecv", "mpi_check buffer keep", R"C(
static void mpi_irecv(int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
  mpi_check(MPI_Irecv(keep(buffer(count, type)), count, type, source, tag, comm, req), "MPI_Irecv");
}
)C"},
    {"mpi_sendrecv", "mpi_check buffer", R"C(
static void mpi_sendrecv(int scount, MPI_Datatype stype, int dest, int stag, int rcount, MPI_Datatype rtype, int source,
                         int rtag, MPI_Comm comm) {
  void *s = buffer(scount, stype), *r = buffer(rcount, rtype);
  mpi_check(MPI_Sendrecv(s, scount, stype, dest, stag, r, rcount, rtype, source, rtag, comm, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
  free(s);
  free(r);
}
)C"},

    // CUDA (driver API) and NCCL, on one stream per rank.
    {"cuda_check", "", R"C(
static void cuda_check(CUresult rc, const char *call) {
  if (rc == CUDA_SUCCESS) return;
  fprintf(stderr, "rank %d: %s: CUDA error %d\n", rank, call, (int)rc);
  exit(1);
}
)C"},
    {"nccl_check", "", R"C(
static void nccl_check(ncclResult_t rc, const char *call) {
  if (rc == ncclSuccess) return;
  fprintf(stderr, "rank %d: %s: %s\n", rank, call, ncclGetErrorString(rc));
  exit(1);
}
)C"},
    {"synchronize", "cuda_check", R"C(
/* Device memory used since the last synchronize(). */
static CUdeviceptr held[4096];
static int nheld;

/* Waits for what was enqueued, as the recorded operations were waited for. */
static void synchronize(void) {
  cuda_check(cuStreamSynchronize(stream), "cuStreamSynchronize");
  while (nheld > 0) cuMemFree(held[--nheld]);
}
)C"},
    {"device_buffer", "cuda_check synchronize", R"C(
/* `bytes` bytes of device memory; the values do not matter. */
static void *device_buffer(size_t bytes) {
  CUdeviceptr p;
  cuda_check(cuMemAlloc(&p, bytes > 0 ? bytes : 1), "cuMemAlloc");
  cuda_check(cuMemsetD8Async(p, 0x3c, bytes > 0 ? bytes : 1, stream), "cuMemsetD8Async");
  if (nheld < (int)(sizeof held / sizeof held[0])) held[nheld++] = p;
  return (void *)(uintptr_t)p;
}
)C"},
    {"settle", "synchronize", R"C(
/* Outside a group, each operation is waited for. */
static int group_depth;
static void settle(void) {
  if (group_depth == 0) synchronize();
}
)C"},
    {"nccl_size", "", R"C(
static size_t nccl_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
)C"},
    {"nccl_ranks", "", R"C(
static size_t nccl_ranks(ncclComm_t comm) {
  int n = 1;
  ncclCommCount(comm, &n);
  return (size_t)n;
}
)C"},
    {"group_start", "nccl_check settle", R"C(
static void group_start(void) {
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  ++group_depth;
}
)C"},
    {"group_end", "nccl_check settle", R"C(
static void group_end(void) {
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  if (group_depth > 0) --group_depth;
  settle();
}
)C"},
    {"nccl_allreduce", "nccl_check device_buffer settle nccl_size", R"C(
static void nccl_allreduce(size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  nccl_check(ncclAllReduce(device_buffer(bytes), device_buffer(bytes), count, type, op, comm, stream), "ncclAllReduce");
  settle();
}
)C"},
    {"nccl_broadcast", "nccl_check device_buffer settle nccl_size", R"C(
static void nccl_broadcast(size_t count, ncclDataType_t type, int root, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  nccl_check(ncclBroadcast(device_buffer(bytes), device_buffer(bytes), count, type, root, comm, stream),
             "ncclBroadcast");
  settle();
}
)C"},
    {"nccl_reduce", "nccl_check device_buffer settle nccl_size", R"C(
static void nccl_reduce(size_t count, ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  nccl_check(ncclReduce(device_buffer(bytes), device_buffer(bytes), count, type, op, root, comm, stream), "ncclReduce");
  settle();
}
)C"},
    {"nccl_allgather", "nccl_check device_buffer settle nccl_size nccl_ranks", R"C(
static void nccl_allgather(size_t count, ncclDataType_t type, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  nccl_check(ncclAllGather(device_buffer(bytes), device_buffer(bytes * nccl_ranks(comm)), count, type, comm, stream),
             "ncclAllGather");
  settle();
}
)C"},
    {"nccl_reduce_scatter", "nccl_check device_buffer settle nccl_size nccl_ranks", R"C(
static void nccl_reduce_scatter(size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  void *s = device_buffer(bytes * nccl_ranks(comm)), *r = device_buffer(bytes);
  nccl_check(ncclReduceScatter(s, r, count, type, op, comm, stream), "ncclReduceScatter");
  settle();
}
)C"},
    {"nccl_alltoall", "nccl_check device_buffer settle nccl_size nccl_ranks", R"C(
static void nccl_alltoall(size_t count, ncclDataType_t type, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type) * nccl_ranks(comm);
  nccl_check(ncclAlltoAll(device_buffer(bytes), device_buffer(bytes), count, type, comm, stream), "ncclAlltoAll");
  settle();
}
)C"},
    {"nccl_gather", "nccl_check device_buffer settle nccl_size nccl_ranks", R"C(
static void nccl_gather(size_t count, ncclDataType_t type, int root, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  nccl_check(ncclGather(device_buffer(bytes), device_buffer(bytes * nccl_ranks(comm)), count, type, root, comm, stream),
             "ncclGather");
  settle();
}
)C"},
    {"nccl_scatter", "nccl_check device_buffer settle nccl_size nccl_ranks", R"C(
static void nccl_scatter(size_t count, ncclDataType_t type, int root, ncclComm_t comm) {
  size_t bytes = count * nccl_size(type);
  void *s = device_buffer(bytes * nccl_ranks(comm)), *r = device_buffer(bytes);
  nccl_check(ncclScatter(s, r, count, type, root, comm, stream), "ncclScatter");
  settle();
}
)C"},
    {"nccl_send", "nccl_check device_buffer settle nccl_size", R"C(
static void nccl_send(size_t count, ncclDataType_t type, int peer, ncclComm_t comm) {
  nccl_check(ncclSend(device_buffer(count * nccl_size(type)), count, type, peer, comm, stream), "ncclSend");
  settle();
}
)C"},
    {"nccl_recv", "nccl_check device_buffer settle nccl_size", R"C(
static void nccl_recv(size_t count, ncclDataType_t type, int peer, ncclComm_t comm) {
  nccl_check(ncclRecv(device_buffer(count * nccl_size(type)), count, type, peer, comm, stream), "ncclRecv");
  settle();
}
)C"},
};

}  // namespace

std::string ReproLibrary(const std::set<std::string>& used) {
  std::map<std::string, const Function*> by_name;
  for (const Function& f : kFunctions) by_name[f.name] = &f;
  std::set<std::string> wanted;
  std::vector<std::string> todo(used.begin(), used.end());
  while (!todo.empty()) {
    std::string name = todo.back();
    todo.pop_back();
    auto it = by_name.find(name);
    if (it == by_name.end() || !wanted.insert(name).second) continue;
    std::istringstream needs(it->second->needs);
    for (std::string n; needs >> n;) todo.push_back(n);
  }
  std::string out;
  for (const Function& f : kFunctions) {
    // Each starts on the line after its R"C( for the table's sake.
    if (wanted.count(f.name) != 0) out += std::string(f.code).substr(f.code[0] == '\n' ? 1 : 0) + "\n";
  }
  return out;
}

}  // namespace replay::shrink
