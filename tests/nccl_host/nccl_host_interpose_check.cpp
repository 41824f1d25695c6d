// nccl_host_interpose_check: the stand-in can be interposed the way replay's
// preload interposes real NCCL. This program defines ncclAllReduce and
// ncclBroadcast itself (as a preloaded library would), counts the calls, and
// forwards them to pncclAllReduce and pncclBroadcast. It checks that the
// forwarded calls do their work, and that the stand-in's own implementation of
// ncclBcast does not re-enter the public ncclBroadcast (an interposer would see
// one application call twice). Run under mpirun at 2 ranks.

#include <mpi.h>
#include <nccl.h>

#include <cstdio>

namespace {
int allreduce_calls = 0;
int broadcast_calls = 0;
}  // namespace

extern "C" ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  ++allreduce_calls;
  return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

extern "C" ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  ++broadcast_calls;
  return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  int failures = 0;
  if (ncclCommInitRank(&comm, size, id, rank) != ncclSuccess) ++failures;

  int value = rank + 1, sum = 0;
  if (ncclAllReduce(&value, &sum, 1, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) ++failures;
  if (sum != size * (size + 1) / 2 || allreduce_calls != 1) ++failures;

  int from_root = rank == 0 ? 42 : 0, copy = 0;
  if (ncclBroadcast(&from_root, &copy, 1, ncclInt32, 0, comm, nullptr) != ncclSuccess) ++failures;
  if (copy != 42 || broadcast_calls != 1) ++failures;
  if (ncclBcast(&from_root, 1, ncclInt32, 0, comm, nullptr) != ncclSuccess) ++failures;
  if (from_root != 42 || broadcast_calls != 1) ++failures;  // ncclBcast did not come through ncclBroadcast

  if (failures != 0) {
    std::fprintf(stderr, "rank %d: %d failure(s): sum %d, allreduce calls %d, broadcast calls %d\n", rank, failures,
                 sum, allreduce_calls, broadcast_calls);
  }
  ncclCommDestroy(comm);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", total == 0 ? "PASSED" : "FAILED");
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
