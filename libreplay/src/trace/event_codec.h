// event_codec.h: events to and from the Cap'n Proto EventBlock of the schema.
//
// The writer encodes straight from ring records (no Event is built on the way);
// readers decode into Events. Both go through EventView so there is one encoder.
// The encoder writes the layout of the current format epoch (events stored by
// kind); the decoder reads that and the single event list of epochs 1 and 2.
// Not thread-safe: one encoder or decoder per thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"

namespace replay {

// What the encoder needs of one event.
struct EventView {
  uint64_t index;
  int64_t time_ns;
  uint32_t thread;
  uint64_t call_site;
  EventKind kind;
  const void* body;                 // the kind's body struct
  std::span<const int64_t> list;
  std::string_view text;

  static EventView Of(const Event& e);
};

// How many events of each kind a block holds: what the encoder lays the block
// out from.
struct EventKindCounts {
  std::array<uint32_t, kEventKindCount> of{};  // by EventKind, from kOp

  // A kind outside EventKind counts nowhere (the encoder refuses its event).
  void Add(EventKind kind) {
    if (size_t k = static_cast<size_t>(kind) - 1; k < of.size()) ++of[k];
  }
  size_t total() const;
};

// Builds one EventBlock message.
class EventBlockEncoder {
 public:
  EventBlockEncoder();
  ~EventBlockEncoder();

  // Starts a block of the events counted in `kinds` (at most
  // format::kMaxBlockEvents); the first has `first_index`.
  void Begin(const EventKindCounts& kinds, uint64_t first_index, int64_t base_time_ns);
  // Adds the next event, in index order; exactly the events counted at Begin.
  // The view's memory need only outlive the call.
  void Add(const EventView& e);
  // Serialises the block (unpacked Cap'n Proto, one segment when lists and
  // text fit the room reserved for them). The bytes stay valid until the next
  // Begin or the encoder's destruction.
  std::span<const uint8_t> Finish();
  // The same, copied into `out`.
  void Finish(std::string* out);
  // Where the last Finish()'s bytes hold nothing but fingerprints, to its end
  // (BlockCodec::Encode's `random_from`); SIZE_MAX when they do not end so.
  size_t random_from() const;

  // `events`, in index order, as one block whose references are the first
  // event's index and time. Valid as Finish()'s bytes are.
  std::span<const uint8_t> Encode(std::span<const Event> events);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes one EventBlock message, appending its events to `out`. Damage inside
// the message (it passed the block checksum, so this means a writer bug or a
// foreign message) is a Corruption status; events decoded before it are kept.
Status DecodeEventBlock(std::span<const uint8_t> raw, std::vector<Event>* out);

}  // namespace replay
