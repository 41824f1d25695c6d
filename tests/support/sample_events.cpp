#include "support/sample_events.h"

namespace replay::testing {

std::vector<Event> SampleEventsOfEveryKind() {
  std::vector<Event> out;
  {
    OpEvent o{};
    o.api = 3;
    o.kind = OpKind::kAllgatherv;
    o.flags = op_flags::kNonBlocking | op_flags::kHasSendHash;
    o.comm = 0x1111222233334444;
    o.seq = 17;
    o.peer_seq = 0;
    o.count = 4096;
    o.dtype = DataType::kBfloat16;
    o.redop = RedOp::kNone;
    o.dtype_size = 2;
    o.dtype_sig = 0;
    o.root = -1;
    o.peer = kNoPeer;
    o.tag = 0;
    o.group = 5;
    o.send_buf = 0x7f0000001000;
    o.recv_buf = 0x7f0000002000;
    o.stream = 0x55;
    o.request = 9;
    o.bytes = 8192;
    o.send_hash = 0xdeadbeefcafef00d;
    o.send_nan = 2;
    o.send_inf = 1;
    o.recv_peer = 3;
    o.recv_tag = 12;
    o.recv_count = 256;
    o.recv_dtype = DataType::kFloat16;
    o.recv_dtype_size = 2;
    Event e = Event::Make(o);
    e.list = {1024, 1024, 1024, 1024};
    out.push_back(e);
  }
  {
    ReturnEvent r{};
    r.api = 4;
    r.flags = op_flags::kHasRecvHash;
    r.rc = 0;
    r.comm = 0xabc;
    r.seq = 2;
    r.peer_seq = 7;
    r.request = 0;
    r.recv_hash = 0x1234;
    r.recv_nan = 3;
    r.recv_inf = 4;
    r.source = 2;
    r.tag = 99;
    r.recv_count = 16;
    r.payload_hash = 0x999;
    r.payload_size = 64;
    out.push_back(Event::Make(r));
  }
  {
    CompletionEvent c{};
    c.request = 9;
    c.api = 5;
    c.flags = op_flags::kHasRecvHash;
    c.rc = 0;
    c.comm = 0xabc;
    c.seq = 3;
    c.peer_seq = 1;
    c.recv_hash = 0x77;
    c.recv_nan = 0;
    c.recv_inf = 0;
    c.source = 1;
    c.tag = 5;
    c.recv_count = 8;
    c.payload_hash = 0x55;
    c.payload_size = 32;
    c.cancelled = true;
    c.send_hash = 0x4242;
    c.send_nan = 1;
    c.send_inf = 2;
    out.push_back(Event::Make(c));
  }
  {
    TestEvent t{};
    t.api = 6;
    t.flag = true;
    t.index = -1;
    t.source = 3;
    t.tag = 11;
    t.count = 12;
    t.comm = 0xabc;
    t.rc = 0;
    Event e = Event::Make(t);
    e.list = {2, 0, 1};
    out.push_back(e);
  }
  {
    CommCreateEvent c{};
    c.comm = 0xc0ffee;
    c.parent = 0xabc;
    c.api = 7;
    c.flags = comm_flags::kNccl;
    c.size = 4;
    c.parent_seq = 12;
    c.color = 1;
    c.key = -5;
    c.rank = 2;
    c.device = 3;
    c.handle = 0x5555;
    c.unique_id = 0x42;
    Event e = Event::Make(c);
    e.list = {0, 2, 4, 6};
    out.push_back(e);
  }
  out.push_back(Event::Make(CommFreeEvent{0xc0ffee, 8, 0}));
  out.push_back(Event::Make(GroupEvent{true, 9, 4, 1, 0}));
  {
    Event e = Event::Make(EntropyEvent{EntropySource::kDevUrandom, 1, 16, 16});
    e.text = std::string("\x00\x01\x02\xff random bytes!", 16);
    out.push_back(e);
  }
  out.push_back(Event::Make(SeedEvent{SeedSource::kSrandom, 12345, 0x600000}));
  out.push_back(Event::Make(CudaEvent{CudaOp::kStreamWaitEvent, 0, 1, 0x10, 0x20, 0x30, 0x40, 7}));
  out.push_back(Event::MakeMark("checkpoint", 40));
  {
    Event e = Event::Make(ErrorEvent{ErrorSource::kNccl, 5, 0xc0ffee});
    e.text = "unhandled system error";
    out.push_back(e);
  }
  out.push_back(Event::Make(SignalEvent{11, 1, 0x8, true}));
  out.push_back(Event::Make(DropEvent{42}));
  out.push_back(Event::MakeInfo("mpi.world_rank", "3"));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].index = i;
    out[i].time_ns = 1000 * static_cast<int64_t>(i) + 7;
    out[i].thread = static_cast<uint32_t>(i % 3);
    out[i].call_site = 0x400000 + i;
  }
  return out;
}

Event AllreduceOp(uint64_t comm, uint64_t seq, int64_t count, uint64_t send_hash) {
  OpEvent o{};
  o.api = 1;
  o.kind = OpKind::kAllreduce;
  o.flags = op_flags::kHasSendHash;
  o.comm = comm;
  o.seq = seq;
  o.count = count;
  o.dtype = DataType::kFloat32;
  o.redop = RedOp::kSum;
  o.dtype_size = 4;
  o.root = -1;
  o.peer = kNoPeer;
  o.send_buf = 0x7f00aa000000;
  o.recv_buf = 0x7f00bb000000;
  o.bytes = static_cast<uint64_t>(count) * 4;
  o.send_hash = send_hash;
  return Event::Make(o);
}

std::vector<Event> Epoch2FixtureEvents() {
  std::vector<Event> in = SampleEventsOfEveryKind();
  uint64_t index = in.size();
  int64_t t = 20000;
  const uint64_t comms[] = {0x1111222233334444, 0xabc};
  for (int i = 0; i < 6; ++i) {
    Event e = AllreduceOp(comms[i % 2], 100 + static_cast<uint64_t>(i / 2), 8, 0x5000 + i);
    e.index = index++;
    if (i == 3) ++index;
    e.time_ns = (t += (i == 4 ? -300 : 1500));
    e.thread = i % 2;
    e.call_site = 0x401000 + i;
    in.push_back(e);
  }
  return in;
}

}  // namespace replay::testing
