// What `replay check` says of NaN/Inf where what ranks received was counted
// on its fingerprinted sample only (REPLAY_NAN_SCAN=sent, the default).
#include <catch2/catch.hpp>

#include "analysis/synthetic_job.h"
#include "support/checked_trace.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::SyntheticJob;

// An allreduce on WORLD: what the rank sent held `send_nan` NaN, what it
// received `recv_nan` as counted, with `recv_flags`. Events are timed as they
// are appended.
void Allreduce(SyntheticJob& job, int rank, uint64_t seq, uint32_t send_nan, uint32_t recv_nan,
               uint16_t recv_flags) {
  Event op = SyntheticJob::Op(testing::kMpiAllreduce, OpKind::kAllreduce, SyntheticJob::World(), seq);
  op.op.count = 1 << 20;
  op.op.dtype = DataType::kFloat32;
  op.op.flags |= op_flags::kHasSendHash;
  op.op.send_hash = 0x100 + static_cast<uint64_t>(rank);
  op.op.send_nan = send_nan;
  job.Append(rank, op);
  Event ret = SyntheticJob::Ret(testing::kMpiAllreduce, SyntheticJob::World(), seq);
  ret.ret.flags = op_flags::kHasRecvHash | recv_flags;
  ret.ret.recv_hash = 0x200 + seq;
  ret.ret.recv_nan = recv_nan;
  job.Append(rank, ret);
}

std::vector<Finding> NanFindings(const std::string& dir) {
  std::vector<Finding> nan;
  for (const Finding& f : testing::CheckDir(dir).findings) {
    if (f.kind == FindingKind::kNanInf) nan.push_back(f);
  }
  return nan;
}

// Rank 0's input to allreduce #2 holds a NaN. Ranks 1 and 2 count none in
// what #2 gave them and send NaN into #3.
std::vector<Finding> SpreadAfter(uint16_t recv_flags) {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 3);
    job.InitAll();
    for (int r = 0; r < 3; ++r) Allreduce(job, r, 1, 0, 0, recv_flags);
    for (int r = 0; r < 3; ++r) Allreduce(job, r, 2, r == 0 ? 1 : 0, r == 0 ? 1 : 0, recv_flags);
    for (int r = 0; r < 3; ++r) Allreduce(job, r, 3, 64, 64, recv_flags);
    job.FinalizeAll();
  }
  return NanFindings(dir.path());
}

TEST_CASE("check takes a NaN sent before into a rank's communicator to have reached it when it counted a sample",
          "[analysis]") {
  std::vector<Finding> found = SpreadAfter(op_flags::kRecvSampled);
  REQUIRE(found.size() == 1);
  CHECK(found[0].ranks == std::vector<int32_t>{0});
  CHECK(found[0].seq == 2);
}

TEST_CASE("check still names ranks that counted everything they received and saw no NaN", "[analysis]") {
  std::vector<Finding> found = SpreadAfter(0);
  REQUIRE(found.size() == 2);
  CHECK(found[0].ranks == std::vector<int32_t>{0});
  CHECK(found[0].seq == 2);
  CHECK(found[1].ranks == std::vector<int32_t>{1, 2});
  CHECK(found[1].seq == 3);
}

TEST_CASE("check names the first rank to send NaN even when it had counted samples only", "[analysis]") {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 2);
    job.InitAll();
    for (int r = 0; r < 2; ++r) Allreduce(job, r, 1, 0, 0, op_flags::kRecvSampled);
    // Rank 1's NaN is sent first; rank 0's, later, could have come from it.
    for (int r : {1, 0}) Allreduce(job, r, 2, 3, 0, op_flags::kRecvSampled);
    job.FinalizeAll();
  }
  std::vector<Finding> found = NanFindings(dir.path());
  REQUIRE(found.size() == 1);
  CHECK(found[0].ranks == std::vector<int32_t>{1});
}

TEST_CASE("check takes a NaN sent to a rank that counted a sample to have reached it", "[analysis]") {
  testing::TempDir dir;
  {
    SyntheticJob job(dir.path(), 3);
    job.InitAll();
    // Rank 0 sends a NaN to rank 1, which counts a sample of it and sends one
    // on to rank 2.
    auto message = [&](int from, int to) {
      Event send = SyntheticJob::Op(testing::kMpiSend, OpKind::kSend, SyntheticJob::World(), 0);
      send.op.peer = to;
      send.op.peer_seq = 1;
      send.op.count = 1 << 20;
      send.op.dtype = DataType::kFloat32;
      send.op.flags |= op_flags::kHasSendHash;
      send.op.send_nan = 5;
      job.Append(from, send);
      job.Append(from, SyntheticJob::Ret(testing::kMpiSend, SyntheticJob::World(), 0));
      Event recv = SyntheticJob::Op(testing::kMpiRecv, OpKind::kRecv, SyntheticJob::World(), 0);
      recv.op.peer = from;
      job.Append(to, recv);
      Event got = SyntheticJob::Ret(testing::kMpiRecv, SyntheticJob::World(), 0);
      got.ret.source = from;
      got.ret.peer_seq = 1;
      got.ret.flags = op_flags::kHasRecvHash | op_flags::kRecvSampled;
      job.Append(to, got);
    };
    message(0, 1);
    message(1, 2);
    job.FinalizeAll();
  }
  std::vector<Finding> found = NanFindings(dir.path());
  REQUIRE(found.size() == 1);
  CHECK(found[0].ranks == std::vector<int32_t>{0});
}

}  // namespace
}  // namespace replay
