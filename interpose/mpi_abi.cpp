#include "mpi_abi.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

namespace replay::interpose {
namespace {

// libmpi may have been loaded privately (RTLD_LOCAL, as some language
// bindings do): then its symbols are only reachable through its handle.
void* LibMpiHandle() {
  static void* handle = [] {
    for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
      if (void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) return h;
    }
    return static_cast<void*>(nullptr);
  }();
  return handle;
}

void* Lookup(const char* symbol) {
  if (void* p = dlsym(RTLD_DEFAULT, symbol)) return p;
  if (void* h = LibMpiHandle()) return dlsym(h, symbol);
  return nullptr;
}

const char* const kMpiNames[] = {
#define REPLAY_MPI(name, ...) #name,
#include "mpi_api.def"
#undef REPLAY_MPI
};
static_assert(sizeof(kMpiNames) / sizeof(kMpiNames[0]) == kMpiApiCount);

struct OpName {
  const char* symbol;
  RedOp op;
};
const OpName kOps[] = {
    {"ompi_mpi_op_sum", RedOp::kSum},       {"ompi_mpi_op_prod", RedOp::kProd},
    {"ompi_mpi_op_max", RedOp::kMax},       {"ompi_mpi_op_min", RedOp::kMin},
    {"ompi_mpi_op_land", RedOp::kLand},     {"ompi_mpi_op_lor", RedOp::kLor},
    {"ompi_mpi_op_lxor", RedOp::kLxor},     {"ompi_mpi_op_band", RedOp::kBand},
    {"ompi_mpi_op_bor", RedOp::kBor},       {"ompi_mpi_op_bxor", RedOp::kBxor},
    {"ompi_mpi_op_minloc", RedOp::kMinloc}, {"ompi_mpi_op_maxloc", RedOp::kMaxloc},
    {"ompi_mpi_op_replace", RedOp::kReplace}, {"ompi_mpi_op_no_op", RedOp::kNone},
};
constexpr size_t kOpCount = sizeof(kOps) / sizeof(kOps[0]);
static_assert(kOpCount == kPredefinedOps);

MpiAbi Resolve() {
  MpiAbi a;
  bool all = true;
#define REPLAY_PMPI_RESOLVE_(name, params)                                          \
  a.name = reinterpret_cast<int(*) params>(Lookup("PMPI_" #name));                  \
  all = all && a.name != nullptr;
  REPLAY_PMPI_USED(REPLAY_PMPI_RESOLVE_)
#undef REPLAY_PMPI_RESOLVE_
  a.comm_world = static_cast<MPI_Comm>(Lookup("ompi_mpi_comm_world"));
  a.comm_self = static_cast<MPI_Comm>(Lookup("ompi_mpi_comm_self"));
  a.comm_null = static_cast<MPI_Comm>(Lookup("ompi_mpi_comm_null"));
  a.request_null = static_cast<MPI_Request>(Lookup("ompi_request_null"));
  a.datatype_null = static_cast<MPI_Datatype>(Lookup("ompi_mpi_datatype_null"));
  a.datatype_byte = static_cast<MPI_Datatype>(Lookup("ompi_mpi_byte"));
  a.message_null = static_cast<MPI_Message>(Lookup("ompi_message_null"));
  a.message_no_proc = static_cast<MPI_Message>(Lookup("ompi_message_no_proc"));
  a.group_null = static_cast<MPI_Group>(Lookup("ompi_mpi_group_null"));
  a.group_empty = static_cast<MPI_Group>(Lookup("ompi_mpi_group_empty"));
  a.op_null = static_cast<MPI_Op>(Lookup("ompi_mpi_op_null"));
  for (size_t i = 0; i < kOpCount; ++i) g_mpi.ops[i] = OpHandle{Lookup(kOps[i].symbol), kOps[i].op};
  a.ok = all && a.comm_world != nullptr && a.comm_null != nullptr && a.request_null != nullptr;
  return a;
}

}  // namespace

MpiState g_mpi;

const MpiAbi& ResolveAbi() {
  static const MpiAbi abi = Resolve();
  g_mpi.abi.store(&abi, std::memory_order_release);
  return abi;
}

std::atomic<void*> g_real_mpi[kMpiApiCount];

void* LookUpRealMpi(ApiId api) {
  if (api >= kMpiApiCount) return nullptr;
  void* p = g_real_mpi[api].load(std::memory_order_acquire);
  if (p != nullptr) return p;
  std::string pname = std::string("P") + kMpiNames[api];
  p = Lookup(pname.c_str());
  if (p == nullptr) p = dlsym(RTLD_NEXT, kMpiNames[api]);
  g_real_mpi[api].store(p, std::memory_order_release);
  return p;
}

RedOp LookUpOp(MPI_Op op) {
  if (op == nullptr) return RedOp::kNone;
  Abi();
  for (size_t i = 0; i < kOpCount; ++i) {
    if (g_mpi.ops[i].handle != nullptr && g_mpi.ops[i].handle == static_cast<void*>(op)) {
      return g_mpi.ops[i].op;
    }
  }
  return RedOp::kCustom;
}

}  // namespace replay::interpose
