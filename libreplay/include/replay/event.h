// event.h: one recorded event, as readers see it.
//
// An Event is the decoded form of one entry of a rank's event stream. The kinds
// and their fields mirror the `Event` union of the trace schema
// (libreplay/src/trace/trace.capnp), where each field's invariant is written;
// the names here are the same in snake_case. Kind bodies are plain structs so
// that the recorder can append them to its ring by copying bytes; variable-length
// parts (lists, text, bytes) live beside them in `list` and `text`.
//
// Lists that must change together: EventKind, the body structs and Event's union
// here; in trace.capnp the kind's record struct (and, for a new kind, the
// EventKind enum and a list in EventBlock); the codec in trace/event_codec.cpp;
// the dump printer in trace/event_format.cpp.
//
// Events are values; a const Event may be read from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace replay {

enum class EventKind : uint16_t {
  kOp = 1,
  kReturn = 2,
  kCompletion = 3,
  kTest = 4,
  kCommCreate = 5,
  kCommFree = 6,
  kGroup = 7,
  kEntropy = 8,
  kSeed = 9,
  kCuda = 10,
  kMark = 11,
  kError = 12,
  kSignal = 13,
  kDrop = 14,
  kInfo = 15,
};
inline constexpr int kEventKindCount = 15;
std::string_view EventKindName(EventKind kind);

// Enumerations share their numbering with trace.capnp; never renumber.
enum class OpKind : uint16_t {
  kOther = 0, kInit, kFinalize, kAbort, kBarrier, kBcast, kReduce, kAllreduce, kGather,
  kGatherv, kAllgather, kAllgatherv, kScatter, kScatterv, kAlltoall, kAlltoallv, kAlltoallw,
  kReduceScatter, kReduceScatterBlock, kScan, kExscan, kNeighborAllgather,
  kNeighborAllgatherv, kNeighborAlltoall, kNeighborAlltoallv, kNeighborAlltoallw, kSend,
  kRecv, kSendrecv, kProbe, kMrecv, kStart, kCancel, kCommCreate, kCommFree, kRma, kWait,
};
inline constexpr int kOpKindCount = 37;
std::string_view OpKindName(OpKind kind);
// Collectives are matched across ranks by (communicator, sequence number).
bool IsCollective(OpKind kind);

enum class DataType : uint8_t {
  kUnknown = 0, kInt8, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64, kFloat16,
  kBfloat16, kFloat32, kFloat64, kFloat128, kComplex64, kComplex128, kByte, kBool, kFp8E4M3,
  kFp8E5M2, kPair, kDerived,
};
inline constexpr int kDataTypeCount = 22;
std::string_view DataTypeName(DataType type);

enum class RedOp : uint8_t {
  kNone = 0, kSum, kProd, kMax, kMin, kAvg, kLand, kLor, kLxor, kBand, kBor, kBxor, kMinloc,
  kMaxloc, kReplace, kCustom,
};
inline constexpr int kRedOpCount = 16;
std::string_view RedOpName(RedOp op);

enum class EntropySource : uint8_t {
  kGetrandom = 0, kGetentropy, kDevUrandom, kDevRandom, kRandomDevice,
  kClockGettime, kGettimeofday, kTime,  // clock readings (the bytes the call wrote)
};
inline constexpr int kEntropySourceCount = 8;
inline bool IsClock(EntropySource s) { return s >= EntropySource::kClockGettime; }
std::string_view EntropySourceName(EntropySource s);

enum class SeedSource : uint8_t {
  kSrand = 0, kSrandom, kRandR, kInitstate, kCurand, kCurandOffset, kOther,
};
inline constexpr int kSeedSourceCount = 7;
std::string_view SeedSourceName(SeedSource s);

enum class CudaOp : uint8_t {
  kStreamCreate = 0, kStreamDestroy, kEventCreate, kEventDestroy, kEventRecord,
  kStreamWaitEvent, kEventSynchronize, kEventQuery, kStreamSynchronize, kStreamQuery,
  kCtxSynchronize, kCaptureBegin, kCaptureEnd, kGraphInstantiate, kGraphLaunch,
  kMemcpyAsync, kMemsetAsync, kMemcpy, kKernels, kSetDevice,
};
inline constexpr int kCudaOpCount = 20;
std::string_view CudaOpName(CudaOp op);

enum class ErrorSource : uint8_t { kMpi = 0, kNccl, kCuda, kRecorder };
inline constexpr int kErrorSourceCount = 4;
std::string_view ErrorSourceName(ErrorSource s);

// Op flags (Event op/ret/completion `flags`).
namespace op_flags {
inline constexpr uint16_t kNonBlocking = 1 << 0;
inline constexpr uint16_t kPersistent = 1 << 1;
inline constexpr uint16_t kInGroup = 1 << 2;       // NCCL group member; enqueued at group end
inline constexpr uint16_t kGraphCaptured = 1 << 3;  // captured into a CUDA graph
inline constexpr uint16_t kInPlace = 1 << 4;
inline constexpr uint16_t kHasSendHash = 1 << 5;
inline constexpr uint16_t kHasRecvHash = 1 << 6;
inline constexpr uint16_t kSynchronous = 1 << 7;    // MPI_Ssend family
inline constexpr uint16_t kReady = 1 << 8;          // MPI_Rsend family
inline constexpr uint16_t kBuffered = 1 << 9;       // MPI_Bsend family
inline constexpr uint16_t kDevice = 1 << 10;        // buffers are device memory
}  // namespace op_flags

// Communicator flags (CommCreate `flags`).
namespace comm_flags {
inline constexpr uint16_t kWorld = 1 << 0;
inline constexpr uint16_t kSelf = 1 << 1;
inline constexpr uint16_t kInter = 1 << 2;
inline constexpr uint16_t kNccl = 1 << 3;
inline constexpr uint16_t kTopology = 1 << 4;  // cartesian / graph / dist-graph
}  // namespace comm_flags

// CUDA events (`cuda`): streams with a fixed meaning, whatever handle the
// program passed for them.
inline constexpr uint64_t kCudaLegacyStream = 0;     // the legacy default stream
inline constexpr uint64_t kCudaPerThreadStream = 2;  // the calling thread's default stream

// CUDA copies (`cuda` memcpy and memcpyAsync `other`): the direction.
namespace cuda_copy {
inline constexpr uint64_t kByAddress = 0;  // cuMemcpy, cuMemcpyAsync: the driver tells by the addresses
inline constexpr uint64_t kHostToDevice = 1;
inline constexpr uint64_t kDeviceToHost = 2;
inline constexpr uint64_t kDeviceToDevice = 3;
}  // namespace cuda_copy

// Peer values besides ranks.
inline constexpr int32_t kAnySource = -1;
inline constexpr int32_t kProcNull = -2;
inline constexpr int32_t kNoPeer = -3;
inline constexpr int32_t kAnyTag = -1;

struct OpEvent {
  uint16_t api;
  OpKind kind;
  uint16_t flags;
  uint64_t comm;
  uint64_t seq;
  uint64_t peer_seq;
  int64_t count;
  DataType dtype;
  RedOp redop;
  uint32_t dtype_size;
  uint64_t dtype_sig;
  int32_t root;
  int32_t peer;
  int32_t tag;
  uint32_t group;
  uint64_t send_buf;
  uint64_t recv_buf;
  uint64_t stream;
  uint64_t request;
  uint64_t bytes;
  uint64_t send_hash;
  uint32_t send_nan;
  uint32_t send_inf;
  // The receiving side, where it differs from the sending one: sendrecv's
  // source and tag; gather/scatter/alltoall receive counts and types.
  int32_t recv_peer;
  int32_t recv_tag;
  int64_t recv_count;
  DataType recv_dtype;
  uint32_t recv_dtype_size;
  // list: v-collectives' counts as passed (see trace.capnp `counts`)
  bool operator==(const OpEvent&) const = default;
};

struct ReturnEvent {
  uint16_t api;
  uint16_t flags;
  int32_t rc;
  uint64_t comm;
  uint64_t seq;
  uint64_t peer_seq;
  uint64_t request;
  uint64_t recv_hash;
  uint32_t recv_nan;
  uint32_t recv_inf;
  int32_t source;
  int32_t tag;
  int64_t recv_count;
  uint64_t payload_hash;
  uint64_t payload_size;
  bool operator==(const ReturnEvent&) const = default;
};

struct CompletionEvent {
  uint64_t request;
  uint16_t api;
  uint16_t flags;
  int32_t rc;
  uint64_t comm;
  uint64_t seq;
  uint64_t peer_seq;
  uint64_t recv_hash;
  uint32_t recv_nan;
  uint32_t recv_inf;
  int32_t source;
  int32_t tag;
  int64_t recv_count;
  uint64_t payload_hash;
  uint64_t payload_size;
  bool cancelled;
  uint64_t send_hash;  // device operations: see trace.capnp
  uint32_t send_nan;
  uint32_t send_inf;
  bool operator==(const CompletionEvent&) const = default;
};

struct TestEvent {
  uint16_t api;
  bool flag;
  int32_t index;
  int32_t source;
  int32_t tag;
  int64_t count;
  uint64_t comm;
  int32_t rc;
  // list: completed indices (Waitsome/Testsome)
  bool operator==(const TestEvent&) const = default;
};

struct CommCreateEvent {
  uint64_t comm;
  uint64_t parent;
  uint16_t api;
  uint16_t flags;
  int32_t size;
  uint64_t parent_seq;
  int64_t color;
  int64_t key;
  int32_t rank;
  int32_t device;
  uint64_t handle;
  uint64_t unique_id;
  // list: members (world ranks in communicator-rank order)
  bool operator==(const CommCreateEvent&) const = default;
};

struct CommFreeEvent {
  uint64_t comm;
  uint16_t api;
  int32_t rc;
  bool operator==(const CommFreeEvent&) const = default;
};

struct GroupEvent {
  bool is_end;
  uint16_t api;
  uint32_t id;
  uint32_t depth;
  int32_t rc;
  bool operator==(const GroupEvent&) const = default;
};

struct EntropyEvent {
  EntropySource source;
  uint32_t flags;
  uint64_t requested;
  int64_t rc;
  // text: the bytes returned
  bool operator==(const EntropyEvent&) const = default;
};

struct SeedEvent {
  SeedSource source;
  uint64_t value;
  uint64_t state;
  bool operator==(const SeedEvent&) const = default;
};

struct CudaEvent {
  CudaOp op;
  int32_t rc;
  int32_t device;
  uint64_t stream;
  uint64_t event;
  uint64_t graph;
  uint64_t other;
  uint64_t count;
  bool operator==(const CudaEvent&) const = default;
};

struct MarkEvent {
  int64_t value;
  // text: the name
  bool operator==(const MarkEvent&) const = default;
};

struct ErrorEvent {
  ErrorSource source;
  int32_t code;
  uint64_t comm;
  // text: the message
  bool operator==(const ErrorEvent&) const = default;
};

struct SignalEvent {
  int32_t signo;
  int32_t code;
  uint64_t address;
  bool fatal;
  bool operator==(const SignalEvent&) const = default;
};

struct DropEvent {
  uint64_t count;
  bool operator==(const DropEvent&) const = default;
};

struct InfoEvent {
  uint32_t key_size;
  // text: key followed by value (key is the first key_size bytes)
  bool operator==(const InfoEvent&) const = default;
};

// Every body is copied by bytes into and out of the recording ring.
#define REPLAY_EVENT_BODIES(X)                                                    \
  X(kOp, OpEvent, op) X(kReturn, ReturnEvent, ret) X(kCompletion, CompletionEvent, \
  completion) X(kTest, TestEvent, test) X(kCommCreate, CommCreateEvent, comm_create) \
  X(kCommFree, CommFreeEvent, comm_free) X(kGroup, GroupEvent, group)               \
  X(kEntropy, EntropyEvent, entropy) X(kSeed, SeedEvent, seed) X(kCuda, CudaEvent, cuda) \
  X(kMark, MarkEvent, mark) X(kError, ErrorEvent, error) X(kSignal, SignalEvent, signal) \
  X(kDrop, DropEvent, drop) X(kInfo, InfoEvent, info)

#define REPLAY_CHECK_POD_(kind, type, field)                     \
  static_assert(std::is_trivially_copyable_v<type> &&            \
                std::is_standard_layout_v<type>, #type " must be copyable as bytes");
REPLAY_EVENT_BODIES(REPLAY_CHECK_POD_)
#undef REPLAY_CHECK_POD_

struct Event {
  uint64_t index = 0;      // per-rank, dense from 0 in append order
  int64_t time_ns = 0;     // since the rank header's startMonotonicNs
  uint32_t thread = 0;     // per-rank thread number
  uint64_t call_site = 0;  // return address into the caller; 0 unknown
  EventKind kind = EventKind::kMark;
  union {
#define REPLAY_UNION_MEMBER_(kind, type, field) type field;
    REPLAY_EVENT_BODIES(REPLAY_UNION_MEMBER_)
#undef REPLAY_UNION_MEMBER_
  };
  std::vector<int64_t> list;  // counts (op), indices (test), members (commCreate)
  std::string text;           // bytes (entropy), name (mark), message (error), key+value (info)

  Event() : mark{} {}

  // Info events: key and value.
  std::string_view info_key() const { return std::string_view(text).substr(0, info.key_size); }
  std::string_view info_value() const { return std::string_view(text).substr(info.key_size); }

  // Builders for tests and tools; the recorder appends bodies directly.
#define REPLAY_MAKER_(kind_, type, field)          \
  static Event Make(const type& body) {            \
    Event e;                                       \
    e.kind = EventKind::kind_;                     \
    e.field = body;                                \
    return e;                                      \
  }
  REPLAY_EVENT_BODIES(REPLAY_MAKER_)
#undef REPLAY_MAKER_

  static Event MakeInfo(std::string_view key, std::string_view value);
  static Event MakeMark(std::string_view name, int64_t value);
};

// Size of a kind's body in bytes; 0 for an unknown kind.
size_t EventBodySize(EventKind kind);

// Field-by-field equality, including list and text (bodies compare by bytes).
bool operator==(const Event& a, const Event& b);

}  // namespace replay
