// profiler.h: NCCL's profiler plugin, loaded and called by the host NCCL
// stand-in the way NCCL 2.28 does (src/plugin/profiler.cc, plugin_open.cc,
// and where enqueue.cc and group.cc call it), so that a plugin such as
// replay's recorder is exercised end to end on CPUs.
//
// Loading: NCCL_PROFILER_PLUGIN names the plugin ("none": no plugin; a path;
// a library name; or NAME for libnccl-profiler-NAME.so; unset:
// libnccl-profiler.so). NCCL 2.28 takes the first of ncclProfiler_v5 (then
// older versions, which the stand-in does not call) it finds;
// NCCL_HOST_PROFILER_VERSION=6 makes the stand-in prefer ncclProfiler_v6, as
// NCCL 2.29 and later do. init is called for every communicator once it is
// made (with NCCL's hash of its unique id, or of its parent's hash, split
// count and colour), finalize when it is freed. The activation mask init
// returns decides which events are made, as in NCCL.
//
// Events, per thread as in NCCL: an application call appends a task (its
// GroupApi event starts with the first task of the outermost group, then
// CollApi or P2pApi start and stop; AlltoAll, Gather and Scatter append one
// send or receive per peer); the end of the outermost group launches, per
// communicator, one plan: KernelLaunch start and stop on the first task's
// stream, then Coll or P2p start and stop for each task (NCCL's per-function
// sequence number; AllGather and Broadcast counted in bytes of ncclInt8); the
// GroupApi event stops when ncclGroupEnd returns. Collectives on a one-rank
// communicator make no event, as NCCL takes its local path for them.
//
// Thread safety: a thread's group state is its own; loading is once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_host.h"

namespace nccl_host::profiler {

// Calls the plugin's init for a communicator just made (loads the plugin on
// first use); `hash` is NCCL's commHash.
void InitComm(ncclComm* comm, uint64_t hash);
// Calls finalize for a communicator being freed.
void FinalizeComm(ncclComm* comm);

// A task appended by an application call of `func` ("AllReduce", "Send", ...)
// at NCCL group depth `depth` (1 outside any group): starts the group's API
// event if this is its first task, and makes the call's API event. Returns
// the API event's handle (the task's parent), or null.
void* AppendTask(ncclComm* comm, const char* func, size_t count, ncclDataType_t type, int root, void* stream,
                 bool p2p, int depth);

// The start of a group end: every call's own (NCCL's ncclEnqueueCheck ends
// the implicit group it opened), and ncclGroupEnd's.
void GroupEndStart();
// ncclGroupEnd returns.
void GroupEndStop();

// A plan's kernel launch on `stream`: the handle to stop.
void* KernelLaunchStart(ncclComm* comm, void* api, void* stream);
// A launched plan's group event (the v4 Group event), around its tasks'.
void* PlanStart(ncclComm* comm);
// A collective task of a launched plan.
void* CollStart(ncclComm* comm, void* api, void* plan, uint64_t seq, const char* func, const void* send, void* recv,
                size_t count, int root, ncclDataType_t type);
// A send or receive task of a launched plan.
void* P2pStart(ncclComm* comm, void* api, void* plan, const char* func, void* buff, size_t count,
               ncclDataType_t type, int peer);
// Stops an event started above (null: nothing).
void Stop(void* handle);

// NCCL's name of a datatype ("ncclFloat32"; "Unknown" for ncclUint8, as NCCL 2.28 says).
const char* TypeName(ncclDataType_t type);

}  // namespace nccl_host::profiler
