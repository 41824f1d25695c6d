// cuda_linked_outer: a shared object that only depends on cuda_linked_module,
// so that opening it loads that module as a dependency; dlsym on its handle
// finds the module's functions. For tests/e2e/cuda_hook_e2e_test.cpp.
extern "C" __attribute__((visibility("default"))) int replay_test_linked_outer() { return 0; }
