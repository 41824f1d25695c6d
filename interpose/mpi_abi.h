// mpi_abi.h: what the recorder needs of the MPI library, found at run time.
//
// The preload is loaded into every process, MPI or not, so it never links
// against libmpi: the real entry points and predefined handles are looked up
// by name the first time an MPI call is recorded. Built against Open MPI's
// mpi.h; with another MPI in the process, MPI calls pass through unrecorded.
//
// Thread safety: Abi() is safe from any thread; the result is immutable.
#pragma once

#include <atomic>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include "api.h"
#include "replay/event.h"

namespace replay {
class Recorder;
}  // namespace replay

namespace replay::interpose {

using replay::RedOp;

// PMPI functions the recorder itself calls: X(name, (parameter types)).
#define REPLAY_PMPI_USED(X)                                                  \
  X(Comm_rank, (MPI_Comm, int*))                                             \
  X(Comm_size, (MPI_Comm, int*))                                             \
  X(Comm_remote_size, (MPI_Comm, int*))                                      \
  X(Comm_test_inter, (MPI_Comm, int*))                                       \
  X(Comm_group, (MPI_Comm, MPI_Group*))                                      \
  X(Comm_remote_group, (MPI_Comm, MPI_Group*))                               \
  X(Group_size, (MPI_Group, int*))                                           \
  X(Group_translate_ranks, (MPI_Group, int, const int*, MPI_Group, int*))    \
  X(Group_free, (MPI_Group*))                                                \
  X(Type_size, (MPI_Datatype, int*))                                         \
  X(Type_get_extent, (MPI_Datatype, MPI_Aint*, MPI_Aint*))                   \
  X(Type_get_true_extent, (MPI_Datatype, MPI_Aint*, MPI_Aint*))              \
  X(Type_get_envelope, (MPI_Datatype, int*, int*, int*, int*))               \
  X(Type_get_contents, (MPI_Datatype, int, int, int, int*, MPI_Aint*, MPI_Datatype*)) \
  X(Type_get_name, (MPI_Datatype, char*, int*))                              \
  X(Pack_size, (int, MPI_Datatype, MPI_Comm, int*))                          \
  X(Pack, (const void*, int, MPI_Datatype, void*, int, int*, MPI_Comm))      \
  X(Get_count, (const MPI_Status*, MPI_Datatype, int*))                      \
  X(Test_cancelled, (const MPI_Status*, int*))                               \
  X(Initialized, (int*))                                                     \
  X(Finalized, (int*))                                                       \
  X(Get_library_version, (char*, int*))                                      \
  X(Get_version, (int*, int*))                                               \
  X(Query_thread, (int*))                                                    \
  X(Topo_test, (MPI_Comm, int*))                                             \
  X(Cartdim_get, (MPI_Comm, int*))                                           \
  X(Graph_neighbors_count, (MPI_Comm, int, int*))                            \
  X(Dist_graph_neighbors_count, (MPI_Comm, int*, int*, int*))                \
  X(Dist_graph_neighbors, (MPI_Comm, int, int*, int*, int, int*, int*))      \
  X(Error_string, (int, char*, int*))                                        \
  X(Type_free, (MPI_Datatype*))                                              \
  X(Unpack, (const void*, int, int*, void*, int, MPI_Datatype, MPI_Comm))    \
  X(Status_set_elements, (MPI_Status*, MPI_Datatype, int))                   \
  X(Status_set_cancelled, (MPI_Status*, int))                                \
  X(Grequest_start, (MPI_Grequest_query_function*, MPI_Grequest_free_function*, \
                     MPI_Grequest_cancel_function*, void*, MPI_Request*))    \
  X(Grequest_complete, (MPI_Request))

struct MpiAbi {
  bool ok = false;  // Open MPI found and every entry point resolved
#define REPLAY_PMPI_PTR_(name, params) int(*name) params = nullptr;
  REPLAY_PMPI_USED(REPLAY_PMPI_PTR_)
#undef REPLAY_PMPI_PTR_
  MPI_Comm comm_world = nullptr;
  MPI_Comm comm_self = nullptr;
  MPI_Comm comm_null = nullptr;
  MPI_Request request_null = nullptr;
  MPI_Datatype datatype_null = nullptr;
  MPI_Datatype datatype_byte = nullptr;
  MPI_Message message_null = nullptr;
  MPI_Message message_no_proc = nullptr;
  MPI_Group group_null = nullptr;
  MPI_Group group_empty = nullptr;
  MPI_Op op_null = nullptr;
};

// A predefined reduction's handle in this process and what it means.
struct OpHandle {
  void* handle;
  RedOp op;
};
inline constexpr size_t kPredefinedOps = 14;

// What a wrapped call reads of the process's MPI state, together: a call made
// after the program's own work emptied the caches fetches one line for it
// rather than one per variable (bench/README.md "The wrapper with its caches
// emptied").
struct alignas(64) MpiState {
  std::atomic<const MpiAbi*> abi{nullptr};     // Abi(), once resolved
  std::atomic<::replay::Recorder*> recording{nullptr};  // where MPI calls are recorded (mpi_record.cpp)
  std::atomic<bool> world_registered{false};   // WORLD and SELF are in the recorder's table
  // The predefined reductions (OpOf), the common ones first: sum and
  // product on this line.
  OpHandle ops[kPredefinedOps];
};
extern MpiState g_mpi;

// The library's entry points, resolved on first use. The check for "already
// resolved" is inline: every wrapped call asks several times.
const MpiAbi& ResolveAbi();
inline const MpiAbi& Abi() {
  const MpiAbi* a = g_mpi.abi.load(std::memory_order_acquire);
  return __builtin_expect(a != nullptr, 1) ? *a : ResolveAbi();
}

// The MPI functions' ApiIds come first, from 0.
inline constexpr size_t kMpiApiCount = 0
#define REPLAY_MPI(name, ...) +1
#include "mpi_api.def"
#undef REPLAY_MPI
    ;
// Each intercepted function's real one, once looked up (LookUpRealMpi).
extern std::atomic<void*> g_real_mpi[kMpiApiCount];
void* LookUpRealMpi(ApiId api);
// The real function behind intercepted `api` (PMPI_<name>), or null. Inline:
// a wrapper's first step, without a call of its own.
inline void* RealMpi(ApiId api) {
  if (api >= kMpiApiCount) return nullptr;
  void* p = g_real_mpi[api].load(std::memory_order_acquire);
  return __builtin_expect(p != nullptr, 1) ? p : LookUpRealMpi(api);
}

// RedOp for a predefined reduction handle; kCustom for others. The first
// entry, sum, is checked inline once the handles are known (Abi() publishes
// them); LookUpOp resolves them and checks the rest.
RedOp LookUpOp(MPI_Op op);
inline RedOp OpOf(MPI_Op op) {
  if (__builtin_expect(g_mpi.abi.load(std::memory_order_acquire) != nullptr, 1) && op != nullptr &&
      g_mpi.ops[0].handle == static_cast<void*>(op)) {
    return g_mpi.ops[0].op;
  }
  return LookUpOp(op);
}

}  // namespace replay::interpose
