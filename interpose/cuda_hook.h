// cuda_hook.h: handing wrapped CUDA driver functions to the application.
//
// nvcc-built programs and NCCL carry the CUDA runtime linked in statically; it
// opens libcuda.so.1 itself and finds the driver's functions through
// dlsym(handle, "cuGetProcAddress_v2") and then cuGetProcAddress. Neither can
// be interposed by a preloaded symbol, so the preload answers both: its dlsym
// (dlsym_hook.h) returns a wrapper for cuGetProcAddress and for every driver
// function of cuda_api.def, and the cuGetProcAddress wrapper replaces what it
// resolves the same way. Everything else resolves as it would without the
// preload.
//
// One name can resolve to several functions (driver versions, the per-thread
// default stream variants, two drivers), so each signature has a few wrapper
// slots, each bound to one real function for the life of the process. When a
// signature's slots are taken the real function is handed out unwrapped (its
// calls are not recorded) and the preload says so once.
//
// Thread safety: both functions may be called from any thread, at any time,
// even before the preload's constructors have run.
#pragma once

#include "cuda_driver.h"

namespace replay::interpose::cuda {

using DlsymFn = void* (*)(void*, const char*);

// dlsym(handle, name) for a wrapped name: the wrapper of the function `real`
// finds there, or null to let the lookup go through unchanged (any other
// name, RTLD_NEXT lookups, nothing found, no free slot).
void* WrapperForSymbol(void* handle, const char* name, DlsymFn real);

// After cuGetProcAddress(symbol, pfn, version, flags) succeeded: replaces
// *pfn by its wrapper when `symbol` is wrapped.
void WrapResolved(const char* symbol, void** pfn, int version, cuuint64_t flags);

// True if calls of the driver function exported as `name` are recorded.
bool Wraps(const char* name);

// For an object linked against libcuda that imports `name` (cuda_imports.h):
// the wrapper bound to `real`, or null when `name` is not wrapped or all its
// slots are bound to other functions.
void* WrapperForImport(const char* name, void* real);

}  // namespace replay::interpose::cuda
