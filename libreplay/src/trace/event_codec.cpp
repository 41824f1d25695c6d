#include "trace/event_codec.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>

#include "trace/format.h"
#include "trace/packed_records.h"
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
// the same names, as the kind's field list in event.h gives them. Epoch 3 keeps
// the hashes that flags announce in a column; the decoder puts them in place
// afterwards.

std::string TextString(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

bool Flagged(uint16_t flags, uint16_t flag) { return (flags & flag) != 0; }

// A field added after epoch 2 is not in Event's union: it reads as its default there.
#define REPLAY_READ_FIELD_(type, member, schema, json, role) \
  if constexpr (requires { g.get##schema(); }) b->member = static_cast<type>(g.get##schema());
// Written only for the kinds an epoch 4 block keeps in record lists, none of
// which has a seq or a hash that the encoder stores elsewhere.
#define REPLAY_WRITE_FIELD_(type, member, schema, json, role) \
  g.set##schema(static_cast<std::remove_cvref_t<decltype(g.get##schema())>>(b.member));
#define REPLAY_BODY_CODEC_(Body, fields)   \
  template <typename G>                    \
  void ReadBody(G g, Body* b) {            \
    *b = Body{};                           \
    fields(REPLAY_READ_FIELD_)             \
  }                                        \
  template <typename G>                    \
  void WriteBody(const Body& b, G g) {     \
    fields(REPLAY_WRITE_FIELD_)            \
  }
REPLAY_BODY_CODEC_(OpEvent, REPLAY_OP_FIELDS)
REPLAY_BODY_CODEC_(ReturnEvent, REPLAY_RETURN_FIELDS)
REPLAY_BODY_CODEC_(CompletionEvent, REPLAY_COMPLETION_FIELDS)
REPLAY_BODY_CODEC_(TestEvent, REPLAY_TEST_FIELDS)
REPLAY_BODY_CODEC_(CommCreateEvent, REPLAY_COMM_CREATE_FIELDS)
REPLAY_BODY_CODEC_(CommFreeEvent, REPLAY_COMM_FREE_FIELDS)
REPLAY_BODY_CODEC_(GroupEvent, REPLAY_GROUP_FIELDS)
REPLAY_BODY_CODEC_(EntropyEvent, REPLAY_ENTROPY_FIELDS)
REPLAY_BODY_CODEC_(SeedEvent, REPLAY_SEED_FIELDS)
REPLAY_BODY_CODEC_(CudaEvent, REPLAY_CUDA_FIELDS)
REPLAY_BODY_CODEC_(MarkEvent, REPLAY_MARK_FIELDS)
REPLAY_BODY_CODEC_(ErrorEvent, REPLAY_ERROR_FIELDS)
REPLAY_BODY_CODEC_(SignalEvent, REPLAY_SIGNAL_FIELDS)
REPLAY_BODY_CODEC_(DropEvent, REPLAY_DROP_FIELDS)
#undef REPLAY_BODY_CODEC_
#undef REPLAY_WRITE_FIELD_
#undef REPLAY_READ_FIELD_

// An event of `kind` from its union member or record `g`: the body, then what
// lives beside it, as the record holds it (lists, text, bytes).
template <typename G, typename B>
void Read(G g, EventKind kind, B* body, Event* e) {
  e->kind = kind;
  ReadBody(g, body);
  auto list = [e](auto l) {
    for (auto v : l) e->list.push_back(v);
  };
  if constexpr (requires { g.getCounts(); }) list(g.getCounts());
  if constexpr (requires { g.getIndices(); }) list(g.getIndices());
  if constexpr (requires { g.getMembers(); }) list(g.getMembers());
  if constexpr (requires { g.getBytes().size(); }) {
    auto bytes = g.getBytes();
    e->text.assign(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  }
  if constexpr (requires { g.getName(); }) e->text = TextString(g.getName());
  if constexpr (requires { g.getMessage(); }) e->text = TextString(g.getMessage());
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
    case s::Event::OP: return Read(r.getOp(), EventKind::kOp, &e->op, e);
    case s::Event::RET: return Read(r.getRet(), EventKind::kReturn, &e->ret, e);
    case s::Event::COMPLETION: return Read(r.getCompletion(), EventKind::kCompletion, &e->completion, e);
    case s::Event::TEST: return Read(r.getTest(), EventKind::kTest, &e->test, e);
    case s::Event::COMM_CREATE: return Read(r.getCommCreate(), EventKind::kCommCreate, &e->comm_create, e);
    case s::Event::COMM_FREE: return Read(r.getCommFree(), EventKind::kCommFree, &e->comm_free, e);
    case s::Event::GROUP: return Read(r.getGroup(), EventKind::kGroup, &e->group, e);
    case s::Event::ENTROPY: return Read(r.getEntropy(), EventKind::kEntropy, &e->entropy, e);
    case s::Event::SEED: return Read(r.getSeed(), EventKind::kSeed, &e->seed, e);
    case s::Event::CUDA: return Read(r.getCuda(), EventKind::kCuda, &e->cuda, e);
    case s::Event::MARK: return Read(r.getMark(), EventKind::kMark, &e->mark, e);
    case s::Event::ERROR: return Read(r.getError(), EventKind::kError, &e->error, e);
    case s::Event::SIGNAL: return Read(r.getSignal(), EventKind::kSignal, &e->signal, e);
    case s::Event::DROP: return Read(r.getDrop(), EventKind::kDrop, &e->drop, e);
    case s::Event::INFO: return ReadInfo(r.getInfo(), e);
  }
  ReadUnknown(static_cast<unsigned>(r.which()), e);
}

// ---------------------------------------------------------------------------
// Records of the kinds that stay in lists, written: the body, then what lives
// beside it, as the record holds it.

template <typename B, typename R>
void Write(const EventView& e, R g) {
  WriteBody(Body<B>(e), g);
  auto list = [&e](auto l) {
    for (unsigned i = 0; i < e.list.size(); ++i) l.set(i, static_cast<decltype(l[i])>(e.list[i]));
  };
  const auto n = static_cast<unsigned>(e.list.size());
  if constexpr (requires { g.initCounts(n); }) {
    if (n != 0) list(g.initCounts(n));
  }
  if constexpr (requires { g.initIndices(n); }) {
    if (n != 0) list(g.initIndices(n));
  }
  if constexpr (requires { g.initMembers(n); }) {
    if (n != 0) list(g.initMembers(n));
  }
  if constexpr (requires { g.setBytes(DataOf(e.text)); }) g.setBytes(DataOf(e.text));
  if constexpr (requires { g.setName(TextOf(e.text)); }) g.setName(TextOf(e.text));
  if constexpr (requires { g.setMessage(TextOf(e.text)); }) g.setMessage(TextOf(e.text));
}

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
    const Slot& s = slots_[packed::SlotOf(comm)];
    return s.comm == comm ? s.seq : 0;
  }
  void Note(uint64_t comm, uint64_t seq) {
    if (seq != 0) slots_[packed::SlotOf(comm)] = Slot{comm, seq};
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

// The kinds whose records an epoch 4 block packs (trace.capnp, EventBlock.packedOps).
constexpr std::array<bool, kKinds> kPackedKinds = [] {
  std::array<bool, kKinds> packed{};
  for (EventKind k : {EventKind::kOp, EventKind::kReturn, EventKind::kCompletion, EventKind::kTest, EventKind::kCuda}) {
    packed[static_cast<size_t>(k) - 1] = true;
  }
  return packed;
}();

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
  // Each event's time delta as stored both ways (zigzag), and the bytes each
  // way takes: the block keeps the shorter (EventBlock.timeDeltasUnpredicted).
  packed::TimePredictor time_predictor;
  std::vector<uint64_t> times_predicted;
  std::vector<uint64_t> times_unpredicted;
  size_t predicted_bytes = 0;
  size_t unpredicted_bytes = 0;
  capnp::List<s::EventKind>::Builder kinds;
  capnp::List<int64_t>::Builder index_gaps;  // allocated at the first gap that is not 0
  // The block's fingerprint column, gathered here and copied into the
  // message at Finish, when its length is known.
  std::vector<uint64_t> fingerprints;
  std::array<uint32_t, kKinds> count{};  // records of each kind, as Begin was told
  std::array<unsigned, kKinds> at{};     // the next record of each kind
  capnp::List<s::CommCreateRecord>::Builder comm_creates;
  capnp::List<s::CommFreeRecord>::Builder comm_frees;
  capnp::List<s::GroupRecord>::Builder groups;
  capnp::List<s::EntropyRecord>::Builder entropies;
  capnp::List<s::SeedRecord>::Builder seeds;
  capnp::List<s::MarkRecord>::Builder marks;
  capnp::List<s::ErrorRecord>::Builder errors;
  capnp::List<s::SignalRecord>::Builder signals;
  capnp::List<s::DropRecord>::Builder drops;
  capnp::List<s::InfoRecord>::Builder infos;
  packed::Packer<OpEvent> packed_ops;
  packed::Packer<ReturnEvent> packed_rets;
  packed::Packer<CompletionEvent> packed_completions;
  packed::Packer<TestEvent> packed_tests;
  packed::Packer<CudaEvent> packed_cudas;
  SeqTable seqs;
  size_t random_from = SIZE_MAX;
  std::string spilled;  // the serialised message when it needed more segments

  // The next record of a kind, with the fields every kind has.
  template <typename List>
  auto Next(List& list, const EventView& e) {
    auto r = list[at[KindSlot(e.kind)]++];
    r.setThread(e.thread);
    r.setCallSite(e.call_site);
    return r;
  }

  // An op, ret or completion: its packed record, with seq relative to the
  // communicator's previous one, and the hashes its flags announce in the
  // fingerprint column (received before sent).
  template <typename B>
  void Add(packed::Packer<B>& packer, const EventView& e) {
    B b;
    std::memcpy(&b, e.body, sizeof(B));
    b.seq = seqs.Encode(b.comm, b.seq);
    if constexpr (requires { b.recv_hash; }) {
      if (Flagged(b.flags, op_flags::kHasRecvHash)) {
        fingerprints.push_back(b.recv_hash);
        b.recv_hash = 0;
      }
    }
    if constexpr (requires { b.send_hash; }) {
      if (Flagged(b.flags, op_flags::kHasSendHash)) {
        fingerprints.push_back(b.send_hash);
        b.send_hash = 0;
      }
    }
    if constexpr (requires { b.payload_hash; }) {
      if (b.payload_size != 0) {
        fingerprints.push_back(b.payload_hash);
        b.payload_hash = 0;
      }
    }
    packer.Add(e.call_site, e.thread, b, e.list);
  }

  // A test or CUDA call: its packed record, as it is.
  template <typename B>
  void AddAsIs(packed::Packer<B>& packer, const EventView& e) {
    B b;
    std::memcpy(&b, e.body, sizeof(B));
    packer.Add(e.call_site, e.thread, b, e.list);
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
  for (size_t k = 0; k < kKinds; ++k) {
    // Packed records take a few bytes each; one that needs more makes the
    // message spill into a second segment.
    const bool packed = kPackedKinds[k];
    want += count[k] == 0 ? 0 : 1 + count[k] * (packed ? 1 : kRecordWords[k]);
  }
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
  m.time_predictor.Clear();
  m.times_predicted.resize(n);
  m.times_unpredicted.resize(n);
  m.predicted_bytes = 0;
  m.unpredicted_bytes = 0;
  m.index_gaps = {};
  m.fingerprints.clear();
  m.count = count;
  m.at = {};
  // A record list is allocated only when the block has events of its kind.
  auto init = [&](EventKind k, auto& list, auto (s::EventBlock::Builder::*init_list)(unsigned)) {
    unsigned c = count[KindSlot(k)];
    list = c == 0 ? std::remove_reference_t<decltype(list)>() : (m.block.*init_list)(c);
  };
  m.packed_ops.Begin();
  m.packed_rets.Begin();
  m.packed_completions.Begin();
  m.packed_tests.Begin();
  m.packed_cudas.Begin();
  init(EventKind::kCommCreate, m.comm_creates, &s::EventBlock::Builder::initCommCreates);
  init(EventKind::kCommFree, m.comm_frees, &s::EventBlock::Builder::initCommFrees);
  init(EventKind::kGroup, m.groups, &s::EventBlock::Builder::initGroups);
  init(EventKind::kEntropy, m.entropies, &s::EventBlock::Builder::initEntropies);
  init(EventKind::kSeed, m.seeds, &s::EventBlock::Builder::initSeeds);
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
  const uint64_t delta = static_cast<uint64_t>(WrappingSub(e.time_ns, m.prev_time));
  const uint64_t predicted = packed::ZigZag(m.time_predictor.Encode(e.call_site, static_cast<unsigned>(slot), delta));
  const uint64_t unpredicted = packed::ZigZag(delta);
  m.times_predicted[i] = predicted;
  m.times_unpredicted[i] = unpredicted;
  m.predicted_bytes += packed::VarintSize(predicted);
  m.unpredicted_bytes += packed::VarintSize(unpredicted);
  if (int64_t gap = static_cast<int64_t>(e.index - m.prev_index - 1); gap != 0) {
    if (m.index_gaps.size() == 0) m.index_gaps = m.block.initIndexGaps(m.expected);
    m.index_gaps.set(i, gap);
  }
  m.prev_index = e.index;
  m.prev_time = e.time_ns;
  switch (e.kind) {
    case EventKind::kOp: return m.Add(m.packed_ops, e);
    case EventKind::kReturn: return m.Add(m.packed_rets, e);
    case EventKind::kCompletion: return m.Add(m.packed_completions, e);
    case EventKind::kTest: return m.AddAsIs(m.packed_tests, e);
    case EventKind::kCommCreate: return Write<CommCreateEvent>(e, m.Next(m.comm_creates, e));
    case EventKind::kCommFree: return Write<CommFreeEvent>(e, m.Next(m.comm_frees, e));
    case EventKind::kGroup: return Write<GroupEvent>(e, m.Next(m.groups, e));
    case EventKind::kEntropy: return Write<EntropyEvent>(e, m.Next(m.entropies, e));
    case EventKind::kSeed: return Write<SeedEvent>(e, m.Next(m.seeds, e));
    case EventKind::kCuda: return m.AddAsIs(m.packed_cudas, e);
    case EventKind::kMark: return Write<MarkEvent>(e, m.Next(m.marks, e));
    case EventKind::kError: return Write<ErrorEvent>(e, m.Next(m.errors, e));
    case EventKind::kSignal: return Write<SignalEvent>(e, m.Next(m.signals, e));
    case EventKind::kDrop: return Write<DropEvent>(e, m.Next(m.drops, e));
    case EventKind::kInfo: return WriteInfo(e, m.Next(m.infos, e));
  }
}

std::span<const uint8_t> EventBlockEncoder::Finish() {
  Impl& m = *impl_;
  REPLAY_CHECK(m.next == m.expected, m.next, m.expected);
  auto put = [&](EventKind k, const auto& packer, capnp::Data::Builder (s::EventBlock::Builder::*init)(unsigned)) {
    if (m.count[KindSlot(k)] == 0) return;
    std::span<const uint8_t> bytes = packer.bytes();
    auto data = (m.block.*init)(static_cast<unsigned>(bytes.size()));
    std::memcpy(data.begin(), bytes.data(), bytes.size());
  };
  put(EventKind::kOp, m.packed_ops, &s::EventBlock::Builder::initPackedOps);
  put(EventKind::kReturn, m.packed_rets, &s::EventBlock::Builder::initPackedRets);
  put(EventKind::kCompletion, m.packed_completions, &s::EventBlock::Builder::initPackedCompletions);
  put(EventKind::kTest, m.packed_tests, &s::EventBlock::Builder::initPackedTests);
  put(EventKind::kCuda, m.packed_cudas, &s::EventBlock::Builder::initPackedCudas);
  if (m.expected != 0) {
    // Short deltas often repeat exactly, which the compressor codes better
    // than what is left of them after a prediction: a tie keeps them as they are.
    const bool unpredicted = m.unpredicted_bytes <= m.predicted_bytes;
    const std::vector<uint64_t>& times = unpredicted ? m.times_unpredicted : m.times_predicted;
    m.block.setTimeDeltasUnpredicted(unpredicted);
    auto data = m.block.initTimeDeltasPacked(
        static_cast<unsigned>(unpredicted ? m.unpredicted_bytes : m.predicted_bytes));
    uint8_t* p = data.begin();
    for (unsigned k = 0; k < m.expected; ++k) p = packed::PutVarint(p, times[k]);
  }
  // The fingerprints last: random bytes, at the end of the message.
  if (!m.fingerprints.empty()) {
    auto column = m.block.initFingerprints(static_cast<unsigned>(m.fingerprints.size()));
    for (unsigned i = 0; i < m.fingerprints.size(); ++i) column.set(i, m.fingerprints[i]);
  }
  m.random_from = SIZE_MAX;
  auto segments = m.message->getSegmentsForOutput();
  // Standard stream framing (capnp/serialize.h): segment count - 1, sizes, pad, segments.
  if (segments.size() == 1 && segments[0].begin() == m.buffer.data() + 1) {
    auto* table = reinterpret_cast<uint32_t*>(m.buffer.data());
    table[0] = 0;
    table[1] = static_cast<uint32_t>(segments[0].size());
    const size_t bytes = (1 + segments[0].size()) * sizeof(capnp::word);
    m.random_from = bytes - m.fingerprints.size() * sizeof(uint64_t);
    return {reinterpret_cast<const uint8_t*>(m.buffer.data()), bytes};
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

size_t EventBlockEncoder::random_from() const { return impl_->random_from; }

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
         b.hasSignals() || b.hasDrops() || b.hasInfos() || b.hasPackedOps() || b.hasPackedRets() ||
         b.hasPackedCompletions() || b.hasPackedTests() || b.hasPackedCudas() || b.hasTimeDeltasPacked();
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
  std::array<size_t, kKinds> held = {
      ops.size(),   rets.size(),  completions.size(), tests.size(),  comm_creates.size(),
      comm_frees.size(), groups.size(), entropies.size(), seeds.size(), cudas.size(),
      marks.size(), errors.size(), signals.size(),   drops.size(),  infos.size()};
  // Epoch 4: ops, rets, completions, tests and CUDA calls packed, their record
  // lists empty.
  struct Unpackers {
    packed::Unpacker<OpEvent> ops;
    packed::Unpacker<ReturnEvent> rets;
    packed::Unpacker<CompletionEvent> completions;
    packed::Unpacker<TestEvent> tests;
    packed::Unpacker<CudaEvent> cudas;
  };
  const bool packed_ops = block.hasPackedOps();
  const bool packed_rets = block.hasPackedRets();
  const bool packed_completions = block.hasPackedCompletions();
  const bool packed_tests = block.hasPackedTests();
  const bool packed_cudas = block.hasPackedCudas();
  auto unpack = std::make_unique<Unpackers>();
  auto packed_damage = [](EventKind kind, const char* what) {
    return Status::Corruption("event block's packed " + std::string(EventKindName(kind)) + " records: " + what);
  };
  auto start = [&](bool packed, auto& unpacker, capnp::Data::Reader bytes, EventKind kind) -> const char* {
    if (!packed) return nullptr;
    if (held[KindSlot(kind)] != 0) return "the kind's record list holds records as well";
    held[KindSlot(kind)] = count[KindSlot(kind)];
    return unpacker.Start({bytes.begin(), bytes.size()});
  };
  if (const char* err = start(packed_ops, unpack->ops, block.getPackedOps(), EventKind::kOp)) {
    return packed_damage(EventKind::kOp, err);
  }
  if (const char* err = start(packed_rets, unpack->rets, block.getPackedRets(), EventKind::kReturn)) {
    return packed_damage(EventKind::kReturn, err);
  }
  if (const char* err =
          start(packed_completions, unpack->completions, block.getPackedCompletions(), EventKind::kCompletion)) {
    return packed_damage(EventKind::kCompletion, err);
  }
  if (const char* err = start(packed_tests, unpack->tests, block.getPackedTests(), EventKind::kTest)) {
    return packed_damage(EventKind::kTest, err);
  }
  if (const char* err = start(packed_cudas, unpack->cudas, block.getPackedCudas(), EventKind::kCuda)) {
    return packed_damage(EventKind::kCuda, err);
  }
  for (size_t k = 0; k < kKinds; ++k) {
    if (held[k] != count[k]) {
      std::string kind(EventKindName(static_cast<EventKind>(k + 1)));
      return Status::Corruption("event block's kind column names " + Count(count[k], kind.c_str()) +
                                " events, its " + kind + " list holds " + std::to_string(held[k]));
    }
  }
  auto time32 = block.getTimeDeltas32();
  auto time64 = block.getTimeDeltas();
  // Epoch 4: the deltas packed, less each one's prediction.
  const bool packed_times = block.hasTimeDeltasPacked();
  auto time_bytes = block.getTimeDeltasPacked();
  const uint8_t* time_at = time_bytes.begin();
  const uint8_t* const time_end = time_bytes.end();
  const bool time_predicted = !block.getTimeDeltasUnpredicted();
  packed::TimePredictor time_predictor;
  time_predictor.Clear();
  if (packed_times && (time32.size() != 0 || time64.size() != 0)) {
    return Status::Corruption("event block holds its time deltas both packed and in a column");
  }
  if (!packed_times &&
      !((time32.size() == n && time64.size() == 0) || (time64.size() == n && time32.size() == 0))) {
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
  // Epoch 4 keeps a packed ret's or completion's payload hash there as well,
  // when it has a payload.
  auto take_payload = [&](uint64_t payload_size, uint64_t* hash) {
    if (payload_size == 0) return true;
    if (*hash != 0 || f == fp.size()) return false;
    *hash = fp[f++];
    return true;
  };
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
    auto read = [&](auto list, EventKind kind, auto* body) { Read(next(list, kind, &e), kind, body, &e); };
    index = index + 1 + (index_gaps.size() != 0 ? static_cast<uint64_t>(index_gaps[i]) : 0);
    if (!packed_times) time = WrappingAdd(time, narrow ? time32[i] : time64[i]);
    e.index = index;
    const auto kind = kinds[i];
    // The next packed record of a kind; an error stops the block.
    auto unpacked = [&](bool packed, auto& unpacker, EventKind k, auto* body, auto list) -> const char* {
      if (!packed) {
        read(list, k, body);
        return nullptr;
      }
      e.kind = k;
      return unpacker.Next(&e, body);
    };
    switch (kind) {
      case s::EventKind::OP:
        if (const char* err = unpacked(packed_ops, unpack->ops, EventKind::kOp, &e.op, ops)) {
          return packed_damage(EventKind::kOp, err);
        }
        if (!take(e.op.flags, op_flags::kHasSendHash, &e.op.send_hash)) return fingerprint_damage;
        break;
      case s::EventKind::RET:
        if (const char* err = unpacked(packed_rets, unpack->rets, EventKind::kReturn, &e.ret, rets)) {
          return packed_damage(EventKind::kReturn, err);
        }
        if (!take(e.ret.flags, op_flags::kHasRecvHash, &e.ret.recv_hash) ||
            (packed_rets && !take_payload(e.ret.payload_size, &e.ret.payload_hash))) {
          return fingerprint_damage;
        }
        break;
      case s::EventKind::COMPLETION:
        if (const char* err = unpacked(packed_completions, unpack->completions, EventKind::kCompletion,
                                       &e.completion, completions)) {
          return packed_damage(EventKind::kCompletion, err);
        }
        if (!take(e.completion.flags, op_flags::kHasRecvHash, &e.completion.recv_hash) ||
            !take(e.completion.flags, op_flags::kHasSendHash, &e.completion.send_hash) ||
            (packed_completions && !take_payload(e.completion.payload_size, &e.completion.payload_hash))) {
          return fingerprint_damage;
        }
        break;
      case s::EventKind::TEST:
        if (const char* err = unpacked(packed_tests, unpack->tests, EventKind::kTest, &e.test, tests)) {
          return packed_damage(EventKind::kTest, err);
        }
        break;
      case s::EventKind::COMM_CREATE: read(comm_creates, EventKind::kCommCreate, &e.comm_create); break;
      case s::EventKind::COMM_FREE: read(comm_frees, EventKind::kCommFree, &e.comm_free); break;
      case s::EventKind::GROUP: read(groups, EventKind::kGroup, &e.group); break;
      case s::EventKind::ENTROPY: read(entropies, EventKind::kEntropy, &e.entropy); break;
      case s::EventKind::SEED: read(seeds, EventKind::kSeed, &e.seed); break;
      case s::EventKind::CUDA:
        if (const char* err = unpacked(packed_cudas, unpack->cudas, EventKind::kCuda, &e.cuda, cudas)) {
          return packed_damage(EventKind::kCuda, err);
        }
        break;
      case s::EventKind::MARK: read(marks, EventKind::kMark, &e.mark); break;
      case s::EventKind::ERROR: read(errors, EventKind::kError, &e.error); break;
      case s::EventKind::SIGNAL: read(signals, EventKind::kSignal, &e.signal); break;
      case s::EventKind::DROP: read(drops, EventKind::kDrop, &e.drop); break;
      case s::EventKind::INFO: ReadInfo(next(infos, EventKind::kInfo, &e), &e); break;
      default: ReadUnknown(static_cast<unsigned>(kind), &e); break;
    }
    if (packed_times) {
      uint64_t stored = 0;
      if (!packed::GetVarint(&time_at, time_end, &stored)) {
        return Status::Corruption("event block's packed time deltas end before its events");
      }
      // A kind this reader does not know is predicted without its call site.
      const auto k = static_cast<unsigned>(kind);
      const uint64_t delta = time_predicted
                                 ? time_predictor.Decode(k < kKinds ? e.call_site : 0, k, packed::UnZigZag(stored))
                                 : packed::UnZigZag(stored);
      time = WrappingAdd(time, static_cast<int64_t>(delta));
    }
    e.time_ns = time;
    if (seq_delta) ApplySeqDelta(&seqs, &e);
    out->push_back(std::move(e));
  }
  if (packed_times && time_at != time_end) {
    return Status::Corruption("event block's packed time deltas hold bytes after its last event's");
  }
  if (f != fp.size()) return fingerprint_damage;
  if (packed_ops && !unpack->ops.done()) return packed_damage(EventKind::kOp, "bytes follow the last record");
  if (packed_rets && !unpack->rets.done()) return packed_damage(EventKind::kReturn, "bytes follow the last record");
  if (packed_completions && !unpack->completions.done()) {
    return packed_damage(EventKind::kCompletion, "bytes follow the last record");
  }
  if (packed_tests && !unpack->tests.done()) return packed_damage(EventKind::kTest, "bytes follow the last record");
  if (packed_cudas && !unpack->cudas.done()) return packed_damage(EventKind::kCuda, "bytes follow the last record");
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
