// cuda_imports.h: driver calls of programs and modules linked against libcuda.
//
// An object linked with -lcuda (a program using the driver API, a Python
// extension module such as a Triton kernel launcher) calls the driver through
// its own global offset table, which the dynamic linker filled: neither dlsym
// nor cuGetProcAddress is asked, so cuda_hook.h never sees those calls. Here
// the table entries (jump slots and GOT entries) of the functions cuda_api.def
// wraps are pointed at their wrappers:
//   - in every object loaded when the preload starts;
//   - in an object loaded later, when dlsym is first called on its handle
//     (Python imports an extension module by dlopen, then dlsym of its
//     PyInit_ function; ctypes looks each function up the same way), and in
//     the objects it was loaded with (its DT_NEEDED, transitively).
// An object is patched only once the dynamic linker is done with it, and an
// entry in read-only memory (RELRO) is made writable for the store and put
// back as it was. Nothing else in the object changes: other imports, its own
// definitions, libcuda itself. REPLAY_CUDA_LINKED=0 turns this off.
#pragma once

namespace replay::interpose::cuda {

// Patches every object loaded now, then lets PatchObjectOf work. From the
// preload's constructor, once.
void PatchLinkedObjects();

// dlsym was called on `handle` (neither RTLD_DEFAULT nor RTLD_NEXT): patches
// the object behind it and those loaded with it, unless done before. Cheap
// when nothing is new; does nothing before PatchLinkedObjects.
void PatchObjectOf(void* handle) noexcept;

}  // namespace replay::interpose::cuda
