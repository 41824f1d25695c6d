// event_codec.h: events to and from the Cap'n Proto EventBlock of the schema.
//
// The writer encodes straight from ring records (no Event is built on the way);
// readers decode into Events. Both go through EventView so there is one encoder.
// Not thread-safe: one encoder or decoder per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replay/event.h"
#include "replay/status.h"

namespace replay {

// What the encoder needs of one event, pointing at memory that outlives Add().
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

// Builds one EventBlock message.
class EventBlockEncoder {
 public:
  EventBlockEncoder();
  ~EventBlockEncoder();

  // Starts a block for `count` events; the first has `first_index`.
  void Begin(size_t count, uint64_t first_index, int64_t base_time_ns);
  // Adds the next event; exactly `count` calls between Begin and Finish.
  void Add(const EventView& e);
  // Serialises the block (unpacked Cap'n Proto, single-segment when it fits).
  // The bytes stay valid until the next Begin or the encoder's destruction.
  std::span<const uint8_t> Finish();
  // The same, copied into `out`.
  void Finish(std::string* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decodes one EventBlock message, appending its events to `out`. Damage inside
// the message (it passed the block checksum, so this means a writer bug or a
// foreign message) is a Corruption status; events decoded before it are kept.
Status DecodeEventBlock(std::span<const uint8_t> raw, std::vector<Event>* out);

}  // namespace replay
