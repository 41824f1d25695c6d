// op_shape.h: which elements one rank of an operation sends and receives.
//
// One row per operation kind (ShapeOf) says, for its send side and its receive
// side, how many blocks of the call's count the side covers (none, one, one per
// peer, or listed per peer with displacements), which ranks it applies to
// (every rank, the root, the others), and where the data sent is read from when
// the call is in place. From one rank's arguments (counts, communicator size,
// rank, root, in-place, counts and displacements) ForEachBlock gives the blocks
// themselves and Totals their sizes. The recorder fingerprints those blocks
// (MPI and NCCL), a re-run fills them, the drive sizes its buffers by them and
// the host NCCL stand-in checks its arguments against them: a new collective is
// described here, once.
//
// Counts are in elements of the side's datatype and offsets in extents of it,
// except where the row says byte_offsets (all-to-all-w: displacements in bytes,
// a datatype per peer). MPI calls each side's count argument what it is; an
// NCCL call's one count is both sides' (per peer where the side is per peer).
//
// Nothing here depends on MPI or NCCL; everything is inline and allocation-free,
// for the recording path. Thread safety: stateless.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "replay/event.h"

namespace replay {

// How much of its buffer one side of an operation covers, in blocks of the
// side's count.
enum class Blocks : uint8_t {
  kNone,         // nothing
  kOne,          // one block of the count
  kPerPeer,      // one block per peer, contiguous: count x peers
  kListed,       // per peer, the listed count at the listed displacement
  kListedTotal,  // one block, the sum of the receive side's listed counts (reduce-scatter's input)
  kListedOwn,    // one block, this rank's listed count (reduce-scatter's output)
};

// Which ranks a side applies to. On an intercommunicator the root's group
// (the root, MPI_ROOT, and its peers, MPI_PROC_NULL) is one side of a rooted
// operation and the other group the other.
enum class Ranks : uint8_t {
  kAll,        // every rank
  kRoot,       // the root only
  kNonRoot,    // every rank but the root (and, on an intercommunicator, its group)
  kNotRootGroup,  // every rank outside the root's group: all on an intracommunicator
};

// Where an in-place call (MPI_IN_PLACE) reads what it sends.
enum class InPlace : uint8_t {
  kNotAllowed,
  kFromRecv,        // the send side's blocks, in the receive buffer (reductions)
  kOwnBlock,        // this rank's block of the receive side (gathers; at the root only where rooted)
  kRootKeepsBlock,  // the root sends from its send buffer and receives nothing (scatters)
  kRecvBlocks,      // the receive side's blocks, which are read and then written (all-to-all)
};

// Where the trace keeps the receive count of a call that has one of its own
// (an op's recv_count).
enum class RecvCount : uint8_t { kNotKept, kKept, kKeptAtRoot };

struct SideShape {
  Blocks blocks = Blocks::kNone;
  Ranks ranks = Ranks::kAll;
};

struct OpShape {
  SideShape send;
  SideShape recv;
  InPlace in_place = InPlace::kNotAllowed;
  RecvCount recv_count = RecvCount::kNotKept;
  // The trace's count of an op is what this rank sends; a broadcast's is the
  // call's count, on every rank.
  bool count_is_call = false;
  bool rooted = false;
  bool neighbors = false;     // peers are the topology's neighbours, not the communicator
  bool local_group = false;   // per-peer counts are over the local group even on an intercommunicator
  bool byte_offsets = false;  // displacements in bytes, a datatype per peer
  // Each side is at most one block, read as laid out or from the receive
  // buffer (HasOneBlockSides); set by ShapeOf's table.
  bool one_block_sides = false;
};

namespace op_shape_internal {

// The rows, one per kind (ShapeOf reads them from a table built from this).
constexpr OpShape Row(OpKind kind) {
  using B = Blocks;
  using R = Ranks;
  using P = InPlace;
  using C = RecvCount;
  // send, recv, in place, receive count, rooted, neighbours, local group, byte offsets
  auto row = [](SideShape send, SideShape recv, P in_place, C recv_count, bool rooted = false,
                bool neighbors = false, bool local_group = false, bool byte_offsets = false) {
    return OpShape{send, recv, in_place, recv_count, false, rooted, neighbors, local_group, byte_offsets};
  };
  switch (kind) {
    case OpKind::kSend: return row({B::kOne, R::kAll}, {}, P::kNotAllowed, C::kNotKept);
    case OpKind::kRecv:
    case OpKind::kMrecv: return row({}, {B::kOne, R::kAll}, P::kNotAllowed, C::kNotKept);
    case OpKind::kSendrecv: return row({B::kOne, R::kAll}, {B::kOne, R::kAll}, P::kNotAllowed, C::kKept);
    case OpKind::kBarrier: return row({}, {}, P::kNotAllowed, C::kNotKept);
    case OpKind::kBcast: {
      OpShape bcast = row({B::kOne, R::kRoot}, {B::kOne, R::kNonRoot}, P::kNotAllowed, C::kNotKept, true);
      bcast.count_is_call = true;
      return bcast;
    }
    case OpKind::kReduce:
      return row({B::kOne, R::kAll}, {B::kOne, R::kRoot}, P::kFromRecv, C::kNotKept, true);
    case OpKind::kAllreduce:
    case OpKind::kScan:
    case OpKind::kExscan: return row({B::kOne, R::kAll}, {B::kOne, R::kAll}, P::kFromRecv, C::kNotKept);
    case OpKind::kGather:
      return row({B::kOne, R::kAll}, {B::kPerPeer, R::kRoot}, P::kOwnBlock, C::kKeptAtRoot, true);
    case OpKind::kGatherv:
      return row({B::kOne, R::kAll}, {B::kListed, R::kRoot}, P::kOwnBlock, C::kNotKept, true);
    case OpKind::kAllgather: return row({B::kOne, R::kAll}, {B::kPerPeer, R::kAll}, P::kOwnBlock, C::kKept);
    case OpKind::kAllgatherv: return row({B::kOne, R::kAll}, {B::kListed, R::kAll}, P::kOwnBlock, C::kNotKept);
    case OpKind::kScatter:
      return row({B::kPerPeer, R::kRoot}, {B::kOne, R::kNotRootGroup}, P::kRootKeepsBlock, C::kKept, true);
    case OpKind::kScatterv:
      return row({B::kListed, R::kRoot}, {B::kOne, R::kNotRootGroup}, P::kRootKeepsBlock, C::kKept, true);
    case OpKind::kAlltoall: return row({B::kPerPeer, R::kAll}, {B::kPerPeer, R::kAll}, P::kRecvBlocks, C::kKept);
    case OpKind::kAlltoallv: return row({B::kListed, R::kAll}, {B::kListed, R::kAll}, P::kRecvBlocks, C::kNotKept);
    case OpKind::kAlltoallw:
      return row({B::kListed, R::kAll}, {B::kListed, R::kAll}, P::kRecvBlocks, C::kNotKept, false, false, false,
                 true);
    case OpKind::kReduceScatter:
      return row({B::kListedTotal, R::kAll}, {B::kListedOwn, R::kAll}, P::kFromRecv, C::kNotKept, false, false,
                 true);
    case OpKind::kReduceScatterBlock:
      return row({B::kPerPeer, R::kAll}, {B::kOne, R::kAll}, P::kFromRecv, C::kNotKept, false, false, true);
    case OpKind::kNeighborAllgather:
      return row({B::kOne, R::kAll}, {B::kPerPeer, R::kAll}, P::kNotAllowed, C::kKept, false, true);
    case OpKind::kNeighborAllgatherv:
      return row({B::kOne, R::kAll}, {B::kListed, R::kAll}, P::kNotAllowed, C::kNotKept, false, true);
    case OpKind::kNeighborAlltoall:
      return row({B::kPerPeer, R::kAll}, {B::kPerPeer, R::kAll}, P::kNotAllowed, C::kKept, false, true);
    case OpKind::kNeighborAlltoallv:
      return row({B::kListed, R::kAll}, {B::kListed, R::kAll}, P::kRecvBlocks, C::kNotKept, false, true);
    case OpKind::kNeighborAlltoallw:
      return row({B::kListed, R::kAll}, {B::kListed, R::kAll}, P::kRecvBlocks, C::kNotKept, false, true, false,
                 true);
    default: return row({}, {}, P::kNotAllowed, C::kNotKept);
  }
}

constexpr bool OneBlockSides(const OpShape& s) {
  auto one = [](Blocks b) { return b == Blocks::kNone || b == Blocks::kOne; };
  return one(s.send.blocks) && one(s.recv.blocks) && !s.neighbors && !s.byte_offsets &&
         (s.in_place == InPlace::kNotAllowed || s.in_place == InPlace::kFromRecv);
}

static_assert(static_cast<int>(OpKind::kWait) + 1 == kOpKindCount, "a row for every kind");
inline constexpr std::array<OpShape, kOpKindCount> kRows = [] {
  std::array<OpShape, kOpKindCount> rows{};
  for (int k = 0; k < kOpKindCount; ++k) {
    OpShape& r = rows[static_cast<size_t>(k)];
    r = Row(static_cast<OpKind>(k));
    r.one_block_sides = OneBlockSides(r);
  }
  return rows;
}();
inline constexpr OpShape kNoShape = Row(OpKind::kOther);

}  // namespace op_shape_internal

// The shape of an operation kind; kinds that move no data (management, tests)
// have none on either side. A table look-up: the recorder asks for every call.
constexpr const OpShape& ShapeOf(OpKind kind) {
  const auto k = static_cast<size_t>(kind);
  return k < op_shape_internal::kRows.size() ? op_shape_internal::kRows[k] : op_shape_internal::kNoShape;
}

// Per-peer counts or displacements as a call passes them: C ints, or 64-bit
// integers (MPI_Aint displacements, recorded lists). Null: not given.
class IntList {
 public:
  IntList() = default;
  IntList(const int* v) : data_(v), wide_(false) {}      // NOLINT: a call's array as it is
  IntList(const int64_t* v) : data_(v), wide_(true) {}   // NOLINT
  explicit operator bool() const { return data_ != nullptr; }
  int64_t operator[](int i) const {
    return wide_ ? static_cast<const int64_t*>(data_)[i] : static_cast<const int*>(data_)[i];
  }

 private:
  const void* data_ = nullptr;
  bool wide_ = false;
};

// One rank's arguments to an operation, in the terms of the rows above.
struct OpArgs {
  OpKind kind = OpKind::kOther;
  int32_t size = 0;    // the communicator's (local group's) size
  int32_t peers = 0;   // ranks it exchanges with: size, or the remote group's size on an intercommunicator
  int32_t in_peers = -1, out_peers = -1;  // neighbourhood collectives: in- and out-degree
  int32_t rank = -1;   // this rank in the communicator, -1 if unknown
  bool is_root = false;        // rooted: this rank is the root (MPI_ROOT on an intercommunicator)
  bool in_root_group = false;  // intercommunicator, rooted: this rank is in the root's group
  bool in_place = false;       // MPI_IN_PLACE
  bool root_copies = false;    // the root also receives what it sends (NCCL's broadcast)
  int64_t send_count = 0;
  int64_t recv_count = 0;
  IntList send_counts, send_displs, recv_counts, recv_displs;
};

// The part of OpArgs that says which sides apply to a rank, for a caller
// that needs no more (the recorder, for the collectives of one block a side).
struct SideArgs {
  bool is_root = false;
  bool in_root_group = false;
  bool in_place = false;
  bool root_copies = false;
};

enum class Side : uint8_t { kSend, kRecv };

// A block of one side: `count` elements at `offset` into `buffer` (the send
// or the receive buffer). `peer` is the peer a listed block is for, else -1.
struct Block {
  Side side;
  Side buffer;
  int32_t peer;
  int64_t offset;
  int64_t count;
};

namespace op_shape_internal {

// `Args`: OpArgs, or any struct with its is_root, in_root_group, in_place
// and root_copies (SideArgs), which is all that decides whether a side applies.
template <typename Args>
constexpr bool Applies(Ranks r, const Args& a) {
  switch (r) {
    case Ranks::kAll: return true;
    case Ranks::kRoot: return a.is_root;
    case Ranks::kNonRoot: return !a.is_root && !a.in_root_group;
    case Ranks::kNotRootGroup: return !a.in_root_group;
  }
  return false;
}

inline int64_t Sum(IntList counts, int n) {
  int64_t s = 0;
  for (int i = 0; counts && i < n; ++i) s += counts[i];
  return s;
}

// The blocks of one side, laid out by `blocks` with `count` and `counts`,
// reported as lying in `buffer`.
template <typename Visit>
void Lay(Side side, Side buffer, Blocks blocks, int n, int64_t count, IntList counts, IntList displs, int rank,
         Visit& visit) {
  switch (blocks) {
    case Blocks::kNone: return;
    case Blocks::kOne: visit(Block{side, buffer, -1, 0, count}); return;
    case Blocks::kPerPeer: visit(Block{side, buffer, -1, 0, count * n}); return;
    case Blocks::kListed:
      for (int i = 0; counts && displs && i < n; ++i) visit(Block{side, buffer, i, displs[i], counts[i]});
      return;
    case Blocks::kListedTotal: visit(Block{side, buffer, -1, 0, Sum(counts, n)}); return;
    case Blocks::kListedOwn:
      if (counts && rank >= 0) visit(Block{side, buffer, -1, 0, counts[rank]});
      return;
  }
}

}  // namespace op_shape_internal

// How many peers each side of `a` counts: (send, receive).
constexpr int PeersOut(const OpShape& s, const OpArgs& a) {
  if (s.neighbors) return a.out_peers;
  return s.local_group ? a.size : a.peers;
}
constexpr int PeersIn(const OpShape& s, const OpArgs& a) {
  if (s.neighbors) return a.in_peers;
  return s.local_group ? a.size : a.peers;
}

// Whether each side applies to this rank (`a`: OpArgs or SideArgs).
template <typename Args>
bool Sends(const OpShape& s, const Args& a) {
  return s.send.blocks != Blocks::kNone && op_shape_internal::Applies(s.send.ranks, a);
}
template <typename Args>
bool Receives(const OpShape& s, const Args& a) {
  if (s.recv.blocks == Blocks::kNone) return false;
  if (a.in_place && s.in_place == InPlace::kRootKeepsBlock && a.is_root) return false;
  if (a.root_copies && a.is_root) return true;
  return op_shape_internal::Applies(s.recv.ranks, a);
}

// Calls visit(const Block&) for every block this rank sends, then for every
// block it receives, in peer order.
template <typename Visit>
void ForEachBlock(const OpArgs& a, Visit&& visit) {
  using op_shape_internal::Lay;
  const OpShape& s = ShapeOf(a.kind);
  const int out = PeersOut(s, a), in = PeersIn(s, a);
  if (Sends(s, a)) {
    const IntList send_counts = s.send.blocks == Blocks::kListedTotal ? a.recv_counts : a.send_counts;
    bool from_recv = a.in_place && s.in_place != InPlace::kNotAllowed && s.in_place != InPlace::kRootKeepsBlock &&
                     (s.in_place != InPlace::kOwnBlock || Receives(s, a));
    if (!from_recv) {
      Lay(Side::kSend, Side::kSend, s.send.blocks, out, a.send_count, send_counts, a.send_displs, a.rank, visit);
    } else if (s.in_place == InPlace::kFromRecv) {
      Lay(Side::kSend, Side::kRecv, s.send.blocks, out, a.send_count, a.recv_counts, a.recv_displs, a.rank, visit);
    } else if (s.in_place == InPlace::kRecvBlocks) {
      Lay(Side::kSend, Side::kRecv, s.recv.blocks, out, a.recv_count, a.recv_counts, a.recv_displs, a.rank, visit);
    } else if (s.recv.blocks == Blocks::kPerPeer && a.rank >= 0) {  // own block, of equal ones
      visit(Block{Side::kSend, Side::kRecv, -1, a.rank * a.recv_count, a.recv_count});
    } else if (s.recv.blocks == Blocks::kListed && a.recv_counts && a.recv_displs && a.rank >= 0) {
      visit(Block{Side::kSend, Side::kRecv, -1, a.recv_displs[a.rank], a.recv_counts[a.rank]});
    } else {
      Lay(Side::kSend, Side::kSend, s.send.blocks, out, a.send_count, send_counts, a.send_displs, a.rank, visit);
    }
  }
  if (Receives(s, a)) {
    Lay(Side::kRecv, Side::kRecv, s.recv.blocks, in, a.recv_count, a.recv_counts, a.recv_displs, a.rank, visit);
  }
}

// Operations whose sides are each at most one block of the call's count, at
// offset 0, in place (if at all) from the receive buffer: barrier, broadcast,
// reductions, scans, the common collectives. For them OneBlocks says what
// ForEachBlock would visit, at a fraction of the cost, and they list no counts.
constexpr bool HasOneBlockSides(const OpShape& s) { return s.one_block_sides; }
struct OneBlockSides {
  bool sends = false;      // a send block of a.send_count elements ...
  bool from_recv = false;  // ... in the receive buffer (in place)
  bool receives = false;   // a receive block of a.recv_count elements
};
template <typename Args>
OneBlockSides OneBlocks(const OpShape& s, const Args& a) {
  OneBlockSides o;
  o.sends = Sends(s, a);
  o.from_recv = o.sends && a.in_place && s.in_place == InPlace::kFromRecv;
  o.receives = Receives(s, a);
  return o;
}

// The elements each side covers.
struct OpTotals {
  int64_t send = 0;
  int64_t recv = 0;
};
inline OpTotals Totals(const OpArgs& a) {
  OpTotals t;
  ForEachBlock(a, [&](const Block& b) { (b.side == Side::kSend ? t.send : t.recv) += b.count; });
  return t;
}

// Calls visit(int64_t) for each per-peer count the trace keeps with an op (its
// list): the send side's listed counts (the receive side's when in place),
// then the receive side's.
template <typename Visit>
void ForEachListedCount(const OpArgs& a, Visit&& visit) {
  const OpShape& s = ShapeOf(a.kind);
  if (s.send.blocks == Blocks::kListed && Sends(s, a)) {
    IntList counts = a.in_place && s.in_place == InPlace::kRecvBlocks ? a.recv_counts : a.send_counts;
    for (int i = 0, n = PeersOut(s, a); counts && i < n; ++i) visit(counts[i]);
  }
  const bool listed = s.recv.blocks == Blocks::kListed || s.recv.blocks == Blocks::kListedOwn;
  if (listed && op_shape_internal::Applies(s.recv.ranks, a)) {
    for (int i = 0, n = PeersIn(s, a); a.recv_counts && i < n; ++i) visit(a.recv_counts[i]);
  }
}

// One rank's arguments as the trace keeps them (an op's count, receive count
// and list, ForEachListedCount's order), for re-issuing the operation on a
// communicator of `size` ranks where this one is `rank`. Listed counts point
// into `list`; a list too short for them leaves them out. Displacements are
// not kept: the caller lays the blocks out as it likes.
inline OpArgs RecordedArgs(const OpEvent& op, const std::vector<int64_t>& list, int32_t size, int32_t rank) {
  const OpShape& s = ShapeOf(op.kind);
  OpArgs a;
  a.kind = op.kind;
  a.size = a.peers = a.in_peers = a.out_peers = size;
  a.rank = rank;
  a.is_root = s.rooted && op.root == rank;
  if (s.count_is_call || s.send.blocks != Blocks::kPerPeer) {
    a.send_count = op.count;
  } else {
    a.send_count = size > 0 ? op.count / size : 0;
  }
  a.recv_count = s.recv_count != RecvCount::kNotKept && (s.recv_count == RecvCount::kKept || a.is_root)
                     ? op.recv_count
                     : a.send_count;
  size_t pos = 0;
  auto take = [&](IntList* counts) {
    if (list.size() < pos + static_cast<size_t>(std::max(size, 0))) return;
    *counts = IntList(list.data() + pos);
    pos += static_cast<size_t>(size);
  };
  if (s.send.blocks == Blocks::kListed && Sends(s, a)) take(&a.send_counts);
  if ((s.recv.blocks == Blocks::kListed || s.recv.blocks == Blocks::kListedOwn) &&
      op_shape_internal::Applies(s.recv.ranks, a)) {
    take(&a.recv_counts);
  }
  return a;
}

// The elements each side covers on the rank that covers most (the root of a
// rooted operation), with one `count` for both sides: the buffers a call of
// `kind` may be given on any rank. Listed sides cover nothing here (their
// counts are per call: Totals).
constexpr OpTotals LargestTotals(OpKind kind, int64_t count, int n) {
  const OpShape& s = ShapeOf(kind);
  auto side = [&](Blocks b) -> int64_t {
    switch (b) {
      case Blocks::kOne: return count;
      case Blocks::kPerPeer: return count * n;
      default: return 0;
    }
  };
  return OpTotals{side(s.send.blocks), side(s.recv.blocks)};
}

// The largest number of count-sized blocks any rank's buffer of `kind` holds
// with `n` peers: what a count must be small enough to multiply by.
constexpr int64_t MaxBlocks(OpKind kind, int n) {
  const OpShape& s = ShapeOf(kind);
  return s.send.blocks == Blocks::kPerPeer || s.recv.blocks == Blocks::kPerPeer ? n : 1;
}

}  // namespace replay
