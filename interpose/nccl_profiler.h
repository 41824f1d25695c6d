// nccl_profiler.h: the preload as NCCL's profiler plugin, which records NCCL
// however it is linked.
//
// An NCCL linked into a framework (PyTorch 2.11 carries NCCL 2.28 inside
// libtorch_cuda.so) exports no function the preload could interpose, but it
// loads the profiler plugin NCCL_PROFILER_PLUGIN names and tells it of every
// communicator and operation (nccl_profiler_abi.h). The preload exports
// ncclProfiler_v5 and ncclProfiler_v6; `replay record` points
// NCCL_PROFILER_PLUGIN at it. From NCCL's events it records what the API
// interposer (nccl_record.h) records of a dynamically loaded NCCL:
//   - a communicator when NCCL initialises it: an identity from NCCL's
//     commHash (equal on every member), its size, this rank, its device and
//     name; when none of a launcher or MPI said which rank the process is,
//     the first (or largest) communicator does; its end when NCCL frees it;
//   - each collective and each send or receive once NCCL has launched its
//     kernel: `op` with the application's count, type and stream, the root or
//     peer and the buffers, the communicator's sequence number (per peer for
//     point-to-point) and the application's group; then `ret`;
//   - its completion, once ncclGroupEnd has returned, when its stream reaches
//     a CUDA event the recorder places there, with fingerprints of what it
//     received and, out of place, of what it sent (host buffers: at once);
//   - the application's groups (ncclGroupStart ... ncclGroupEnd with
//     operations in them);
//   - NCCL's kernel launches, counted on their stream; the other CUDA calls
//     NCCL makes while it launches a group's work are its own and are not
//     written.
// What NCCL does not tell its profiler is not recorded: the reduction
// operator, what an in-place operation sent, and collectives on one-rank
// communicators (NCCL runs them locally, without events).
//
// An NCCL whose functions the preload interposes (a libnccl.so.2 the program
// loads) is left to the API interposer: the plugin records nothing of its
// communicators, so nothing is recorded twice; the info event
// nccl.recorded_by says which of the two recorded a rank. The plugin NCCL
// would have loaded otherwise (REPLAY_NCCL_PROFILER_PLUGIN, by default
// libnccl-profiler.so where there is one) is loaded by the recorder and gets
// every call it would have got from NCCL, with the events it asked for.
// Inert (REPLAY_DISABLE=1), re-running or not recording, the plugin only
// passes NCCL's calls on to that one.
//
// Thread safety: NCCL calls the plugin from application threads, its own
// threads and CUDA host callbacks, for several communicators at once. Event
// handles stay valid after they are stopped (a child may start after its
// parent stopped): their memory is reused only after many others were.
#pragma once

namespace replay::interpose::nccl_profiler {

// Records that the API interposer recorded an NCCL communicator (once per
// process, as the info event nccl.recorded_by).
void NoteApiPath();

// Whether NCCL has initialised this plugin for a communicator of the process.
bool Loaded();

}  // namespace replay::interpose::nccl_profiler
