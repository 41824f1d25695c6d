// shrink_job: writes the trace of a synthetic hung job, for bench/shrink_bench.sh
// to reduce with `replay shrink`.
//
// Every rank runs a data-parallel loop over three communicators: WORLD, grad =
// dup(WORLD) and node = split(WORLD, rank / 8). Per step: a ring exchange on
// WORLD (irecv from the previous rank, isend to the next, waitall), an
// iallreduce of 2 ints on node, the gradient allreduce (2048 floats) on grad,
// the wait for the iallreduce, the loss allreduce (1 float) on WORLD; each call
// from its own call site. At --hang-step, --hang-rank skips the gradient
// allreduce and goes on to the loss allreduce: every rank then waits where it
// is, and the job is killed (SIGTERM) a second later, as `timeout` would.
//
// Usage: shrink_job --dir=PATH [--ranks=64] [--steps=6] [--hang-step=3] [--hang-rank=R]
//        (R defaults to ranks / 2 + 5, clamped to the last rank)
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "record/comm_table.h"
#include "replay/trace_writer.h"

namespace replay::bench {
namespace {

enum Api : uint16_t { kInit, kAllreduce, kIallreduce, kIsend, kIrecv, kWait, kWaitall, kCommDup, kCommSplit };
std::vector<std::string> ApiNames() {
  return {"MPI_Init", "MPI_Allreduce", "MPI_Iallreduce", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall",
          "MPI_Comm_dup", "MPI_Comm_split"};
}
// Call sites, one per call of the loop, as a program's would be.
constexpr uint64_t kSiteBase = 0x555500001000;
enum Site : uint64_t { kSiteRecv, kSiteSend, kSiteWaitall, kSiteIall, kSiteGrad, kSiteWait, kSiteLoss, kSiteComm };

struct Rank {
  std::unique_ptr<TraceWriter> w;
  uint64_t next_request = 1;
  void Append(Event e, Site site) {
    e.call_site = kSiteBase + 0x40 * site;
    if (!w->Append(e)) {
      std::fprintf(stderr, "shrink_job: cannot append an event\n");
      std::exit(1);
    }
  }
};

Event Op(uint16_t api, OpKind kind, uint64_t comm, uint64_t seq) { return CallOp(api, kind, comm, seq); }
Event Ret(uint16_t api, uint64_t comm, uint64_t seq, uint64_t request = 0) {
  Event e = CallReturn(api, comm, seq);
  e.ret.request = request;
  return e;
}

int Main(int argc, char** argv) {
  std::string dir;
  int ranks = 64, steps = 6, hang_step = 3, hang_rank = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      std::string p = std::string("--") + name + "=";
      return a.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
    };
    if (const char* d = value("dir")) {
      dir = d;
    } else if (const char* n = value("ranks")) {
      ranks = std::atoi(n);
    } else if (const char* st = value("steps")) {
      steps = std::atoi(st);
    } else if (const char* hs = value("hang-step")) {
      hang_step = std::atoi(hs);
    } else if (const char* hr = value("hang-rank")) {
      hang_rank = std::atoi(hr);
    } else {
      std::fprintf(stderr, "shrink_job: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (dir.empty() || ranks < 2 || steps < 1 || hang_step < 1 || hang_step > steps) {
    std::fprintf(stderr,
                 "usage: shrink_job --dir=PATH [--ranks=N>=2] [--steps=N] [--hang-step=1..steps] [--hang-rank=R]\n");
    return 2;
  }
  if (hang_rank < 0) hang_rank = ranks / 2 + 5;
  if (hang_rank >= ranks) hang_rank = ranks - 1;
  const uint64_t world = WorldCommId();
  std::vector<Rank> rs(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    WriterOptions o;
    o.dir = dir;
    o.header.rank = r;
    o.header.world_size = ranks;
    o.header.host = "node" + std::to_string(r / 8);
    o.header.trace_uuid = Uuid{0x5b, 0x1e, 0x64};
    o.header.api_names = ApiNames();
    o.header.versions = {{"mpi", "Open MPI v4.1.4"}};
    o.header.command_line = {"train", "--synthetic"};
    o.manifest.world_size = ranks;
    o.manifest.command = {"mpirun", "-np", std::to_string(ranks), "train", "--synthetic"};
    o.background_thread = false;
    auto w = TraceWriter::Open(o);
    if (!w.ok()) {
      std::fprintf(stderr, "shrink_job: %s\n", w.status().message().c_str());
      return 1;
    }
    rs[static_cast<size_t>(r)].w = std::move(w).value();
  }
  std::vector<int32_t> all;
  for (int i = 0; i < ranks; ++i) all.push_back(i);
  uint64_t grad = 0;
  std::vector<uint64_t> node(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    Rank& k = rs[static_cast<size_t>(r)];
    k.Append(Op(kInit, OpKind::kInit, 0, 0), kSiteComm);
    k.Append(Ret(kInit, 0, 0), kSiteComm);
    k.Append(WorldCreate(kInit, world, ranks, r), kSiteComm);
    k.Append(Event::MakeInfo("mpi.world_rank", std::to_string(r)), kSiteComm);
    // grad = dup(WORLD) (seq 1), node = split(WORLD, rank / 8) (seq 2).
    std::vector<int32_t> mates;
    for (int i = (r / 8) * 8; i < std::min(ranks, (r / 8 + 1) * 8); ++i) mates.push_back(i);
    for (int s = 1; s <= 2; ++s) {
      const std::vector<int32_t>& members = s == 1 ? all : mates;
      const uint16_t api = s == 1 ? kCommDup : kCommSplit;
      k.Append(Op(api, OpKind::kCommCreate, world, static_cast<uint64_t>(s)), kSiteComm);
      k.Append(Ret(api, world, static_cast<uint64_t>(s)), kSiteComm);
      Event e = CommCreate(api, world, static_cast<uint64_t>(s), members, s == 1 ? 0 : r / 8, r);
      k.Append(e, kSiteComm);
      (s == 1 ? grad : node[static_cast<size_t>(r)]) = e.comm_create.comm;
    }
  }
  std::vector<uint64_t> world_seq(static_cast<size_t>(ranks), 2), grad_seq(static_cast<size_t>(ranks), 0),
      node_seq(static_cast<size_t>(ranks), 0);
  for (int step = 1; step <= hang_step; ++step) {
    const bool hang = step == hang_step;
    for (int r = 0; r < ranks; ++r) {
      Rank& k = rs[static_cast<size_t>(r)];
      const size_t i = static_cast<size_t>(r);
      const int prev = (r + ranks - 1) % ranks, next = (r + 1) % ranks;
      const uint64_t ring = static_cast<uint64_t>(step);
      // Ring exchange.
      uint64_t reqs[2];
      for (int side = 0; side < 2; ++side) {
        const bool send = side == 1;
        Event op = Op(send ? kIsend : kIrecv, send ? OpKind::kSend : OpKind::kRecv, world, 0);
        op.op.peer = send ? next : prev;
        op.op.tag = 1;
        op.op.peer_seq = ring;
        op.op.count = 2;
        op.op.dtype = DataType::kInt64;
        op.op.dtype_size = 8;
        op.op.flags = op_flags::kNonBlocking;
        op.op.request = reqs[side] = k.next_request++;
        k.Append(op, send ? kSiteSend : kSiteRecv);
        k.Append(Ret(op.op.api, world, 0, op.op.request), send ? kSiteSend : kSiteRecv);
      }
      Event wait = Op(kWaitall, OpKind::kWait, 0, 0);
      wait.op.count = 2;
      wait.list = {static_cast<int64_t>(reqs[0]), static_cast<int64_t>(reqs[1])};
      k.Append(wait, kSiteWaitall);
      for (int side = 0; side < 2; ++side) {
        Event done = CallCompletion(kWaitall, world, 0, reqs[side]);
        done.completion.peer_seq = ring;
        done.completion.source = side == 0 ? prev : kNoPeer;
        done.completion.tag = 1;
        done.completion.recv_count = side == 0 ? 2 : -1;
        k.Append(done, kSiteWaitall);
      }
      k.Append(Ret(kWaitall, 0, 0), kSiteWaitall);
      // Metrics on the node, overlapping the gradient allreduce.
      Event iall = Op(kIallreduce, OpKind::kAllreduce, node[i], ++node_seq[i]);
      iall.op.count = 2;
      iall.op.dtype = DataType::kInt32;
      iall.op.dtype_size = 4;
      iall.op.redop = RedOp::kSum;
      iall.op.flags = op_flags::kNonBlocking;
      iall.op.request = k.next_request++;
      k.Append(iall, kSiteIall);
      k.Append(Ret(kIallreduce, node[i], node_seq[i], iall.op.request), kSiteIall);
      auto allreduce = [&](uint64_t comm, uint64_t seq, int64_t count, Site site, bool returns) {
        Event op = Op(kAllreduce, OpKind::kAllreduce, comm, seq);
        SetFloatCount(&op, count);
        op.op.redop = RedOp::kSum;
        k.Append(op, site);
        if (returns) k.Append(Ret(kAllreduce, comm, seq), site);
      };
      if (!(hang && r == hang_rank)) {
        allreduce(grad, ++grad_seq[i], 2048, kSiteGrad, !hang);
        if (hang) continue;  // waits there for the rank that skipped it
      }
      // Everyone else finished the iallreduce of its node; the rank that
      // skipped ahead waits for it and then for the loss.
      Event w = Op(kWait, OpKind::kWait, 0, 0);
      w.op.count = 1;
      w.list = {static_cast<int64_t>(iall.op.request)};
      k.Append(w, kSiteWait);
      k.Append(CallCompletion(kWait, node[i], node_seq[i], iall.op.request), kSiteWait);
      k.Append(Ret(kWait, 0, 0), kSiteWait);
      allreduce(world, ++world_seq[i], 1, kSiteLoss, !hang);
    }
  }
  // The job hangs for a second, then is stopped.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (int r = 0; r < ranks; ++r) {
    Rank& k = rs[static_cast<size_t>(r)];
    SignalEvent s{SIGTERM, 0, 0, true};
    k.Append(Event::Make(s), kSiteComm);
    if (Status st = k.w->Close(CloseReason::kSignal); !st.ok()) {
      std::fprintf(stderr, "shrink_job: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::printf("shrink_job: %d ranks, %d steps, rank %d skips the gradient allreduce at step %d: %s\n", ranks, steps,
              hang_rank, hang_step, dir.c_str());
  return 0;
}

}  // namespace
}  // namespace replay::bench

int main(int argc, char** argv) { return replay::bench::Main(argc, argv); }
