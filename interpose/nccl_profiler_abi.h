// nccl_profiler_abi.h: NCCL's profiler plugin interface, versions 5 and 6, as
// the binary interface NCCL calls (its ext-profiler documentation asks plugins
// to carry their own declarations of the versions they implement).
//
// NCCL loads a profiler plugin named by NCCL_PROFILER_PLUGIN (a path, or NAME
// for libnccl-profiler-NAME.so; unset: libnccl-profiler.so), looks up the
// newest ncclProfiler_vN struct it knows (NCCL 2.26 to 2.28: v5; 2.29 and
// later: v6), calls init for every communicator, and start/stop/record for
// events organised as a tree through `parent`:
//
//   GroupApi ─┬─ CollApi ── Coll ─┬─ ProxyOp ── ProxyStep ── NetPlugin
//             │                   └─ KernelCh
//             ├─ P2pApi ── P2p ── (as Coll)
//             └─ KernelLaunch
//   ProxyCtrl (no parent)
//
// The API events are made when the application calls NCCL; Coll and P2p when
// NCCL has launched the kernel that runs them (after the launch, in 2.28); a
// parent may be stopped before its children start, so a handle must stay
// valid after it was stopped. A one-rank communicator's collectives make no
// events at all. Layouts match NCCL's headers field for field; v6 extends v5's
// descriptor union with copy-engine collectives and keeps everything else.
//
// Used by the preload (nccl_profiler.cpp) and by the host NCCL stand-in
// (tests/nccl_host), which calls a plugin as NCCL does.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace replay::nccl_profiler {

// Event types (descriptor `type`, and the bits of the activation mask).
enum : uint64_t {
  kGroup = 1 << 0,         // a kernel plan's group (the v4 event, kept for older plugins)
  kColl = 1 << 1,          // a collective as NCCL runs it
  kP2p = 1 << 2,           // a send or receive as NCCL runs it
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,      // an application's group (implicit around a single call)
  kCollApi = 1 << 9,       // an application's collective call
  kP2pApi = 1 << 10,       // an application's ncclSend / ncclRecv call
  kKernelLaunch = 1 << 11, // NCCL launching its kernel on a stream
  kCeColl = 1 << 12,       // v6: a collective run by the copy engines
  kCeSync = 1 << 13,
  kCeBatch = 1 << 14,
};

// Event states (recordEventState); those the recorder reads.
enum : int {
  kGroupStartApiStop = 23,  // ncclGroupStart returned
  kGroupEndApiStart = 24,   // ncclGroupEnd (or the implicit end of a single call) began
};

using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct DescrV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    struct {
      bool graph_captured;
      int group_depth;  // NCCL's group depth: 1 for the implicit group of a single call
    } group_api;
    struct {
      const char* func;  // "AllReduce", ...
      size_t count;
      const char* datatype;  // "ncclFloat32", ...
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;  // "Send", "Recv"
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct {
      void* stream;
    } kernel_launch;
    struct {
      uint64_t seq;  // per communicator and collective function
      const char* func;
      const void* send;
      void* recv;
      size_t count;  // bytes for AllGather and Broadcast (datatype ncclInt8)
      int root;
      const char* datatype;
      uint8_t channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
      void* parent_group;
    } p2p;
    struct {
      pid_t pid;  // of the process whose event `parent` is
      uint8_t channel;
      int peer;
      int steps;
      int chunk_size;
      int is_send;
    } proxy_op;
    struct {
      int step;
    } proxy_step;
    struct {
      uint8_t channel;
      uint64_t timer;
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

struct DescrV6 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    // v5's, same layout.
    decltype(DescrV5::group_api) group_api;
    decltype(DescrV5::coll_api) coll_api;
    decltype(DescrV5::p2p_api) p2p_api;
    decltype(DescrV5::kernel_launch) kernel_launch;
    decltype(DescrV5::coll) coll;
    decltype(DescrV5::p2p) p2p;
    decltype(DescrV5::proxy_op) proxy_op;
    decltype(DescrV5::proxy_step) proxy_step;
    decltype(DescrV5::kernel_ch) kernel_ch;
    decltype(DescrV5::net_plugin) net_plugin;
    struct {
      uint64_t seq;
      const char* func;
      const void* send;
      void* recv;
      size_t count;
      int root;
      const char* datatype;
      const char* sync_strategy;
      bool intra_batch_sync;
      uint32_t batch_size;
      uint32_t batches;
      uint32_t ce_seq;
      void* stream;
    } ce_coll;
    struct {
      bool complete;
      int nranks;
    } ce_sync;
    struct {
      int ops;
      size_t bytes;
      bool intra_sync;
    } ce_batch;
  };
};

union StateArgs {
  struct {
    size_t size;
  } proxy_step;
  struct {
    int appended;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t timer;
  } kernel_ch;
};

template <typename Descr>
struct Plugin {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name, int nodes,
                       int nranks, int rank, DebugLogger log);
  ncclResult_t (*start)(void* context, void** handle, Descr* descr);
  ncclResult_t (*stop)(void* handle);
  ncclResult_t (*record)(void* handle, int state, StateArgs* args);
  ncclResult_t (*finalize)(void* context);
};
using PluginV5 = Plugin<DescrV5>;
using PluginV6 = Plugin<DescrV6>;

// The symbols a plugin exports them under.
inline constexpr const char* kSymbolV5 = "ncclProfiler_v5";
inline constexpr const char* kSymbolV6 = "ncclProfiler_v6";

}  // namespace replay::nccl_profiler
