// dlsym_hook.h: the preload's dlsym.
//
// The CUDA runtime, linked statically into nvcc-built programs and into NCCL,
// opens libcuda.so.1 and looks the driver up with dlsym on that handle, which no
// preloaded definition of a driver function can interpose. So the preload
// defines dlsym: names of wrapped driver functions are answered with wrappers
// (cuda_hook.h), every other lookup goes to the C library's dlsym unchanged.
// The entry point (dlsym_trampoline.S) asks the C++ side for a replacement and
// otherwise jumps, not calls, to the C library's dlsym, with the caller's
// registers and return address as they were: dlsym resolves RTLD_NEXT, and
// reports errors, relative to the object that called it, and that must stay
// the application's, not the preload's.
//
// Built on x86-64 and AArch64 with the CUDA parts (REPLAY_HAVE_DLSYM_HOOK);
// elsewhere the preload leaves dlsym alone and records no CUDA stream ordering.
//
// Thread safety: may be called from any thread, at any time after the preload
// is mapped: even before its constructors have run, and during a sanitizer
// runtime's own start-up.
#pragma once

namespace replay::interpose {

// The C library's dlsym. The preload's own lookups of driver functions use it:
// they must get the real functions, so that the preload's CUDA calls are never
// recorded as the application's.
void* RealDlsym(void* handle, const char* name);

}  // namespace replay::interpose
