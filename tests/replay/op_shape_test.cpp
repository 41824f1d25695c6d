#include "replay/op_shape.h"

#include <catch2/catch.hpp>
#include <vector>

namespace replay {
namespace {

std::vector<Block> Blocks(const OpArgs& a) {
  std::vector<Block> out;
  ForEachBlock(a, [&](const Block& b) { out.push_back(b); });
  return out;
}

OpArgs Args(OpKind kind, int size, int rank, int64_t send_count, int64_t recv_count, int root = -1) {
  OpArgs a;
  a.kind = kind;
  a.size = a.peers = size;
  a.rank = rank;
  a.is_root = ShapeOf(kind).rooted && rank == root;
  a.send_count = send_count;
  a.recv_count = recv_count;
  return a;
}

// What the rank of `a` sends and receives in all.
void CheckTotals(const OpArgs& a, int64_t send, int64_t recv) {
  INFO(OpKindName(a.kind) << " rank " << a.rank << " of " << a.size);
  const OpTotals t = Totals(a);
  CHECK(t.send == send);
  CHECK(t.recv == recv);
}

// `a` with its send buffer the receive buffer (MPI_IN_PLACE).
OpArgs InPlace(OpArgs a) {
  a.in_place = true;
  return a;
}

TEST_CASE("an allreduce sends and receives its count on every rank", "[replay]") {
  CheckTotals(Args(OpKind::kAllreduce, 4, 2, 8, 8), 8, 8);
}

TEST_CASE("for operations of one block a side, OneBlocks says what ForEachBlock visits", "[replay]") {
  int checked = 0;
  for (int k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    const OpShape s = ShapeOf(kind);
    if (!HasOneBlockSides(s)) continue;
    for (int rank = 0; rank < 3; ++rank) {
      for (bool in_place : {false, true}) {
        for (bool inter : {false, true}) {
          OpArgs a = Args(kind, 3, rank, 5, 7, 1);
          a.in_place = in_place;
          if (inter && s.rooted) {  // intercommunicator: the root's group, or the other
            a.in_root_group = rank != 2;
            a.is_root = rank == 0;
          }
          INFO(OpKindName(kind) << " rank " << rank << " in place " << in_place << " inter " << inter);
          std::vector<Block> want;
          const OneBlockSides one = OneBlocks(s, a);
          if (one.sends) {
            want.push_back(Block{Side::kSend, one.from_recv ? Side::kRecv : Side::kSend, -1, 0, a.send_count});
          }
          if (one.receives) want.push_back(Block{Side::kRecv, Side::kRecv, -1, 0, a.recv_count});
          const std::vector<Block> got = Blocks(a);
          REQUIRE(got.size() == want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            CHECK(got[i].side == want[i].side);
            CHECK(got[i].buffer == want[i].buffer);
            CHECK(got[i].peer == want[i].peer);
            CHECK(got[i].offset == want[i].offset);
            CHECK(got[i].count == want[i].count);
          }
          int listed = 0;
          ForEachListedCount(a, [&](int64_t) { ++listed; });
          CHECK(listed == 0);
          ++checked;
        }
      }
    }
  }
  // Barrier, broadcast, reduce, allreduce, scan, exscan at least.
  CHECK(checked >= 6 * 12);
}

TEST_CASE("a gather's root receives a block from every rank; the others only send", "[replay]") {
  CheckTotals(Args(OpKind::kGather, 4, 3, 5, 5, 3), 5, 20);  // the root
  CheckTotals(Args(OpKind::kGather, 4, 1, 5, 5, 3), 5, 0);
}

TEST_CASE("in place, an allgather sends its own block of the receive buffer", "[replay]") {
  std::vector<Block> b = Blocks(InPlace(Args(OpKind::kAllgather, 4, 2, 0, 3)));
  REQUIRE(b.size() == 2);
  CHECK(b[0].side == Side::kSend);
  CHECK(b[0].buffer == Side::kRecv);
  CHECK(b[0].offset == 6);
  CHECK(b[0].count == 3);
  CHECK(b[1].side == Side::kRecv);
  CHECK(b[1].count == 12);
}

TEST_CASE("in place, a scatter's root keeps its block and receives nothing", "[replay]") {
  CheckTotals(InPlace(Args(OpKind::kScatter, 3, 0, 2, 2, 0)), 6, 0);
}

TEST_CASE("in place, an all-to-all sends what its receive buffer holds", "[replay]") {
  std::vector<Block> b = Blocks(InPlace(Args(OpKind::kAlltoall, 3, 1, 0, 2)));
  REQUIRE(b.size() == 2);
  CHECK(b[0].buffer == Side::kRecv);
  CHECK(b[0].count == 6);
}

TEST_CASE("listed collectives lay their blocks at the listed displacements", "[replay]") {
  const int counts[] = {1, 2, 3}, displs[] = {0, 4, 8};
  OpArgs a = Args(OpKind::kAlltoallv, 3, 0, 0, 0);
  a.send_counts = counts;
  a.send_displs = displs;
  a.recv_counts = counts;
  a.recv_displs = displs;
  std::vector<Block> b = Blocks(a);
  REQUIRE(b.size() == 6);
  CHECK(b[1].peer == 1);
  CHECK(b[1].offset == 4);
  CHECK(b[1].count == 2);
  std::vector<int64_t> listed;
  ForEachListedCount(a, [&](int64_t c) { listed.push_back(c); });
  CHECK(listed == std::vector<int64_t>{1, 2, 3, 1, 2, 3});
}

TEST_CASE("a reduce-scatter sends the sum of the counts and receives its own", "[replay]") {
  const int counts[] = {1, 2, 3};
  OpArgs a = Args(OpKind::kReduceScatter, 3, 2, 0, 0);
  a.recv_counts = counts;
  CheckTotals(a, 6, 3);
}

TEST_CASE("NCCL's broadcast root receives into a buffer of its own", "[replay]") {
  OpArgs a = Args(OpKind::kBcast, 4, 0, 16, 16, 0);
  CHECK(Totals(a).recv == 0);  // MPI's root has one buffer
  a.root_copies = true;
  CHECK(Totals(a).recv == 16);
  CHECK(Totals(a).send == 16);
}

TEST_CASE("an operation's arguments come back from what the trace keeps", "[replay]") {
  OpEvent op{};
  op.kind = OpKind::kScatter;
  op.root = 0;
  op.count = 12;  // what the root sent: 4 ranks x 3
  op.recv_count = 3;
  OpArgs root = RecordedArgs(op, {}, 4, 0);
  CHECK(root.send_count == 3);
  CHECK(root.recv_count == 3);
  CHECK(Totals(root).send == 12);
  op.kind = OpKind::kAlltoallv;
  std::vector<int64_t> list = {1, 1, 2, 2, 3, 3};  // sent to each, then received from each
  OpArgs v = RecordedArgs(op, list, 3, 1);
  REQUIRE(v.send_counts);
  REQUIRE(v.recv_counts);
  CHECK(v.send_counts[2] == 2);
  CHECK(v.recv_counts[0] == 2);
  OpArgs short_list = RecordedArgs(op, {1, 2}, 3, 1);  // a damaged trace: too few counts
  CHECK_FALSE(short_list.send_counts);
}

TEST_CASE("the largest buffers of an NCCL operation are the root's", "[replay]") {
  OpTotals gather = LargestTotals(OpKind::kGather, 5, 4);
  CHECK(gather.send == 5);
  CHECK(gather.recv == 20);
  CHECK(MaxBlocks(OpKind::kReduceScatterBlock, 4) == 4);
  CHECK(MaxBlocks(OpKind::kAllreduce, 4) == 1);
}

}  // namespace
}  // namespace replay
