// synthetic_job.h: small multi-rank traces written event by event, for the
// analysis tests: each test states the calls each rank made, the way the
// recorder would have recorded them (op at entry, ret at return, completion
// of requests, communicator announcements), and checks what the analysis
// makes of it.
//
// One writer per rank, all open at once; not thread-safe. A writer numbers
// the threads that append to it in the order they do, and counts a thread
// again each time it comes back from appending to another writer: write a
// call's op and ret without switching ranks in between.
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "record/comm_table.h"
#include "replay/trace_writer.h"
#include "trace/python_sites.h"
#include "util/file_system.h"

namespace replay::testing {

// API ids of the synthetic jobs (RankHeader.apiNames).
enum Api : uint16_t {
  kMpiInit = 0, kMpiFinalize, kMpiAllreduce, kMpiBcast, kMpiBarrier, kMpiCommDup, kMpiCommSplit,
  kMpiSend, kMpiRecv, kMpiIsend, kMpiIrecv, kMpiWait, kMpiWaitall, kMpiIallreduce, kMpiAbort, kMpiCommFree,
};
inline std::vector<std::string> SyntheticApiNames() {
  return {"MPI_Init", "MPI_Finalize", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Comm_dup",
          "MPI_Comm_split", "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall",
          "MPI_Iallreduce", "MPI_Abort", "MPI_Comm_free"};
}

class SyntheticJob {
 public:
  // `header_hook` may change each rank's header before it is written, and
  // `manifest_hook` the job's manifest.
  SyntheticJob(const std::string& dir, int ranks, std::function<void(int, RankHeader*)> header_hook = nullptr,
               std::function<void(JobManifest*)> manifest_hook = nullptr)
      : dir_(dir), ranks_(ranks) {
    for (int r = 0; r < ranks; ++r) {
      WriterOptions o;
      o.dir = dir;
      o.header.rank = r;
      o.header.world_size = ranks;
      o.header.host = "node0";
      o.header.trace_uuid = Uuid{7, 7, 7};
      o.header.api_names = SyntheticApiNames();
      o.header.environment = {{"OMPI_COMM_WORLD_RANK", std::to_string(r)}, {"OMPI_MCA_btl", "^openib"}};
      o.header.versions = {{"mpi", "Open MPI v4.1.4"}};
      o.manifest.world_size = ranks;
      o.background_thread = false;
      disks_.push_back(std::make_unique<FaultFileSystem>(FileSystem::Default()));
      o.fs = disks_.back().get();
      o.on_failure = [](const Status&) {};
      if (header_hook) header_hook(r, &o.header);
      if (manifest_hook) manifest_hook(&o.manifest);
      auto w = TraceWriter::Open(o);
      REQUIRE(w.ok());
      writers_.push_back(std::move(w).value());
      next_request_.push_back(1);
    }
  }

  int ranks() const { return ranks_; }
  // WORLD's size when it differs from the ranks written (ranks without a trace).
  void set_world(int world) { world_ = world; }
  static uint64_t World() { return WorldCommId(); }

  void Append(int rank, const Event& e) { REQUIRE(writers_[static_cast<size_t>(rank)]->Append(e)); }

  // MPI_Init, and the WORLD and SELF communicators it announces.
  void Init(int rank) {
    Append(rank, Op(kMpiInit, OpKind::kInit, 0, 0));
    Append(rank, Ret(kMpiInit, 0, 0));
    CommCreateEvent w{};
    w.comm = World();
    w.api = kMpiInit;
    w.flags = comm_flags::kWorld;
    int world = world_ > 0 ? world_ : ranks_;
    w.size = world;
    w.rank = rank;
    w.device = -1;
    Event e = Event::Make(w);
    for (int i = 0; i < world; ++i) e.list.push_back(i);
    Append(rank, e);
    CommCreateEvent s{};
    s.comm = SelfCommId(rank);
    s.api = kMpiInit;
    s.flags = comm_flags::kSelf;
    s.size = 1;
    s.rank = 0;
    s.device = -1;
    Event se = Event::Make(s);
    se.list = {rank};
    Append(rank, se);
    Append(rank, Event::MakeInfo("mpi.world_rank", std::to_string(rank)));
  }
  void InitAll() {
    for (int r = 0; r < ranks_; ++r) Init(r);
  }

  // A communicator created by `api` (dup or split) as collective `seq` on
  // `parent`; `members` in communicator-rank order. Returns its identity.
  uint64_t Create(int rank, uint16_t api, uint64_t parent, uint64_t seq, std::vector<int32_t> members,
                  int64_t color = 0) {
    Append(rank, Op(api, OpKind::kCommCreate, parent, seq));
    Append(rank, Ret(api, parent, seq));
    int32_t lowest = *std::min_element(members.begin(), members.end());
    CommCreateEvent c{};
    c.comm = DerivedCommId(parent, seq, lowest);
    c.parent = parent;
    c.api = api;
    c.parent_seq = seq;
    c.color = color;
    c.size = static_cast<int32_t>(members.size());
    c.rank = static_cast<int32_t>(std::find(members.begin(), members.end(), rank) - members.begin());
    c.device = -1;
    Event e = Event::Make(c);
    e.list.assign(members.begin(), members.end());
    Append(rank, e);
    return c.comm;
  }

  // A blocking collective: op, and unless `returns` is false, its ret.
  void Collective(int rank, uint16_t api, OpKind kind, uint64_t comm, uint64_t seq, int64_t count,
                  uint64_t send_hash, uint64_t recv_hash, bool returns = true, uint32_t send_nan = 0,
                  uint32_t recv_nan = 0, int32_t root = -1, uint64_t call_site = 0) {
    Event op = Op(api, kind, comm, seq);
    op.op.count = count;
    op.op.dtype = DataType::kFloat32;
    op.op.dtype_size = 4;
    op.op.bytes = static_cast<uint64_t>(count) * 4;
    op.op.redop = kind == OpKind::kAllreduce ? RedOp::kSum : RedOp::kNone;
    op.op.root = root;
    if (send_hash != 0) {
      op.op.flags |= op_flags::kHasSendHash;
      op.op.send_hash = send_hash;
      op.op.send_nan = send_nan;
    }
    op.call_site = call_site;
    Append(rank, op);
    if (!returns) return;
    Event ret = Ret(api, comm, seq);
    if (recv_hash != 0) {
      ret.ret.flags |= op_flags::kHasRecvHash;
      ret.ret.recv_hash = recv_hash;
      ret.ret.recv_nan = recv_nan;
    }
    ret.call_site = call_site;
    Append(rank, ret);
  }
  void Allreduce(int rank, uint64_t comm, uint64_t seq, int64_t count = 1024, bool returns = true,
                 uint64_t call_site = 0) {
    Collective(rank, kMpiAllreduce, OpKind::kAllreduce, comm, seq, count, 0x1000 + static_cast<uint64_t>(rank),
               0x2000 + seq, returns, 0, 0, -1, call_site);
  }

  // A non-blocking allreduce: op + ret now; the request id is returned for Wait.
  // Without `returns`, the call itself never returns (an NCCL operation stuck
  // while it enqueues).
  uint64_t Iallreduce(int rank, uint64_t comm, uint64_t seq, int64_t count = 2, bool returns = true) {
    uint64_t req = next_request_[static_cast<size_t>(rank)]++;
    Event op = Op(kMpiIallreduce, OpKind::kAllreduce, comm, seq);
    op.op.flags |= op_flags::kNonBlocking;
    op.op.request = req;
    op.op.count = count;
    op.op.dtype = DataType::kInt32;
    op.op.redop = RedOp::kSum;
    Append(rank, op);
    if (!returns) return req;
    Event ret = Ret(kMpiIallreduce, comm, seq);
    ret.ret.request = req;
    Append(rank, ret);
    return req;
  }

  // Point to point, `peer` a rank in `comm` (WORLD here).
  uint64_t Isend(int rank, int peer, int tag, uint64_t peer_seq) { return P2p(rank, kMpiIsend, OpKind::kSend, peer, tag, peer_seq, true); }
  uint64_t Irecv(int rank, int peer, int tag, uint64_t peer_seq) { return P2p(rank, kMpiIrecv, OpKind::kRecv, peer, tag, peer_seq, true); }
  void Send(int rank, int peer, int tag, uint64_t peer_seq, bool returns = true) {
    P2p(rank, kMpiSend, OpKind::kSend, peer, tag, peer_seq, false);
    if (returns) Append(rank, Ret(kMpiSend, World(), 0));
  }
  // A blocking receive; with `returns`, it matched `source` with `tag`.
  void Recv(int rank, int peer, int tag, uint64_t peer_seq, bool returns = true, int source = -1) {
    P2p(rank, kMpiRecv, OpKind::kRecv, peer, tag, peer_seq, false);
    if (!returns) return;
    Event ret = Ret(kMpiRecv, World(), 0);
    ret.ret.source = source >= 0 ? source : peer;
    ret.ret.tag = tag;
    ret.ret.peer_seq = peer_seq;
    Append(rank, ret);
  }

  // A blocking wait for `requests`; `completed` of them complete (in order)
  // and, when all do, the wait returns.
  void Wait(int rank, const std::vector<uint64_t>& requests, size_t completed, uint64_t comm = 0, uint64_t seq = 0,
            int source = -1, int tag = 0) {
    Event op = Op(requests.size() == 1 ? kMpiWait : kMpiWaitall, OpKind::kWait, 0, 0);
    op.op.count = static_cast<int64_t>(requests.size());
    for (uint64_t r : requests) op.list.push_back(static_cast<int64_t>(r));
    Append(rank, op);
    for (size_t i = 0; i < completed && i < requests.size(); ++i) {
      CompletionEvent c{};
      c.request = requests[i];
      c.api = kMpiWait;
      c.comm = comm;
      c.seq = seq;
      c.source = source;
      c.tag = tag;
      c.recv_count = -1;
      Append(rank, Event::Make(c));
    }
    if (completed == requests.size()) Append(rank, Ret(kMpiWait, 0, 0));
  }

  void Mark(int rank, const std::string& name, int64_t value) { Append(rank, Event::MakeMark(name, value)); }
  // Writes what the rank appended so far (there is no writer thread; a long
  // rank would fill its ring).
  void Flush(int rank) { REQUIRE(writers_[static_cast<size_t>(rank)]->Flush().ok()); }

  void Finalize(int rank) {
    Append(rank, Op(kMpiFinalize, OpKind::kFinalize, 0, 0));
    Append(rank, Ret(kMpiFinalize, 0, 0));
    REQUIRE(writers_[static_cast<size_t>(rank)]->Close(CloseReason::kFinalize).ok());
  }
  void FinalizeAll() {
    for (int r = 0; r < ranks_; ++r) Finalize(r);
  }
  // The rank exits without MPI_Finalize, wherever it is.
  void Exit(int rank) { REQUIRE(writers_[static_cast<size_t>(rank)]->Close(CloseReason::kExit).ok()); }
  // The rank dies of `signo` (recorded, trace closed), wherever it is.
  void Die(int rank, int signo) {
    SignalEvent s{signo, 0, signo == SIGSEGV ? 0x10u : 0u, true};
    Append(rank, Event::Make(s));
    REQUIRE(writers_[static_cast<size_t>(rank)]->Close(CloseReason::kSignal).ok());
  }
  // The rank's disk fills: its recording stops after what it appended, while
  // it runs on to make `unrecorded` more calls and exit.
  void DiskFull(int rank, int unrecorded) {
    auto& w = writers_[static_cast<size_t>(rank)];
    disks_[static_cast<size_t>(rank)]->FailWritesAfter(0);
    REQUIRE_FALSE(w->Flush().ok());
    for (int i = 0; i < unrecorded; ++i) w->NoteUnrecorded();
    REQUIRE_FALSE(w->Close(CloseReason::kExit).ok());
  }
  // The rank is still running: its events are flushed, its ring stays locked.
  void KeepRunning(int rank) {
    REQUIRE(writers_[static_cast<size_t>(rank)]->Flush().ok());
    running_.push_back(std::move(writers_[static_cast<size_t>(rank)]));
  }
  ~SyntheticJob() {
    for (auto& w : running_) (void)w->Close(CloseReason::kExit);
  }

  static Event Op(uint16_t api, OpKind kind, uint64_t comm, uint64_t seq) {
    OpEvent o{};
    o.api = api;
    o.kind = kind;
    o.comm = comm;
    o.seq = seq;
    o.root = -1;
    o.peer = kNoPeer;
    o.recv_peer = kNoPeer;
    return Event::Make(o);
  }
  static Event Ret(uint16_t api, uint64_t comm, uint64_t seq) {
    ReturnEvent r{};
    r.api = api;
    r.comm = comm;
    r.seq = seq;
    r.source = kNoPeer;
    r.recv_count = -1;
    return Event::Make(r);
  }

 private:
  uint64_t P2p(int rank, uint16_t api, OpKind kind, int peer, int tag, uint64_t peer_seq, bool nonblocking) {
    Event op = Op(api, kind, World(), 0);
    op.op.peer = peer;
    op.op.tag = tag;
    op.op.peer_seq = peer_seq;
    op.op.count = 1;
    op.op.dtype = DataType::kFloat32;
    uint64_t req = 0;
    if (nonblocking) {
      req = next_request_[static_cast<size_t>(rank)]++;
      op.op.flags |= op_flags::kNonBlocking;
      op.op.request = req;
    }
    Append(rank, op);
    if (nonblocking) {
      Event ret = Ret(api, World(), 0);
      ret.ret.request = req;
      Append(rank, ret);
    }
    return req;
  }

  std::string dir_;
  int ranks_;
  int world_ = 0;
  std::vector<std::unique_ptr<FaultFileSystem>> disks_;  // one per rank, before its writer
  std::vector<std::unique_ptr<TraceWriter>> writers_;
  std::vector<std::unique_ptr<TraceWriter>> running_;
  std::vector<uint64_t> next_request_;
};

// Jobs that tests of several folders read.

// 4 ranks on dup(WORLD): with `bcast` a broadcast first, then an allreduce of
// 2048 elements; at the next allreduce rank `odd` passes 1024, returns and
// finalizes, while the others hang in it until SIGTERM.
inline void WriteCountMismatch(const std::string& dir, int odd, bool bcast,
                               std::function<void(int, RankHeader*)> header_hook = nullptr) {
  SyntheticJob job(dir, 4, std::move(header_hook));
  job.InitAll();
  std::vector<int32_t> all = {0, 1, 2, 3};
  for (int r = 0; r < 4; ++r) {
    uint64_t grad = job.Create(r, kMpiCommDup, SyntheticJob::World(), 1, all);
    uint64_t seq = 1;
    if (bcast) {
      job.Collective(r, kMpiBcast, OpKind::kBcast, grad, seq++, 16, r == 0 ? 0xb0 : 0, r == 0 ? 0 : 0xb0, true, 0, 0, 0);
    }
    job.Allreduce(r, grad, seq++, 2048);
    job.Allreduce(r, grad, seq, r == odd ? 1024 : 2048, r == odd);
    if (r == odd) {
      job.Finalize(r);
    } else {
      job.Die(r, SIGTERM);
    }
  }
}

// 3 ranks: a broadcast on dup(WORLD), a ring of messages on WORLD, a mark,
// then an allreduce (#2 on dup(WORLD), or with `on_world` on WORLD) that
// rank 2 never enters: it finalizes, ranks 0 and 1 hang in it until SIGTERM.
inline void WriteRingThenHang(const std::string& dir, bool on_world) {
  SyntheticJob job(dir, 3);
  job.InitAll();
  std::vector<int32_t> all = {0, 1, 2};
  uint64_t grad = 0;
  for (int r = 0; r < 3; ++r) {
    grad = job.Create(r, kMpiCommDup, SyntheticJob::World(), 1, all);
    job.Collective(r, kMpiBcast, OpKind::kBcast, grad, 1, 16, r == 0 ? 0xb0 : 0, r == 0 ? 0 : 0xb0, true, 0, 0, 0);
  }
  for (int r = 0; r < 3; ++r) job.Send(r, (r + 1) % 3, 7, 1);
  for (int r = 0; r < 3; ++r) job.Recv(r, (r + 2) % 3, 7, 1);
  for (int r = 0; r < 3; ++r) job.Mark(r, "checkpoint", 1);
  const uint64_t comm = on_world ? SyntheticJob::World() : grad;
  job.Allreduce(0, comm, 2, 64, false);
  job.Allreduce(1, comm, 2, 64, false);
  job.Die(0, SIGTERM);
  job.Die(1, SIGTERM);
  job.Finalize(2);
}

// 2 ranks, one allreduce on WORLD, then MPI_Finalize. Rank 0 is a Python
// program: its allreduce says it was called from step (train.py:42) in main
// (train.py:80).
inline void WritePythonSiteJob(const std::string& dir) {
  SyntheticJob job(dir, 2);
  job.InitAll();
  PythonSite site{1, 0, {{"step", "train.py", 42}, {"main", "train.py", 80}}};
  job.Append(0, Event::MakeInfo(std::string(kPythonSiteKey), EncodePythonSite(site)));
  job.Allreduce(0, SyntheticJob::World(), 1, 64, true, kPythonSiteTag | 1);
  job.Allreduce(1, SyntheticJob::World(), 1, 64, true, 0);
  job.FinalizeAll();
}

}  // namespace replay::testing
