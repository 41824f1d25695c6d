// Holds cuda_api.def and cuda_driver.h to the installed toolkit: compiled with
// the preload where cudaTypedefs.h is found, linked into nothing. A wrapped
// signature that does not match its PFN_ typedef in the ABI that matters (the
// number of parameters; pointer, integer or floating type, and size, of each)
// fails the build.

// Declares the typedefs of the older variants too (cuStreamBeginCapture,
// cuGraphInstantiate), which the driver still exports.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cudaTypedefs.h>

#include <cstddef>
#include <type_traits>

#include "cuda_driver.h"

namespace replay::interpose::cuda {
namespace {

template <typename T>
constexpr int ClassOf() {
  if constexpr (std::is_pointer_v<T>) return 1;
  if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) return 2;
  if constexpr (std::is_floating_point_v<T>) return 3;
  return 0;
}

template <typename A, typename B>
constexpr bool kSameAbi = ClassOf<A>() != 0 && ClassOf<A>() == ClassOf<B>() && sizeof(A) == sizeof(B);

template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool SameSignature(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) {
    return false;
  } else {
    return kSameAbi<R1, R2> && (kSameAbi<A1, A2> && ...);
  }
}

#define REPLAY_CUDA_CHECK_(fn, pfn, params)                                                               \
  static_assert(SameSignature(static_cast<CUresult(*) params>(nullptr), static_cast<PFN_##pfn>(nullptr)), \
                #fn " in cuda_api.def does not match PFN_" #pfn " in cudaTypedefs.h");
#define REPLAY_CUDA(fn, op, pfn, procs, names, params, args, roles) REPLAY_CUDA_CHECK_(fn, pfn, params)
#define REPLAY_CUDA_RESOLVE(fn, pfn, procs, names, params, args, roles) REPLAY_CUDA_CHECK_(fn, pfn, params)
#define REPLAY_CUDA_TEARDOWN(fn, pfn, procs, names, params, args, what) REPLAY_CUDA_CHECK_(fn, pfn, params)
#include "cuda_api.def"
#undef REPLAY_CUDA
#undef REPLAY_CUDA_RESOLVE
#undef REPLAY_CUDA_TEARDOWN
#undef REPLAY_CUDA_CHECK_

static_assert(CUDA_SUCCESS == kSuccess);
static_assert(CUDA_ERROR_NOT_READY == kNotReady);
static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == kProcPerThread);
static_assert(sizeof(::CUdeviceptr) == sizeof(CUdeviceptr));
static_assert(offsetof(::CUlaunchConfig, hStream) == offsetof(LaunchConfig, stream));
static_assert(offsetof(::CUDA_GRAPH_INSTANTIATE_PARAMS, flags) == offsetof(GraphInstantiateParams, flags));
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are casts, not constants: their
// values are written beside kStreamLegacy and kStreamPerThread.

}  // namespace
}  // namespace replay::interpose::cuda
