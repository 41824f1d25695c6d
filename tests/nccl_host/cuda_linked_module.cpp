// cuda_linked_module: a shared object linked against libcuda.so.1 (the host
// stand-in), as a Triton kernel launcher or a program using the driver API is:
// it calls the driver through its own GOT and PLT, never through dlsym or
// cuGetProcAddress. cuda_hook_program uses it in its `linked` and `startup`
// ways, for tests/e2e/cuda_hook_e2e_test.cpp.
#include "cuda_hook_api.h"

extern "C" {
#define REPLAY_TEST_DECLARE(field, symbol, params) cuda_test::CUresult symbol params;
REPLAY_TEST_DRIVER_API(REPLAY_TEST_DECLARE)
#undef REPLAY_TEST_DECLARE
}

namespace {

cuda_test::CUresult LaunchThroughPlt(cuda_test::Handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, unsigned shared, cuda_test::Handle stream,
                                     void** params, void** extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void replay_test_linked_api(cuda_test::Api* api) {
#define REPLAY_TEST_ADDRESS(field, symbol, params) api->field = &symbol;
  REPLAY_TEST_DRIVER_API(REPLAY_TEST_ADDRESS)
#undef REPLAY_TEST_ADDRESS
  api->launch_kernel = &LaunchThroughPlt;
}
