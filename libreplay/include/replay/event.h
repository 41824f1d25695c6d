// event.h: one recorded event, as readers see it.
//
// An Event is the decoded form of one entry of a rank's event stream. The kinds
// and their fields mirror the `Event` union of the trace schema
// (libreplay/src/trace/trace.capnp), where each field's invariant is written;
// the names here are the same in snake_case. Kind bodies are plain structs so
// that the recorder can append them to its ring by copying bytes; variable-length
// parts (lists, text, bytes) live beside them in `list` and `text`.
//
// A field is declared once, in its kind's REPLAY_*_FIELDS list below (the body
// struct, the codec and the JSON form are expanded from it), and in trace.capnp
// (the kind's record, and its member of the `Event` union read from older
// traces). A new kind: EventKind, its list and body here; in trace.capnp the
// EventKind enum, the record and a list in EventBlock; the codec's switch in
// trace/event_codec.cpp; the line printer in trace/event_format.cpp.
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
  kGetrusage, kTimes, kClock,           // CPU-time readings, served as clock readings
};
inline constexpr int kEntropySourceCount = 11;
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
inline constexpr uint16_t kRecvSampled = 1 << 11;   // recv_nan/recv_inf count the fingerprinted sample only
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

// The fields of every kind's body, each once: X(type, member, Schema, "json", role).
// `member` is the body's field, in order; `Schema` its accessor stem in the
// kind's record in trace.capnp (getSchema/setSchema), where its invariant is
// written; "json" its key in EventToJson; `role` how the codec stores it and
// how JSON shows it (FieldRole). The body structs, the codec's reading and
// writing of these fields and EventToJson are expanded from these lists.
// Lists, text and bytes live beside the body, in Event (see each kind).
enum class FieldRole : uint8_t {
  kNum,          // as it is
  kHex,          // JSON: "0x..."
  kHexIfSet,     // JSON: "0x...", only when not 0
  kNumIfSet,     // JSON: only when not 0
  kApi,          // JSON: the function's name
  kName,         // an enumeration; JSON: its name
  kSeq,          // stored relative to the communicator's previous one in the block
  kSendHash,     // stored in the block's fingerprint column when flags say kHasSendHash;
  kSendCount,    //   JSON: shown with it, only then
  kRecvHash,     // the same for kHasRecvHash
  kRecvCount,
  kPayloadHash,  // JSON: only when payload_size is not 0
  kPayloadSize,
  kUnshown,      // not in JSON
};

// Rows that several kinds share. The packed records of format epoch 4 number
// the fields of ops, rets, completions, tests and CUDA calls in their list's
// order: a field is added at the end of a kind's list (REPLAY_OP_FIELDS, ...),
// never to the shared rows here (docs/trace-format.md, "Versions").
#define REPLAY_SENT_FIELDS(X)                                \
  X(uint64_t, send_hash, SendHash, "send_hash", kSendHash)   \
  X(uint32_t, send_nan, SendNan, "send_nan", kSendCount)     \
  X(uint32_t, send_inf, SendInf, "send_inf", kSendCount)
#define REPLAY_ANSWER_FIELDS(X)                              \
  X(uint16_t, api, Api, "api", kApi)                         \
  X(uint16_t, flags, Flags, "flags", kUnshown)               \
  X(int32_t, rc, Rc, "rc", kNum)                             \
  X(uint64_t, comm, Comm, "comm", kHex)                      \
  X(uint64_t, seq, Seq, "seq", kSeq)                         \
  X(uint64_t, peer_seq, PeerSeq, "peer_seq", kNum)
#define REPLAY_RECEIVED_FIELDS(X)                                      \
  X(uint64_t, recv_hash, RecvHash, "recv_hash", kRecvHash)             \
  X(uint32_t, recv_nan, RecvNan, "recv_nan", kRecvCount)               \
  X(uint32_t, recv_inf, RecvInf, "recv_inf", kRecvCount)               \
  X(int32_t, source, Source, "source", kNum)                           \
  X(int32_t, tag, Tag, "tag", kNum)                                    \
  X(int64_t, recv_count, RecvCount, "recv_count", kNum)                \
  X(uint64_t, payload_hash, PayloadHash, "payload_hash", kPayloadHash) \
  X(uint64_t, payload_size, PayloadSize, "payload_size", kPayloadSize)

#define REPLAY_OP_FIELDS(X)                                  \
  X(uint16_t, api, Api, "api", kApi)                         \
  X(OpKind, kind, Kind, "op", kName)                         \
  X(uint16_t, flags, Flags, "flags", kNum)                   \
  X(uint64_t, comm, Comm, "comm", kHex)                      \
  X(uint64_t, seq, Seq, "seq", kSeq)                         \
  X(uint64_t, peer_seq, PeerSeq, "peer_seq", kNum)           \
  X(int64_t, count, Count, "count", kNum)                    \
  X(DataType, dtype, Dtype, "dtype", kName)                  \
  X(RedOp, redop, Redop, "redop", kName)                     \
  X(uint32_t, dtype_size, DtypeSize, "dtype_size", kNum)     \
  X(uint64_t, dtype_sig, DtypeSig, "dtype_sig", kHexIfSet)   \
  X(int32_t, root, Root, "root", kNum)                       \
  X(int32_t, peer, Peer, "peer", kNum)                       \
  X(int32_t, tag, Tag, "tag", kNum)                          \
  X(uint32_t, group, Group, "group", kNumIfSet)              \
  X(uint64_t, send_buf, SendBuf, "send_buf", kHex)           \
  X(uint64_t, recv_buf, RecvBuf, "recv_buf", kHex)           \
  X(uint64_t, stream, Stream, "stream", kHexIfSet)           \
  X(uint64_t, request, Request, "request", kNumIfSet)        \
  X(uint64_t, bytes, Bytes, "bytes", kNum)                   \
  REPLAY_SENT_FIELDS(X)                                      \
  /* The receiving side, where it differs from the sending one: sendrecv's      \
     source and tag; gather/scatter/alltoall receive counts and types. */       \
  X(int32_t, recv_peer, RecvPeer, "recv_peer", kUnshown)     \
  X(int32_t, recv_tag, RecvTag, "recv_tag", kUnshown)        \
  X(int64_t, recv_count, RecvCount, "recv_count", kUnshown)  \
  X(DataType, recv_dtype, RecvDtype, "recv_dtype", kUnshown) \
  X(uint32_t, recv_dtype_size, RecvDtypeSize, "recv_dtype_size", kUnshown)
// list: v-collectives' counts as passed (trace.capnp `counts`)

#define REPLAY_RETURN_FIELDS(X)                        \
  REPLAY_ANSWER_FIELDS(X)                              \
  X(uint64_t, request, Request, "request", kNumIfSet)  \
  REPLAY_RECEIVED_FIELDS(X)

#define REPLAY_COMPLETION_FIELDS(X)                    \
  X(uint64_t, request, Request, "request", kNum)       \
  REPLAY_ANSWER_FIELDS(X)                              \
  REPLAY_RECEIVED_FIELDS(X)                            \
  X(bool, cancelled, Cancelled, "cancelled", kNum)     \
  /* Device operations: see trace.capnp. */            \
  REPLAY_SENT_FIELDS(X)

#define REPLAY_TEST_FIELDS(X)               \
  X(uint16_t, api, Api, "api", kApi)        \
  X(bool, flag, Flag, "flag", kNum)         \
  X(int32_t, index, Index, "index_out", kNum) \
  X(int32_t, source, Source, "source", kNum) \
  X(int32_t, tag, Tag, "tag", kNum)         \
  X(int64_t, count, Count, "count", kNum)   \
  X(uint64_t, comm, Comm, "comm", kHex)     \
  X(int32_t, rc, Rc, "rc", kNum)
// list: completed indices (Waitsome/Testsome)

#define REPLAY_COMM_CREATE_FIELDS(X)                         \
  X(uint64_t, comm, Comm, "comm", kHex)                      \
  X(uint64_t, parent, Parent, "parent", kHex)                \
  X(uint16_t, api, Api, "api", kApi)                         \
  X(uint16_t, flags, Flags, "flags", kNum)                   \
  X(int32_t, size, Size, "size", kNum)                       \
  X(uint64_t, parent_seq, ParentSeq, "parent_seq", kNum)     \
  X(int64_t, color, Color, "color", kNum)                    \
  X(int64_t, key, Key, "key", kNum)                          \
  X(int32_t, rank, Rank, "rank", kNum)                       \
  X(int32_t, device, Device, "device", kNum)                 \
  X(uint64_t, handle, Handle, "handle", kHex)                \
  X(uint64_t, unique_id, UniqueId, "unique_id", kHexIfSet)
// list: members (world ranks in communicator-rank order)

#define REPLAY_COMM_FREE_FIELDS(X)      \
  X(uint64_t, comm, Comm, "comm", kHex) \
  X(uint16_t, api, Api, "api", kApi)    \
  X(int32_t, rc, Rc, "rc", kNum)

#define REPLAY_GROUP_FIELDS(X)             \
  X(bool, is_end, IsEnd, "is_end", kNum)   \
  X(uint16_t, api, Api, "api", kApi)       \
  X(uint32_t, id, Id, "id", kNum)          \
  X(uint32_t, depth, Depth, "depth", kNum) \
  X(int32_t, rc, Rc, "rc", kNum)

#define REPLAY_ENTROPY_FIELDS(X)                        \
  X(EntropySource, source, Source, "source", kName)     \
  X(uint32_t, flags, Flags, "flags", kNum)              \
  X(uint64_t, requested, Requested, "requested", kNum)  \
  X(int64_t, rc, Rc, "rc", kNum)
// text: the bytes returned

#define REPLAY_SEED_FIELDS(X)                     \
  X(SeedSource, source, Source, "source", kName)  \
  X(uint64_t, value, Value, "value", kNum)        \
  X(uint64_t, state, State, "state", kHex)

#define REPLAY_CUDA_FIELDS(X)                  \
  X(CudaOp, op, Op, "op", kName)               \
  X(int32_t, rc, Rc, "rc", kNum)               \
  X(int32_t, device, Device, "device", kNum)   \
  X(uint64_t, stream, Stream, "stream", kHex)  \
  X(uint64_t, event, Event, "event", kHex)     \
  X(uint64_t, graph, Graph, "graph", kHex)     \
  X(uint64_t, other, Other, "other", kHex)     \
  X(uint64_t, count, Count, "count", kNum)

#define REPLAY_MARK_FIELDS(X) X(int64_t, value, Value, "value", kNum)
// text: the name

#define REPLAY_ERROR_FIELDS(X)                      \
  X(ErrorSource, source, Source, "source", kName)   \
  X(int32_t, code, Code, "code", kNum)              \
  X(uint64_t, comm, Comm, "comm", kHex)
// text: the message

#define REPLAY_SIGNAL_FIELDS(X)                  \
  X(int32_t, signo, Signo, "signo", kNum)        \
  X(int32_t, code, Code, "code", kNum)           \
  X(uint64_t, address, Address, "address", kHex) \
  X(bool, fatal, Fatal, "fatal", kNum)

#define REPLAY_DROP_FIELDS(X) X(uint64_t, count, Count, "count", kNum)

#define REPLAY_FIELD_MEMBER_(type, member, schema, json, role) type member;
#define REPLAY_BODY_STRUCT_(name, fields)                \
  struct name {                                          \
    fields(REPLAY_FIELD_MEMBER_)                         \
    bool operator==(const name&) const = default;        \
  };
REPLAY_BODY_STRUCT_(OpEvent, REPLAY_OP_FIELDS)
REPLAY_BODY_STRUCT_(ReturnEvent, REPLAY_RETURN_FIELDS)
REPLAY_BODY_STRUCT_(CompletionEvent, REPLAY_COMPLETION_FIELDS)
REPLAY_BODY_STRUCT_(TestEvent, REPLAY_TEST_FIELDS)
REPLAY_BODY_STRUCT_(CommCreateEvent, REPLAY_COMM_CREATE_FIELDS)
REPLAY_BODY_STRUCT_(CommFreeEvent, REPLAY_COMM_FREE_FIELDS)
REPLAY_BODY_STRUCT_(GroupEvent, REPLAY_GROUP_FIELDS)
REPLAY_BODY_STRUCT_(EntropyEvent, REPLAY_ENTROPY_FIELDS)
REPLAY_BODY_STRUCT_(SeedEvent, REPLAY_SEED_FIELDS)
REPLAY_BODY_STRUCT_(CudaEvent, REPLAY_CUDA_FIELDS)
REPLAY_BODY_STRUCT_(MarkEvent, REPLAY_MARK_FIELDS)
REPLAY_BODY_STRUCT_(ErrorEvent, REPLAY_ERROR_FIELDS)
REPLAY_BODY_STRUCT_(SignalEvent, REPLAY_SIGNAL_FIELDS)
REPLAY_BODY_STRUCT_(DropEvent, REPLAY_DROP_FIELDS)
#undef REPLAY_BODY_STRUCT_
#undef REPLAY_FIELD_MEMBER_

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
