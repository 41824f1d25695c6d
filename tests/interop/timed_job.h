// timed_job.h: a small job whose events happen at times a test chooses, for
// the tests of views that cut a trace by time (Perfetto windows).
//
// 3 ranks start together, 60 s before the test runs: MPI_Init at 0, a dup of
// WORLD at 0.5 s, then an allreduce on it at 1 s, 5 s and 9 s, each 0.1 s
// long, and a mark "checkpoint" at 5.05 s. With `hang`, rank 2 never enters the
// third allreduce, which ranks 0 and 1 are still blocked in when SIGTERM kills
// them at 12 s (rank 2 finalizes at 10 s); without, every rank finalizes at 10 s.
#pragma once

#include <catch2/catch.hpp>
#include <csignal>
#include <string>

#include "analysis/synthetic_job.h"
#include "interop/trace_builder.h"
#include "util/clock.h"

namespace replay::testing {

inline void WriteTimedJob(const std::string& dir, bool hang) {
  constexpr int kRanks = 3;
  constexpr int64_t kSecond = 1'000'000'000;
  const int64_t start = RealtimeNs() - 60 * kSecond;
  const Uuid uuid{9, 9, 9};
  const uint64_t world = SyntheticJob::World();
  const uint64_t dup = DerivedCommId(world, 1, 0);
  for (int r = 0; r < kRanks; ++r) {
    RankHeader h;
    h.rank = r;
    h.world_size = kRanks;
    h.host = "node0";
    h.pid = 1000 + r;
    h.trace_uuid = uuid;
    h.api_names = SyntheticApiNames();
    h.start_realtime_ns = start;
    interop::RankTraceBuilder b(h);
    auto at = [&](Event e, double s) { b.Add(std::move(e), start + static_cast<int64_t>(s * kSecond)); };
    auto call = [&](uint16_t api, OpKind kind, uint64_t comm, uint64_t seq, double s, double returns_s) {
      Event op = SyntheticJob::Op(api, kind, comm, seq);
      if (kind == OpKind::kAllreduce) {
        op.op.count = 4;
        op.op.dtype = DataType::kFloat32;
        op.op.redop = RedOp::kSum;
      }
      at(op, s);
      if (returns_s >= 0) at(SyntheticJob::Ret(api, comm, seq), returns_s);
    };
    auto created = [&](uint64_t comm, uint64_t parent, uint16_t api, uint16_t flags, double s) {
      CommCreateEvent c{};
      c.comm = comm;
      c.parent = parent;
      c.api = api;
      c.flags = flags;
      c.parent_seq = parent != 0 ? 1 : 0;
      c.size = kRanks;
      c.rank = r;
      c.device = -1;
      Event e = Event::Make(c);
      e.list = {0, 1, 2};
      at(e, s);
    };
    call(kMpiInit, OpKind::kInit, 0, 0, 0, 0);
    created(world, 0, kMpiInit, comm_flags::kWorld, 0);
    at(Event::MakeInfo("mpi.world_rank", std::to_string(r)), 0);
    call(kMpiCommDup, OpKind::kCommCreate, world, 1, 0.5, 0.5);
    created(dup, world, kMpiCommDup, 0, 0.5);
    call(kMpiAllreduce, OpKind::kAllreduce, dup, 1, 1, 1.1);
    call(kMpiAllreduce, OpKind::kAllreduce, dup, 2, 5, 5.1);
    at(Event::MakeMark("checkpoint", 1), 5.05);
    const bool dies = hang && r < 2;
    if (!hang || dies) call(kMpiAllreduce, OpKind::kAllreduce, dup, 3, 9, dies ? -1 : 9.1);
    if (dies) {
      at(Event::Make(SignalEvent{SIGTERM, 0, 0, true}), 12);
      REQUIRE(b.Write(dir, CloseReason::kSignal, start + 12 * kSecond).ok());
    } else {
      call(kMpiFinalize, OpKind::kFinalize, 0, 0, 10, 10);
      REQUIRE(b.Write(dir, CloseReason::kFinalize, start + 10 * kSecond).ok());
    }
  }
  JobManifest m;
  m.trace_uuid = uuid;
  m.world_size = kRanks;
  m.created_realtime_ns = start;
  REQUIRE(interop::WriteTraceManifest(dir, m).ok());
}

}  // namespace replay::testing
