#include "trace/event_codec.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "trace/format.h"
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

// The schema numbers kinds in the order of Event's union, from 0; EventKind
// counts from 1 in the same order.
constexpr size_t kKinds = kEventKindCount;
size_t KindSlot(EventKind k) { return static_cast<size_t>(k) - 1; }
static_assert(static_cast<int>(s::EventKind::INFO) + 1 == kEventKindCount);
static_assert(static_cast<int>(s::EventKind::OP) + 1 == static_cast<int>(EventKind::kOp));
static_assert(static_cast<int>(s::EventKind::INFO) + 1 == static_cast<int>(EventKind::kInfo));

// ---------------------------------------------------------------------------
// The fields of each kind, read from either layout: `G` is a member of Event's
// union (epochs 1 and 2) or the kind's record (epoch 3), whose accessors have
// the same names. (A field only one of them has would be read under
// `if constexpr (requires { g.getField(); })`.) Epoch 3 keeps the hashes that
// flags announce in a column; the decoder puts them in place afterwards.

std::string TextString(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

template <typename G>
void ReadOp(G g, Event* e) {
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
}

template <typename G>
void ReadRet(G g, Event* e) {
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
}

template <typename G>
void ReadCompletion(G g, Event* e) {
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
}

template <typename G>
void ReadTest(G g, Event* e) {
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
}

template <typename G>
void ReadCommCreate(G g, Event* e) {
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
}

template <typename G>
void ReadCommFree(G g, Event* e) {
  e->kind = EventKind::kCommFree;
  e->comm_free = CommFreeEvent{g.getComm(), g.getApi(), g.getRc()};
}

template <typename G>
void ReadGroup(G g, Event* e) {
  e->kind = EventKind::kGroup;
  e->group = GroupEvent{g.getIsEnd(), g.getApi(), g.getId(), g.getDepth(), g.getRc()};
}

template <typename G>
void ReadEntropy(G g, Event* e) {
  e->kind = EventKind::kEntropy;
  e->entropy = EntropyEvent{static_cast<EntropySource>(g.getSource()), g.getFlags(),
                            g.getRequested(), g.getRc()};
  auto bytes = g.getBytes();
  e->text.assign(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

template <typename G>
void ReadSeed(G g, Event* e) {
  e->kind = EventKind::kSeed;
  e->seed = SeedEvent{static_cast<SeedSource>(g.getSource()), g.getValue(), g.getState()};
}

template <typename G>
void ReadCuda(G g, Event* e) {
  e->kind = EventKind::kCuda;
  e->cuda = CudaEvent{static_cast<CudaOp>(g.getOp()), g.getRc(), g.getDevice(), g.getStream(),
                      g.getEvent(), g.getGraph(), g.getOther(), g.getCount()};
}

template <typename G>
void ReadMark(G g, Event* e) {
  e->kind = EventKind::kMark;
  e->mark = MarkEvent{g.getValue()};
  e->text = TextString(g.getName());
}

template <typename G>
void ReadError(G g, Event* e) {
  e->kind = EventKind::kError;
  e->error = ErrorEvent{static_cast<ErrorSource>(g.getSource()), g.getCode(), g.getComm()};
  e->text = TextString(g.getMessage());
}

template <typename G>
void ReadSignal(G g, Event* e) {
  e->kind = EventKind::kSignal;
  e->signal = SignalEvent{g.getSigno(), g.getCode(), g.getAddress(), g.getFatal()};
}

template <typename G>
void ReadDrop(G g, Event* e) {
  e->kind = EventKind::kDrop;
  e->drop = DropEvent{g.getCount()};
}

template <typename G>
void ReadInfo(G g, Event* e) {
  e->kind = EventKind::kInfo;
  e->text = TextString(g.getKey());
  e->info = InfoEvent{static_cast<uint32_t>(e->text.size())};
  e->text += TextString(g.getValue());
}

// A kind added by a newer writer: the event keeps its place, and says what it was.
void ReadUnknown(unsigned kind, Event* e) {
  e->kind = EventKind::kInfo;
  e->text = "replay.unknown_event";
  e->info = InfoEvent{static_cast<uint32_t>(e->text.size())};
  e->text += std::to_string(kind);
}

// An element of Event's union (epochs 1 and 2).
void ReadUnionMember(s::Event::Reader r, Event* e) {
  switch (r.which()) {
    case s::Event::OP: return ReadOp(r.getOp(), e);
    case s::Event::RET: return ReadRet(r.getRet(), e);
    case s::Event::COMPLETION: return ReadCompletion(r.getCompletion(), e);
    case s::Event::TEST: return ReadTest(r.getTest(), e);
    case s::Event::COMM_CREATE: return ReadCommCreate(r.getCommCreate(), e);
    case s::Event::COMM_FREE: return ReadCommFree(r.getCommFree(), e);
    case s::Event::GROUP: return ReadGroup(r.getGroup(), e);
    case s::Event::ENTROPY: return ReadEntropy(r.getEntropy(), e);
    case s::Event::SEED: return ReadSeed(r.getSeed(), e);
    case s::Event::CUDA: return ReadCuda(r.getCuda(), e);
    case s::Event::MARK: return ReadMark(r.getMark(), e);
    case s::Event::ERROR: return ReadError(r.getError(), e);
    case s::Event::SIGNAL: return ReadSignal(r.getSignal(), e);
    case s::Event::DROP: return ReadDrop(r.getDrop(), e);
    case s::Event::INFO: return ReadInfo(r.getInfo(), e);
  }
  ReadUnknown(static_cast<unsigned>(r.which()), e);
}

// ---------------------------------------------------------------------------
// Epoch 3 records, written. A hash that its flag announces goes to the block's
// fingerprint column instead (the encoder's Add), and its field stays 0.

bool Flagged(uint16_t flags, uint16_t flag) { return (flags & flag) != 0; }

void WriteOp(const EventView& e, s::OpRecord::Builder g) {
  const auto& o = Body<OpEvent>(e);
  g.setApi(o.api);
  g.setKind(static_cast<s::OpKind>(o.kind));
  g.setFlags(o.flags);
  g.setComm(o.comm);
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
  if (!Flagged(o.flags, op_flags::kHasSendHash)) g.setSendHash(o.send_hash);
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
}

void WriteRet(const EventView& e, s::RetRecord::Builder g) {
  const auto& r = Body<ReturnEvent>(e);
  g.setApi(r.api);
  g.setRc(r.rc);
  g.setComm(r.comm);
  g.setPeerSeq(r.peer_seq);
  g.setRequest(r.request);
  if (!Flagged(r.flags, op_flags::kHasRecvHash)) g.setRecvHash(r.recv_hash);
  g.setRecvNan(r.recv_nan);
  g.setRecvInf(r.recv_inf);
  g.setSource(r.source);
  g.setTag(r.tag);
  g.setRecvCount(r.recv_count);
  g.setPayloadHash(r.payload_hash);
  g.setPayloadSize(r.payload_size);
  g.setFlags(r.flags);
}

void WriteCompletion(const EventView& e, s::CompletionRecord::Builder g) {
  const auto& c = Body<CompletionEvent>(e);
  g.setRequest(c.request);
  g.setApi(c.api);
  g.setComm(c.comm);
  g.setPeerSeq(c.peer_seq);
  g.setRc(c.rc);
  if (!Flagged(c.flags, op_flags::kHasRecvHash)) g.setRecvHash(c.recv_hash);
  g.setRecvNan(c.recv_nan);
  g.setRecvInf(c.recv_inf);
  g.setSource(c.source);
  g.setTag(c.tag);
  g.setRecvCount(c.recv_count);
  g.setPayloadHash(c.payload_hash);
  g.setPayloadSize(c.payload_size);
  g.setFlags(c.flags);
  g.setCancelled(c.cancelled);
  if (!Flagged(c.flags, op_flags::kHasSendHash)) g.setSendHash(c.send_hash);
  g.setSendNan(c.send_nan);
  g.setSendInf(c.send_inf);
}

void WriteTest(const EventView& e, s::TestRecord::Builder g) {
  const auto& t = Body<TestEvent>(e);
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
}

void WriteCommCreate(const EventView& e, s::CommCreateRecord::Builder g) {
  const auto& c = Body<CommCreateEvent>(e);
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
}

void WriteCommFree(const EventView& e, s::CommFreeRecord::Builder g) {
  const auto& c = Body<CommFreeEvent>(e);
  g.setComm(c.comm);
  g.setApi(c.api);
  g.setRc(c.rc);
}

void WriteGroup(const EventView& e, s::GroupRecord::Builder g) {
  const auto& x = Body<GroupEvent>(e);
  g.setIsEnd(x.is_end);
  g.setId(x.id);
  g.setDepth(x.depth);
  g.setApi(x.api);
  g.setRc(x.rc);
}

void WriteEntropy(const EventView& e, s::EntropyRecord::Builder g) {
  const auto& x = Body<EntropyEvent>(e);
  g.setSource(static_cast<s::EntropySource>(x.source));
  g.setRequested(x.requested);
  g.setFlags(x.flags);
  g.setRc(x.rc);
  g.setBytes(DataOf(e.text));
}

void WriteSeed(const EventView& e, s::SeedRecord::Builder g) {
  const auto& x = Body<SeedEvent>(e);
  g.setSource(static_cast<s::SeedSource>(x.source));
  g.setValue(x.value);
  g.setState(x.state);
}

void WriteCuda(const EventView& e, s::CudaRecord::Builder g) {
  const auto& x = Body<CudaEvent>(e);
  g.setOp(static_cast<s::CudaOp>(x.op));
  g.setStream(x.stream);
  g.setEvent(x.event);
  g.setGraph(x.graph);
  g.setOther(x.other);
  g.setRc(x.rc);
  g.setCount(x.count);
  g.setDevice(x.device);
}

void WriteMark(const EventView& e, s::MarkRecord::Builder g) {
  g.setName(TextOf(e.text));
  g.setValue(Body<MarkEvent>(e).value);
}

void WriteError(const EventView& e, s::ErrorRecord::Builder g) {
  const auto& x = Body<ErrorEvent>(e);
  g.setSource(static_cast<s::ErrorSource>(x.source));
  g.setCode(x.code);
  g.setComm(x.comm);
  g.setMessage(TextOf(e.text));
}

void WriteSignal(const EventView& e, s::SignalRecord::Builder g) {
  const auto& x = Body<SignalEvent>(e);
  g.setSigno(x.signo);
  g.setCode(x.code);
  g.setAddress(x.address);
  g.setFatal(x.fatal);
}

void WriteDrop(const EventView& e, s::DropRecord::Builder g) { g.setCount(Body<DropEvent>(e).count); }

void WriteInfo(const EventView& e, s::InfoRecord::Builder g) {
  const auto& x = Body<InfoEvent>(e);
  size_t k = std::min<size_t>(x.key_size, e.text.size());
  g.setKey(TextOf(e.text.substr(0, k)));
  g.setValue(TextOf(e.text.substr(k)));
}

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

// Words one element of a struct list of `T` takes.
template <typename T>
constexpr size_t RecordWords() {
  return T::_capnpPrivate::dataWordSize + T::_capnpPrivate::pointerCount;
}

// Words of a record list per kind, in EventKind order.
constexpr std::array<size_t, kKinds> kRecordWords = {
    RecordWords<s::OpRecord>(),         RecordWords<s::RetRecord>(),
    RecordWords<s::CompletionRecord>(), RecordWords<s::TestRecord>(),
    RecordWords<s::CommCreateRecord>(), RecordWords<s::CommFreeRecord>(),
    RecordWords<s::GroupRecord>(),      RecordWords<s::EntropyRecord>(),
    RecordWords<s::SeedRecord>(),       RecordWords<s::CudaRecord>(),
    RecordWords<s::MarkRecord>(),       RecordWords<s::ErrorRecord>(),
    RecordWords<s::SignalRecord>(),     RecordWords<s::DropRecord>(),
    RecordWords<s::InfoRecord>(),
};

// Event's data section in the first version of the schema (format epoch 1).
constexpr size_t kFirstEventDataWords = 20;
static_assert(s::Event::_capnpPrivate::dataWordSize >= kFirstEventDataWords);

}  // namespace

struct EventBlockEncoder::Impl {
  // [segment table word][first segment]: a block that fits one segment is
  // serialised where it was built, without a copy.
  std::vector<capnp::word> buffer;
  std::optional<capnp::MallocMessageBuilder> message;
  s::EventBlock::Builder block{nullptr};
  unsigned expected = 0;
  unsigned next = 0;
  uint64_t prev_index = 0;
  int64_t prev_time = 0;
  capnp::List<s::EventKind>::Builder kinds;
  // Time deltas go to the narrow column until one does not fit (Widen()).
  bool narrow = true;
  capnp::List<int32_t>::Builder time32;
  capnp::List<int64_t>::Builder time64;
  capnp::List<int64_t>::Builder index_gaps;  // allocated at the first gap that is not 0
  // The block's fingerprint column, gathered here and copied into the
  // message at Finish, when its length is known.
  std::vector<uint64_t> fingerprints;
  std::array<uint32_t, kKinds> count{};  // records of each kind, as Begin was told
  std::array<unsigned, kKinds> at{};     // the next record of each kind
  capnp::List<s::OpRecord>::Builder ops;
  capnp::List<s::RetRecord>::Builder rets;
  capnp::List<s::CompletionRecord>::Builder completions;
  capnp::List<s::TestRecord>::Builder tests;
  capnp::List<s::CommCreateRecord>::Builder comm_creates;
  capnp::List<s::CommFreeRecord>::Builder comm_frees;
  capnp::List<s::GroupRecord>::Builder groups;
  capnp::List<s::EntropyRecord>::Builder entropies;
  capnp::List<s::SeedRecord>::Builder seeds;
  capnp::List<s::CudaRecord>::Builder cudas;
  capnp::List<s::MarkRecord>::Builder marks;
  capnp::List<s::ErrorRecord>::Builder errors;
  capnp::List<s::SignalRecord>::Builder signals;
  capnp::List<s::DropRecord>::Builder drops;
  capnp::List<s::InfoRecord>::Builder infos;
  SeqTable seqs;
  std::string spilled;  // the serialised message when it needed more segments

  // The next record of a kind, with the fields every kind has.
  template <typename List>
  auto Next(List& list, const EventView& e) {
    auto r = list[at[KindSlot(e.kind)]++];
    r.setThread(e.thread);
    r.setCallSite(e.call_site);
    return r;
  }

  // A delta does not fit 32 bits: the block's deltas move to the wide column.
  // The narrow one is dropped, leaving zeroed words in the message; a rare
  // case (two events more than 2.1 s apart in one block).
  void Widen() {
    time64 = block.initTimeDeltas(expected);
    for (unsigned i = 0; i < next; ++i) time64.set(i, time32[i]);
    block.disownTimeDeltas32();
    narrow = false;
  }
};

size_t EventKindCounts::total() const {
  size_t n = 0;
  for (uint32_t c : of) n += c;
  return n;
}

EventBlockEncoder::EventBlockEncoder() : impl_(std::make_unique<Impl>()) {
  impl_->buffer = std::vector<capnp::word>(1 + (1 << 17));  // 1 MiB, grown as blocks need
}

EventBlockEncoder::~EventBlockEncoder() = default;

void EventBlockEncoder::Begin(const EventKindCounts& kinds, uint64_t first_index, int64_t base_time_ns) {
  Impl& m = *impl_;
  const size_t n = kinds.total();
  REPLAY_CHECK(n <= format::kMaxBlockEvents, n);
  const auto& count = kinds.of;
  const unsigned fingerprints = count[KindSlot(EventKind::kOp)] + count[KindSlot(EventKind::kReturn)] +
                                2 * count[KindSlot(EventKind::kCompletion)];
  // Room for the columns and every record, and one word per event for lists
  // and text, so that a block usually fits the first segment. The buffer only
  // grows, and stays zeroed.
  size_t want = 2 + s::EventBlock::_capnpPrivate::dataWordSize + s::EventBlock::_capnpPrivate::pointerCount;
  want += (n * 2 + 7) / 8 + (n * 4 + 7) / 8 + fingerprints + n + 64;
  for (size_t k = 0; k < kKinds; ++k) want += count[k] == 0 ? 0 : 1 + count[k] * kRecordWords[k];
  m.message.reset();  // zeroes the used part of the first segment for reuse
  if (m.buffer.size() < want) m.buffer = std::vector<capnp::word>(want + want / 4);  // zeroed
  m.message.emplace(kj::arrayPtr(m.buffer.data() + 1, m.buffer.size() - 1));

  m.block = m.message->initRoot<s::EventBlock>();
  m.block.setFirstIndex(first_index);
  m.block.setBaseTimeNs(base_time_ns);
  m.block.setSeqDelta(true);
  m.expected = static_cast<unsigned>(n);
  m.next = 0;
  m.prev_index = first_index - 1;
  m.prev_time = base_time_ns;
  m.kinds = m.block.initKinds(m.expected);
  m.narrow = true;
  m.time32 = m.block.initTimeDeltas32(m.expected);
  m.time64 = {};
  m.index_gaps = {};
  m.fingerprints.clear();
  m.count = count;
  m.at = {};
  // A record list is allocated only when the block has events of its kind.
  auto init = [&](EventKind k, auto& list, auto (s::EventBlock::Builder::*init_list)(unsigned)) {
    unsigned c = count[KindSlot(k)];
    list = c == 0 ? std::remove_reference_t<decltype(list)>() : (m.block.*init_list)(c);
  };
  init(EventKind::kOp, m.ops, &s::EventBlock::Builder::initOps);
  init(EventKind::kReturn, m.rets, &s::EventBlock::Builder::initRets);
  init(EventKind::kCompletion, m.completions, &s::EventBlock::Builder::initCompletions);
  init(EventKind::kTest, m.tests, &s::EventBlock::Builder::initTests);
  init(EventKind::kCommCreate, m.comm_creates, &s::EventBlock::Builder::initCommCreates);
  init(EventKind::kCommFree, m.comm_frees, &s::EventBlock::Builder::initCommFrees);
  init(EventKind::kGroup, m.groups, &s::EventBlock::Builder::initGroups);
  init(EventKind::kEntropy, m.entropies, &s::EventBlock::Builder::initEntropies);
  init(EventKind::kSeed, m.seeds, &s::EventBlock::Builder::initSeeds);
  init(EventKind::kCuda, m.cudas, &s::EventBlock::Builder::initCudas);
  init(EventKind::kMark, m.marks, &s::EventBlock::Builder::initMarks);
  init(EventKind::kError, m.errors, &s::EventBlock::Builder::initErrors);
  init(EventKind::kSignal, m.signals, &s::EventBlock::Builder::initSignals);
  init(EventKind::kDrop, m.drops, &s::EventBlock::Builder::initDrops);
  init(EventKind::kInfo, m.infos, &s::EventBlock::Builder::initInfos);
  m.seqs.Clear();
}

void EventBlockEncoder::Add(const EventView& e) {
  Impl& m = *impl_;
  REPLAY_CHECK(m.next < m.expected, m.next, m.expected);
  const size_t slot = KindSlot(e.kind);
  // Begin counted every kind; an event beyond its kind's count is a caller bug.
  REPLAY_CHECK(slot < kKinds && m.at[slot] < m.count[slot], static_cast<int>(e.kind));
  const unsigned i = m.next++;
  m.kinds.set(i, static_cast<s::EventKind>(slot));
  int64_t delta = WrappingSub(e.time_ns, m.prev_time);
  if (m.narrow && delta != static_cast<int32_t>(delta)) m.Widen();
  if (m.narrow) {
    m.time32.set(i, static_cast<int32_t>(delta));
  } else {
    m.time64.set(i, delta);
  }
  if (int64_t gap = static_cast<int64_t>(e.index - m.prev_index - 1); gap != 0) {
    if (m.index_gaps.size() == 0) m.index_gaps = m.block.initIndexGaps(m.expected);
    m.index_gaps.set(i, gap);
  }
  m.prev_index = e.index;
  m.prev_time = e.time_ns;
  switch (e.kind) {
    case EventKind::kOp: {
      const auto& o = Body<OpEvent>(e);
      auto r = m.Next(m.ops, e);
      WriteOp(e, r);
      r.setSeq(m.seqs.Encode(o.comm, o.seq));
      if (Flagged(o.flags, op_flags::kHasSendHash)) m.fingerprints.push_back(o.send_hash);
      return;
    }
    case EventKind::kReturn: {
      const auto& x = Body<ReturnEvent>(e);
      auto r = m.Next(m.rets, e);
      WriteRet(e, r);
      r.setSeq(m.seqs.Encode(x.comm, x.seq));
      if (Flagged(x.flags, op_flags::kHasRecvHash)) m.fingerprints.push_back(x.recv_hash);
      return;
    }
    case EventKind::kCompletion: {
      const auto& x = Body<CompletionEvent>(e);
      auto r = m.Next(m.completions, e);
      WriteCompletion(e, r);
      r.setSeq(m.seqs.Encode(x.comm, x.seq));
      if (Flagged(x.flags, op_flags::kHasRecvHash)) m.fingerprints.push_back(x.recv_hash);
      if (Flagged(x.flags, op_flags::kHasSendHash)) m.fingerprints.push_back(x.send_hash);
      return;
    }
    case EventKind::kTest: return WriteTest(e, m.Next(m.tests, e));
    case EventKind::kCommCreate: return WriteCommCreate(e, m.Next(m.comm_creates, e));
    case EventKind::kCommFree: return WriteCommFree(e, m.Next(m.comm_frees, e));
    case EventKind::kGroup: return WriteGroup(e, m.Next(m.groups, e));
    case EventKind::kEntropy: return WriteEntropy(e, m.Next(m.entropies, e));
    case EventKind::kSeed: return WriteSeed(e, m.Next(m.seeds, e));
    case EventKind::kCuda: return WriteCuda(e, m.Next(m.cudas, e));
    case EventKind::kMark: return WriteMark(e, m.Next(m.marks, e));
    case EventKind::kError: return WriteError(e, m.Next(m.errors, e));
    case EventKind::kSignal: return WriteSignal(e, m.Next(m.signals, e));
    case EventKind::kDrop: return WriteDrop(e, m.Next(m.drops, e));
    case EventKind::kInfo: return WriteInfo(e, m.Next(m.infos, e));
  }
}

std::span<const uint8_t> EventBlockEncoder::Finish() {
  Impl& m = *impl_;
  REPLAY_CHECK(m.next == m.expected, m.next, m.expected);
  if (!m.fingerprints.empty()) {
    auto column = m.block.initFingerprints(static_cast<unsigned>(m.fingerprints.size()));
    for (unsigned i = 0; i < m.fingerprints.size(); ++i) column.set(i, m.fingerprints[i]);
  }
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

std::span<const uint8_t> EventBlockEncoder::Encode(std::span<const Event> events) {
  EventKindCounts kinds;
  for (const Event& e : events) kinds.Add(e.kind);
  Begin(kinds, events.empty() ? 0 : events.front().index, events.empty() ? 0 : events.front().time_ns);
  for (const Event& e : events) Add(EventView::Of(e));
  return Finish();
}

namespace {

// Room for `n` more events. Blocks are decoded one after another into one
// vector: growing it to the exact size each time would move every event
// decoded so far once per block.
void ReserveFor(std::vector<Event>* out, size_t n) {
  const size_t need = out->size() + n;
  if (need > out->capacity()) out->reserve(std::max(need, out->capacity() * 2));
}

// The `seq` of op, ret and completion events back from its stored difference.
void ApplySeqDelta(SeqTable* seqs, Event* e) {
  switch (e->kind) {
    case EventKind::kOp: e->op.seq = seqs->Decode(e->op.comm, e->op.seq); break;
    case EventKind::kReturn: e->ret.seq = seqs->Decode(e->ret.comm, e->ret.seq); break;
    case EventKind::kCompletion: e->completion.seq = seqs->Decode(e->completion.comm, e->completion.seq); break;
    default: break;
  }
}

std::string Count(size_t n, const char* what) { return std::to_string(n) + " " + what; }

// Epochs 1 and 2: every event an element of `events`.
Status DecodeEventList(s::EventBlock::Reader block, std::vector<Event>* out) {
  uint64_t index = block.getFirstIndex() - 1;
  int64_t time = block.getBaseTimeNs();
  auto events = block.getEvents();
  if (events.size() > format::kMaxBlockEvents) {
    return Status::Corruption("event block declares " + Count(events.size(), "events") + ", more than any writer makes");
  }
  // Epoch 2: time deltas in a column, seq relative per communicator.
  auto time_deltas = block.getTimeDeltas();
  const bool time_column = block.hasTimeDeltas();
  if (time_column && time_deltas.size() != events.size()) {
    return Status::Corruption("event block holds " + Count(time_deltas.size(), "time deltas") + " for " +
                              Count(events.size(), "events"));
  }
  const bool seq_delta = block.getSeqDelta();
  SeqTable seqs;
  // Every writer gives an Event at least the data section of the first
  // schema (its union tag is in the last of those words; later schemas only
  // grow it). Smaller elements are damage, and would let a few compressed
  // bytes declare millions of events.
  if (events.size() != 0 &&
      capnp::AnyStruct::Reader(events[0]).getDataSection().size() < kFirstEventDataWords * sizeof(capnp::word)) {
    return Status::Corruption("event block holds events smaller than any writer makes");
  }
  ReserveFor(out, events.size());
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
    ReadUnionMember(r, &e);
    if (seq_delta) ApplySeqDelta(&seqs, &e);
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

// Whether a block holds anything of the epoch 3 layout.
bool HasKindLists(s::EventBlock::Reader b) {
  return b.hasKinds() || b.hasIndexGaps() || b.hasTimeDeltas32() || b.hasFingerprints() || b.hasOps() ||
         b.hasRets() || b.hasCompletions() || b.hasTests() || b.hasCommCreates() || b.hasCommFrees() ||
         b.hasGroups() || b.hasEntropies() || b.hasSeeds() || b.hasCudas() || b.hasMarks() || b.hasErrors() ||
         b.hasSignals() || b.hasDrops() || b.hasInfos();
}

// Epoch 3: a kind column and a list of records per kind.
Status DecodeKindLists(s::EventBlock::Reader block, std::vector<Event>* out) {
  auto kinds = block.getKinds();
  const size_t n = kinds.size();
  if (n > format::kMaxBlockEvents) {
    return Status::Corruption("event block declares " + Count(n, "events") + ", more than any writer makes");
  }
  auto ops = block.getOps();
  auto rets = block.getRets();
  auto completions = block.getCompletions();
  auto tests = block.getTests();
  auto comm_creates = block.getCommCreates();
  auto comm_frees = block.getCommFrees();
  auto groups = block.getGroups();
  auto entropies = block.getEntropies();
  auto seeds = block.getSeeds();
  auto cudas = block.getCudas();
  auto marks = block.getMarks();
  auto errors = block.getErrors();
  auto signals = block.getSignals();
  auto drops = block.getDrops();
  auto infos = block.getInfos();
  // Every list must hold exactly the events the kind column gives it.
  std::array<size_t, kKinds> count{};
  for (s::EventKind k : kinds) {
    if (static_cast<size_t>(k) < kKinds) ++count[static_cast<size_t>(k)];
  }
  const std::array<size_t, kKinds> held = {
      ops.size(),   rets.size(),  completions.size(), tests.size(),  comm_creates.size(),
      comm_frees.size(), groups.size(), entropies.size(), seeds.size(), cudas.size(),
      marks.size(), errors.size(), signals.size(),   drops.size(),  infos.size()};
  for (size_t k = 0; k < kKinds; ++k) {
    if (held[k] != count[k]) {
      std::string kind(EventKindName(static_cast<EventKind>(k + 1)));
      return Status::Corruption("event block's kind column names " + Count(count[k], kind.c_str()) +
                                " events, its " + kind + " list holds " + std::to_string(held[k]));
    }
  }
  auto time32 = block.getTimeDeltas32();
  auto time64 = block.getTimeDeltas();
  if (!((time32.size() == n && time64.size() == 0) || (time64.size() == n && time32.size() == 0))) {
    return Status::Corruption("event block holds " + Count(time32.size() + time64.size(), "time deltas") + " for " +
                              Count(n, "events"));
  }
  const bool narrow = time32.size() == n;
  auto index_gaps = block.getIndexGaps();
  if (index_gaps.size() != 0 && index_gaps.size() != n) {
    return Status::Corruption("event block holds " + Count(index_gaps.size(), "index gaps") + " for " +
                              Count(n, "events"));
  }
  auto fp = block.getFingerprints();

  uint64_t index = block.getFirstIndex() - 1;
  int64_t time = block.getBaseTimeNs();
  const bool seq_delta = block.getSeqDelta();
  SeqTable seqs;
  std::array<unsigned, kKinds> at{};
  unsigned f = 0;
  // Puts the next value of the fingerprint column in `hash` when `flags`
  // announce it; false where the column and the records disagree.
  auto take = [&](uint16_t flags, uint16_t flag, uint64_t* hash) {
    if (!Flagged(flags, flag)) return true;
    if (*hash != 0 || f == fp.size()) return false;
    *hash = fp[f++];
    return true;
  };
  const Status fingerprint_damage =
      Status::Corruption("event block's fingerprint column disagrees with its events' flags");
  // The next record of a kind, with the fields every kind has.
  auto next = [&](auto list, EventKind kind, Event* e) {
    auto r = list[at[KindSlot(kind)]++];
    e->thread = r.getThread();
    e->call_site = r.getCallSite();
    return r;
  };
  ReserveFor(out, n);
  for (unsigned i = 0; i < n; ++i) {
    Event e;
    index = index + 1 + (index_gaps.size() != 0 ? static_cast<uint64_t>(index_gaps[i]) : 0);
    time = WrappingAdd(time, narrow ? time32[i] : time64[i]);
    e.index = index;
    e.time_ns = time;
    const auto kind = kinds[i];
    switch (kind) {
      case s::EventKind::OP:
        ReadOp(next(ops, EventKind::kOp, &e), &e);
        if (!take(e.op.flags, op_flags::kHasSendHash, &e.op.send_hash)) return fingerprint_damage;
        break;
      case s::EventKind::RET:
        ReadRet(next(rets, EventKind::kReturn, &e), &e);
        if (!take(e.ret.flags, op_flags::kHasRecvHash, &e.ret.recv_hash)) return fingerprint_damage;
        break;
      case s::EventKind::COMPLETION:
        ReadCompletion(next(completions, EventKind::kCompletion, &e), &e);
        if (!take(e.completion.flags, op_flags::kHasRecvHash, &e.completion.recv_hash) ||
            !take(e.completion.flags, op_flags::kHasSendHash, &e.completion.send_hash)) {
          return fingerprint_damage;
        }
        break;
      case s::EventKind::TEST: ReadTest(next(tests, EventKind::kTest, &e), &e); break;
      case s::EventKind::COMM_CREATE: ReadCommCreate(next(comm_creates, EventKind::kCommCreate, &e), &e); break;
      case s::EventKind::COMM_FREE: ReadCommFree(next(comm_frees, EventKind::kCommFree, &e), &e); break;
      case s::EventKind::GROUP: ReadGroup(next(groups, EventKind::kGroup, &e), &e); break;
      case s::EventKind::ENTROPY: ReadEntropy(next(entropies, EventKind::kEntropy, &e), &e); break;
      case s::EventKind::SEED: ReadSeed(next(seeds, EventKind::kSeed, &e), &e); break;
      case s::EventKind::CUDA: ReadCuda(next(cudas, EventKind::kCuda, &e), &e); break;
      case s::EventKind::MARK: ReadMark(next(marks, EventKind::kMark, &e), &e); break;
      case s::EventKind::ERROR: ReadError(next(errors, EventKind::kError, &e), &e); break;
      case s::EventKind::SIGNAL: ReadSignal(next(signals, EventKind::kSignal, &e), &e); break;
      case s::EventKind::DROP: ReadDrop(next(drops, EventKind::kDrop, &e), &e); break;
      case s::EventKind::INFO: ReadInfo(next(infos, EventKind::kInfo, &e), &e); break;
      default: ReadUnknown(static_cast<unsigned>(kind), &e); break;
    }
    if (seq_delta) ApplySeqDelta(&seqs, &e);
    out->push_back(std::move(e));
  }
  if (f != fp.size()) return fingerprint_damage;
  return Status::Ok();
}

}  // namespace

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
    if (!block.hasEvents()) return DecodeKindLists(block, out);
    if (HasKindLists(block)) {
      return Status::Corruption("event block holds events in both the epoch 2 and the epoch 3 layout");
    }
    return DecodeEventList(block, out);
  } catch (const kj::Exception& ex) {
    return Status::Corruption(std::string("event block does not decode: ") + ex.getDescription().cStr());
  }
}

}  // namespace replay
