// inert.h: whether the preload was told to stay out of the way.
//
// With REPLAY_DISABLE=1 in its environment a process must be as if nothing
// were preloaded: the preload's dlsym answers as the C library's does (no
// wrapped driver function is ever handed out), its file and randomness
// wrappers only forward, no object's imports are patched, nothing is
// buffered, no thread is started and no handler installed, and the NCCL
// profiler plugin it exports only forwards to the plugin the user chose.
// The intercepted entry points still exist (a preloaded library's symbols
// cannot be withdrawn), but each goes straight to the function it stands for.
//
// Thread safety: may be called from any thread at any time, before the
// preload's constructors and during a sanitizer runtime's start-up: it reads
// the environment without allocating or calling anything instrumented.
#pragma once

namespace replay::interpose {

// True when REPLAY_DISABLE=1. Read once; the environment is not read again.
bool Inert() noexcept;

// Whether the CUDA driver's functions are wrapped (dlsym_hook.h, cuda_hook.h,
// cuda_imports.h): not when inert, nor with REPLAY_CUDA_DRIVER=0. Read once.
bool WrapsDriver() noexcept;

}  // namespace replay::interpose
