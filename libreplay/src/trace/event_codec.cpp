#include "trace/event_codec.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <optional>

#include "trace/trace.capnp.h"
#include "util/check.h"

namespace replay {

namespace s = schema;

EventView EventView::Of(const Event& e) {
  return EventView{e.index, e.time_ns, e.thread, e.call_site, e.kind, &e.op,
                   std::span<const int64_t>(e.list), std::string_view(e.text)};
}

namespace {

// Time deltas wrap modulo 2^64 like the indices do, so that any pair of times
// round-trips and a hostile delta cannot overflow a signed sum.
int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

template <typename T>
const T& Body(const EventView& e) {
  return *static_cast<const T*>(e.body);
}

capnp::Text::Reader TextOf(std::string_view v) { return capnp::Text::Reader(v.data(), v.size()); }
capnp::Data::Reader DataOf(std::string_view v) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size());
}

void EncodeBody(const EventView& e, s::Event::Builder b) {
  switch (e.kind) {
    case EventKind::kOp: {
      const auto& o = Body<OpEvent>(e);
      auto g = b.initOp();
      g.setApi(o.api);
      g.setKind(static_cast<s::OpKind>(o.kind));
      g.setFlags(o.flags);
      g.setComm(o.comm);
      g.setSeq(o.seq);
      g.setPeerSeq(o.peer_seq);
      g.setCount(o.count);
      g.setDtype(static_cast<s::DataType>(o.dtype));
      g.setDtypeSize(o.dtype_size);
      g.setDtypeSig(o.dtype_sig);
      g.setRedop(static_cast<s::RedOp>(o.redop));
      g.setRoot(o.root);
      g.setPeer(o.peer);
      g.setTag(o.tag);
      g.setSendBuf(o.send_buf);
      g.setRecvBuf(o.recv_buf);
      g.setStream(o.stream);
      g.setRequest(o.request);
      g.setGroup(o.group);
      g.setBytes(o.bytes);
      g.setSendHash(o.send_hash);
      g.setSendNan(o.send_nan);
      g.setSendInf(o.send_inf);
      g.setRecvPeer(o.recv_peer);
      g.setRecvTag(o.recv_tag);
      g.setRecvCount(o.recv_count);
      g.setRecvDtype(static_cast<s::DataType>(o.recv_dtype));
      g.setRecvDtypeSize(o.recv_dtype_size);
      if (!e.list.empty()) {
        auto l = g.initCounts(static_cast<unsigned>(e.list.size()));
        for (unsigned i = 0; i < e.list.size(); ++i) l.set(i, e.list[i]);
      }
      return;
    }
    case EventKind::kReturn: {
      const auto& r = Body<ReturnEvent>(e);
      auto g = b.initRet();
      g.setApi(r.api);
      g.setRc(r.rc);
      g.setComm(r.comm);
      g.setSeq(r.seq);
      g.setPeerSeq(r.peer_seq);
      g.setRequest(r.request);
      g.setRecvHash(r.recv_hash);
      g.setRecvNan(r.recv_nan);
      g.setRecvInf(r.recv_inf);
      g.setSource(r.source);
      g.setTag(r.tag);
      g.setRecvCount(r.recv_count);
      g.setPayloadHash(r.payload_hash);
      g.setPayloadSize(r.payload_size);
      g.setFlags(r.flags);
      return;
    }
    case EventKind::kCompletion: {
      const auto& c = Body<CompletionEvent>(e);
      auto g = b.initCompletion();
      g.setRequest(c.request);
      g.setApi(c.api);
      g.setComm(c.comm);
      g.setSeq(c.seq);
      g.setPeerSeq(c.peer_seq);
      g.setRc(c.rc);
      g.setRecvHash(c.recv_hash);
      g.setRecvNan(c.recv_nan);
      g.setRecvInf(c.recv_inf);
      g.setSource(c.source);
      g.setTag(c.tag);
      g.setRecvCount(c.recv_count);
      g.setPayloadHash(c.payload_hash);
      g.setPayloadSize(c.payload_size);
      g.setFlags(c.flags);
      g.setCancelled(c.cancelled);
      g.setSendHash(c.send_hash);
      g.setSendNan(c.send_nan);
      g.setSendInf(c.send_inf);
      return;
    }
    case EventKind::kTest: {
      const auto& t = Body<TestEvent>(e);
      auto g = b.initTest();
      g.setApi(t.api);
      g.setFlag(t.flag);
      g.setIndex(t.index);
      g.setSource(t.source);
      g.setTag(t.tag);
      g.setCount(t.count);
      g.setComm(t.comm);
      g.setRc(t.rc);
      if (!e.list.empty()) {
        auto l = g.initIndices(static_cast<unsigned>(e.list.size()));
        for (unsigned i = 0; i < e.list.size(); ++i) l.set(i, static_cast<int32_t>(e.list[i]));
      }
      return;
    }
    case EventKind::kCommCreate: {
      const auto& c = Body<CommCreateEvent>(e);
      auto g = b.initCommCreate();
      g.setComm(c.comm);
      g.setParent(c.parent);
      g.setApi(c.api);
      g.setParentSeq(c.parent_seq);
      g.setColor(c.color);
      g.setKey(c.key);
      g.setSize(c.size);
      g.setRank(c.rank);
      g.setHandle(c.handle);
      g.setFlags(c.flags);
      g.setUniqueId(c.unique_id);
      g.setDevice(c.device);
      if (!e.list.empty()) {
        auto l = g.initMembers(static_cast<unsigned>(e.list.size()));
        for (unsigned i = 0; i < e.list.size(); ++i) l.set(i, static_cast<int32_t>(e.list[i]));
      }
      return;
    }
    case EventKind::kCommFree: {
      const auto& c = Body<CommFreeEvent>(e);
      auto g = b.initCommFree();
      g.setComm(c.comm);
      g.setApi(c.api);
      g.setRc(c.rc);
      return;
    }
    case EventKind::kGroup: {
      const auto& x = Body<GroupEvent>(e);
      auto g = b.initGroup();
      g.setIsEnd(x.is_end);
      g.setId(x.id);
      g.setDepth(x.depth);
      g.setApi(x.api);
      g.setRc(x.rc);
      return;
    }
    case EventKind::kEntropy: {
      const auto& x = Body<EntropyEvent>(e);
      auto g = b.initEntropy();
      g.setSource(static_cast<s::EntropySource>(x.source));
      g.setRequested(x.requested);
      g.setFlags(x.flags);
      g.setRc(x.rc);
      g.setBytes(DataOf(e.text));
      return;
    }
    case EventKind::kSeed: {
      const auto& x = Body<SeedEvent>(e);
      auto g = b.initSeed();
      g.setSource(static_cast<s::SeedSource>(x.source));
      g.setValue(x.value);
      g.setState(x.state);
      return;
    }
    case EventKind::kCuda: {
      const auto& x = Body<CudaEvent>(e);
      auto g = b.initCuda();
      g.setOp(static_cast<s::CudaOp>(x.op));
      g.setStream(x.stream);
      g.setEvent(x.event);
      g.setGraph(x.graph);
      g.setOther(x.other);
      g.setRc(x.rc);
      g.setCount(x.count);
      g.setDevice(x.device);
      return;
    }
    case EventKind::kMark: {
      auto g = b.initMark();
      g.setName(TextOf(e.text));
      g.setValue(Body<MarkEvent>(e).value);
      return;
    }
    case EventKind::kError: {
      const auto& x = Body<ErrorEvent>(e);
      auto g = b.initError();
      g.setSource(static_cast<s::ErrorSource>(x.source));
      g.setCode(x.code);
      g.setComm(x.comm);
      g.setMessage(TextOf(e.text));
      return;
    }
    case EventKind::kSignal: {
      const auto& x = Body<SignalEvent>(e);
      auto g = b.initSignal();
      g.setSigno(x.signo);
      g.setCode(x.code);
      g.setAddress(x.address);
      g.setFatal(x.fatal);
      return;
    }
    case EventKind::kDrop: {
      b.initDrop().setCount(Body<DropEvent>(e).count);
      return;
    }
    case EventKind::kInfo: {
      const auto& x = Body<InfoEvent>(e);
      auto g = b.initInfo();
      size_t k = std::min<size_t>(x.key_size, e.text.size());
      g.setKey(TextOf(e.text.substr(0, k)));
      g.setValue(TextOf(e.text.substr(k)));
      return;
    }
  }
  REPLAY_CHECK(false && "unknown event kind", static_cast<int>(e.kind));
}

// Each pointer is followed once: every read counts against the traversal limit.
std::string TextString(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

void DecodeBody(s::Event::Reader r, Event* e) {
  e->list.clear();
  e->text.clear();
  switch (r.which()) {
    case s::Event::OP: {
      auto g = r.getOp();
      e->kind = EventKind::kOp;
      OpEvent& o = e->op;
      o = OpEvent{};
      o.api = g.getApi();
      o.kind = static_cast<OpKind>(g.getKind());
      o.flags = g.getFlags();
      o.comm = g.getComm();
      o.seq = g.getSeq();
      o.peer_seq = g.getPeerSeq();
      o.count = g.getCount();
      o.dtype = static_cast<DataType>(g.getDtype());
      o.dtype_size = g.getDtypeSize();
      o.dtype_sig = g.getDtypeSig();
      o.redop = static_cast<RedOp>(g.getRedop());
      o.root = g.getRoot();
      o.peer = g.getPeer();
      o.tag = g.getTag();
      o.send_buf = g.getSendBuf();
      o.recv_buf = g.getRecvBuf();
      o.stream = g.getStream();
      o.request = g.getRequest();
      o.group = g.getGroup();
      o.bytes = g.getBytes();
      o.send_hash = g.getSendHash();
      o.send_nan = g.getSendNan();
      o.send_inf = g.getSendInf();
      o.recv_peer = g.getRecvPeer();
      o.recv_tag = g.getRecvTag();
      o.recv_count = g.getRecvCount();
      o.recv_dtype = static_cast<DataType>(g.getRecvDtype());
      o.recv_dtype_size = g.getRecvDtypeSize();
      for (int64_t v : g.getCounts()) e->list.push_back(v);
      return;
    }
    case s::Event::RET: {
      auto g = r.getRet();
      e->kind = EventKind::kReturn;
      ReturnEvent& x = e->ret;
      x = ReturnEvent{};
      x.api = g.getApi();
      x.rc = g.getRc();
      x.comm = g.getComm();
      x.seq = g.getSeq();
      x.peer_seq = g.getPeerSeq();
      x.request = g.getRequest();
      x.recv_hash = g.getRecvHash();
      x.recv_nan = g.getRecvNan();
      x.recv_inf = g.getRecvInf();
      x.source = g.getSource();
      x.tag = g.getTag();
      x.recv_count = g.getRecvCount();
      x.payload_hash = g.getPayloadHash();
      x.payload_size = g.getPayloadSize();
      x.flags = g.getFlags();
      return;
    }
    case s::Event::COMPLETION: {
      auto g = r.getCompletion();
      e->kind = EventKind::kCompletion;
      CompletionEvent& x = e->completion;
      x = CompletionEvent{};
      x.request = g.getRequest();
      x.api = g.getApi();
      x.comm = g.getComm();
      x.seq = g.getSeq();
      x.peer_seq = g.getPeerSeq();
      x.rc = g.getRc();
      x.recv_hash = g.getRecvHash();
      x.recv_nan = g.getRecvNan();
      x.recv_inf = g.getRecvInf();
      x.source = g.getSource();
      x.tag = g.getTag();
      x.recv_count = g.getRecvCount();
      x.payload_hash = g.getPayloadHash();
      x.payload_size = g.getPayloadSize();
      x.flags = g.getFlags();
      x.cancelled = g.getCancelled();
      x.send_hash = g.getSendHash();
      x.send_nan = g.getSendNan();
      x.send_inf = g.getSendInf();
      return;
    }
    case s::Event::TEST: {
      auto g = r.getTest();
      e->kind = EventKind::kTest;
      TestEvent& x = e->test;
      x = TestEvent{};
      x.api = g.getApi();
      x.flag = g.getFlag();
      x.index = g.getIndex();
      x.source = g.getSource();
      x.tag = g.getTag();
      x.count = g.getCount();
      x.comm = g.getComm();
      x.rc = g.getRc();
      for (int32_t v : g.getIndices()) e->list.push_back(v);
      return;
    }
    case s::Event::COMM_CREATE: {
      auto g = r.getCommCreate();
      e->kind = EventKind::kCommCreate;
      CommCreateEvent& x = e->comm_create;
      x = CommCreateEvent{};
      x.comm = g.getComm();
      x.parent = g.getParent();
      x.api = g.getApi();
      x.parent_seq = g.getParentSeq();
      x.color = g.getColor();
      x.key = g.getKey();
      x.size = g.getSize();
      x.rank = g.getRank();
      x.handle = g.getHandle();
      x.flags = g.getFlags();
      x.unique_id = g.getUniqueId();
      x.device = g.getDevice();
      for (int32_t v : g.getMembers()) e->list.push_back(v);
      return;
    }
    case s::Event::COMM_FREE: {
      auto g = r.getCommFree();
      e->kind = EventKind::kCommFree;
      e->comm_free = CommFreeEvent{g.getComm(), g.getApi(), g.getRc()};
      return;
    }
    case s::Event::GROUP: {
      auto g = r.getGroup();
      e->kind = EventKind::kGroup;
      e->group = GroupEvent{g.getIsEnd(), g.getApi(), g.getId(), g.getDepth(), g.getRc()};
      return;
    }
    case s::Event::ENTROPY: {
      auto g = r.getEntropy();
      e->kind = EventKind::kEntropy;
      e->entropy = EntropyEvent{static_cast<EntropySource>(g.getSource()), g.getFlags(),
                                g.getRequested(), g.getRc()};
      auto bytes = g.getBytes();
      e->text.assign(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
      return;
    }
    case s::Event::SEED: {
      auto g = r.getSeed();
      e->kind = EventKind::kSeed;
      e->seed = SeedEvent{static_cast<SeedSource>(g.getSource()), g.getValue(), g.getState()};
      return;
    }
    case s::Event::CUDA: {
      auto g = r.getCuda();
      e->kind = EventKind::kCuda;
      e->cuda = CudaEvent{static_cast<CudaOp>(g.getOp()), g.getRc(), g.getDevice(), g.getStream(),
                          g.getEvent(), g.getGraph(), g.getOther(), g.getCount()};
      return;
    }
    case s::Event::MARK: {
      auto g = r.getMark();
      e->kind = EventKind::kMark;
      e->mark = MarkEvent{g.getValue()};
      e->text = TextString(g.getName());
      return;
    }
    case s::Event::ERROR: {
      auto g = r.getError();
      e->kind = EventKind::kError;
      e->error = ErrorEvent{static_cast<ErrorSource>(g.getSource()), g.getCode(), g.getComm()};
      e->text = TextString(g.getMessage());
      return;
    }
    case s::Event::SIGNAL: {
      auto g = r.getSignal();
      e->kind = EventKind::kSignal;
      e->signal = SignalEvent{g.getSigno(), g.getCode(), g.getAddress(), g.getFatal()};
      return;
    }
    case s::Event::DROP: {
      e->kind = EventKind::kDrop;
      e->drop = DropEvent{r.getDrop().getCount()};
      return;
    }
    case s::Event::INFO: {
      auto g = r.getInfo();
      e->kind = EventKind::kInfo;
      e->text = TextString(g.getKey());
      e->info = InfoEvent{static_cast<uint32_t>(e->text.size())};
      e->text += TextString(g.getValue());
      return;
    }
  }
  // A kind added by a newer writer: keep the event's place, say what it was.
  e->kind = EventKind::kInfo;
  e->text = "replay.unknown_event";
  e->info = InfoEvent{static_cast<uint32_t>(e->text.size())};
  e->text += std::to_string(static_cast<int>(r.which()));
}

}  // namespace

namespace {

// The last non-zero `seq` per communicator within a block (EventBlock.seqDelta):
// direct-mapped, so that the encoder and every decoder keep the same state.
class SeqTable {
 public:
  void Clear() { std::memset(slots_, 0, sizeof(slots_)); }
  uint64_t Last(uint64_t comm) const {
    const Slot& s = slots_[SlotOf(comm)];
    return s.comm == comm ? s.seq : 0;
  }
  void Note(uint64_t comm, uint64_t seq) {
    if (seq != 0) slots_[SlotOf(comm)] = Slot{comm, seq};
  }
  // Stored value of `seq`, and back.
  uint64_t Encode(uint64_t comm, uint64_t seq) {
    uint64_t stored = seq - Last(comm);
    Note(comm, seq);
    return stored;
  }
  uint64_t Decode(uint64_t comm, uint64_t stored) {
    uint64_t seq = Last(comm) + stored;
    Note(comm, seq);
    return seq;
  }

 private:
  struct Slot {
    uint64_t comm;
    uint64_t seq;
  };
  static size_t SlotOf(uint64_t comm) { return static_cast<size_t>((comm * 0x9E3779B97F4A7C15ull) >> 58); }
  Slot slots_[64] = {};
};

}  // namespace

struct EventBlockEncoder::Impl {
  // [segment table word][first segment]: a block that fits one segment is
  // serialised where it was built, without a copy.
  std::vector<capnp::word> buffer;
  std::optional<capnp::MallocMessageBuilder> message;
  capnp::List<s::Event>::Builder events{};
  capnp::List<int64_t>::Builder time_deltas{};
  SeqTable seqs;
  unsigned next = 0;
  uint64_t prev_index = 0;
  int64_t prev_time = 0;
  std::string spilled;  // the serialised message when it needed more segments
};

namespace {

// Words one Event takes in an event list, and a block's fixed overhead (root
// pointer, EventBlock, list pointer and tag, with room to spare).
constexpr size_t kEventWords =
    s::Event::_capnpPrivate::dataWordSize + s::Event::_capnpPrivate::pointerCount;
constexpr size_t kBlockOverheadWords = 16;
// Event's data section in the first version of the schema (format epoch 1).
constexpr size_t kFirstEventDataWords = 20;
static_assert(s::Event::_capnpPrivate::dataWordSize >= kFirstEventDataWords);

}  // namespace

EventBlockEncoder::EventBlockEncoder() : impl_(std::make_unique<Impl>()) {
  impl_->buffer = std::vector<capnp::word>(1 + (1 << 17));  // 1 MiB, grown as blocks need
}

EventBlockEncoder::~EventBlockEncoder() = default;

void EventBlockEncoder::Begin(size_t count, uint64_t first_index, int64_t base_time_ns) {
  Impl& m = *impl_;
  m.message.reset();  // zeroes the used part of the first segment for reuse
  // Room for every event's struct, so lists and text are all that can spill
  // into a second segment. The buffer only grows, and stays zeroed.
  size_t want = 1 + count * (kEventWords + 1) + kBlockOverheadWords + count / 4;
  if (m.buffer.size() < want) m.buffer = std::vector<capnp::word>(want + want / 4);  // zeroed
  m.message.emplace(kj::arrayPtr(m.buffer.data() + 1, m.buffer.size() - 1));
  auto block = m.message->initRoot<s::EventBlock>();
  block.setFirstIndex(first_index);
  block.setBaseTimeNs(base_time_ns);
  m.events = block.initEvents(static_cast<unsigned>(count));
  m.time_deltas = block.initTimeDeltas(static_cast<unsigned>(count));
  block.setSeqDelta(true);
  m.seqs.Clear();
  m.next = 0;
  m.prev_index = first_index - 1;
  m.prev_time = base_time_ns;
}

void EventBlockEncoder::Add(const EventView& e) {
  Impl& m = *impl_;
  REPLAY_CHECK(m.next < m.events.size(), m.next, m.events.size());
  m.time_deltas.set(m.next, WrappingSub(e.time_ns, m.prev_time));
  auto b = m.events[m.next++];
  b.setIndexGap(static_cast<int64_t>(e.index - m.prev_index - 1));
  b.setThread(e.thread);
  b.setCallSite(e.call_site);
  m.prev_index = e.index;
  m.prev_time = e.time_ns;
  EncodeBody(e, b);
  switch (e.kind) {
    case EventKind::kOp: {
      const auto& o = Body<OpEvent>(e);
      b.getOp().setSeq(m.seqs.Encode(o.comm, o.seq));
      break;
    }
    case EventKind::kReturn: {
      const auto& r = Body<ReturnEvent>(e);
      b.getRet().setSeq(m.seqs.Encode(r.comm, r.seq));
      break;
    }
    case EventKind::kCompletion: {
      const auto& c = Body<CompletionEvent>(e);
      b.getCompletion().setSeq(m.seqs.Encode(c.comm, c.seq));
      break;
    }
    default:
      break;
  }
}

std::span<const uint8_t> EventBlockEncoder::Finish() {
  Impl& m = *impl_;
  REPLAY_CHECK(m.next == m.events.size(), m.next, m.events.size());
  auto segments = m.message->getSegmentsForOutput();
  // Standard stream framing (capnp/serialize.h): segment count - 1, sizes, pad, segments.
  if (segments.size() == 1 && segments[0].begin() == m.buffer.data() + 1) {
    auto* table = reinterpret_cast<uint32_t*>(m.buffer.data());
    table[0] = 0;
    table[1] = static_cast<uint32_t>(segments[0].size());
    return {reinterpret_cast<const uint8_t*>(m.buffer.data()),
            (1 + segments[0].size()) * sizeof(capnp::word)};
  }
  size_t table_words = (segments.size() + 2) / 2;
  size_t words = table_words;
  for (auto seg : segments) words += seg.size();
  m.spilled.resize(words * sizeof(capnp::word));
  auto* table = reinterpret_cast<uint32_t*>(m.spilled.data());
  std::memset(table, 0, table_words * sizeof(capnp::word));
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  for (size_t i = 0; i < segments.size(); ++i) table[i + 1] = static_cast<uint32_t>(segments[i].size());
  char* p = m.spilled.data() + table_words * sizeof(capnp::word);
  for (auto seg : segments) {
    std::memcpy(p, seg.begin(), seg.size() * sizeof(capnp::word));
    p += seg.size() * sizeof(capnp::word);
  }
  return {reinterpret_cast<const uint8_t*>(m.spilled.data()), m.spilled.size()};
}

void EventBlockEncoder::Finish(std::string* out) {
  std::span<const uint8_t> bytes = Finish();
  out->assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Status DecodeEventBlock(std::span<const uint8_t> raw, std::vector<Event>* out) {
  if (raw.size() % sizeof(capnp::word) != 0 || raw.empty()) {
    return Status::Corruption("event block is not a whole number of words");
  }
  // Cap'n Proto needs word alignment; copy into words.
  std::vector<capnp::word> words(raw.size() / sizeof(capnp::word));
  std::memcpy(words.data(), raw.data(), raw.size());
  try {
    capnp::ReaderOptions options;
    // A writer's message is read once: each object is visited a single time.
    options.traversalLimitInWords = words.size() + 1024;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()), options);
    auto block = reader.getRoot<s::EventBlock>();
    uint64_t index = block.getFirstIndex() - 1;
    int64_t time = block.getBaseTimeNs();
    auto events = block.getEvents();
    // Epoch 2: time deltas in a column, seq relative per communicator.
    auto time_deltas = block.getTimeDeltas();
    const bool time_column = block.hasTimeDeltas();
    if (time_column && time_deltas.size() != events.size()) {
      return Status::Corruption("event block holds " + std::to_string(time_deltas.size()) + " time deltas for " +
                                std::to_string(events.size()) + " events");
    }
    const bool seq_delta = block.getSeqDelta();
    SeqTable seqs;
    // Every writer gives an Event at least the data section of the first
    // schema (its union tag is in the last of those words; later schemas only
    // grow it). Smaller elements are damage, and would let a few compressed
    // bytes declare millions of events.
    if (events.size() != 0 &&
        capnp::AnyStruct::Reader(events[0]).getDataSection().size() <
            kFirstEventDataWords * sizeof(capnp::word)) {
      return Status::Corruption("event block holds events smaller than any writer makes");
    }
    for (unsigned i = 0; i < events.size(); ++i) {
      auto r = events[i];
      Event e;
      index = index + 1 + static_cast<uint64_t>(r.getIndexGap());
      time = WrappingAdd(time, r.getTimeDeltaNs());
      if (time_column) time = WrappingAdd(time, time_deltas[i]);
      e.index = index;
      e.time_ns = time;
      e.thread = r.getThread();
      e.call_site = r.getCallSite();
      DecodeBody(r, &e);
      if (seq_delta) {
        switch (e.kind) {
          case EventKind::kOp: e.op.seq = seqs.Decode(e.op.comm, e.op.seq); break;
          case EventKind::kReturn: e.ret.seq = seqs.Decode(e.ret.comm, e.ret.seq); break;
          case EventKind::kCompletion: e.completion.seq = seqs.Decode(e.completion.comm, e.completion.seq); break;
          default: break;
        }
      }
      out->push_back(std::move(e));
    }
  } catch (const kj::Exception& ex) {
    return Status::Corruption(std::string("event block does not decode: ") +
                              ex.getDescription().cStr());
  }
  return Status::Ok();
}

}  // namespace replay
