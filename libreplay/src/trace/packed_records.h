// packed_records.h: the packed op, ret, completion, test and CUDA records of
// format epoch 4 (trace.capnp, EventBlock.packedOps): each record holds only
// the fields that differ from the previous record of its kind at the same call
// site.
//
// Used by the event codec only. Not thread-safe: one packer or unpacker per
// encoder or decoder.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "replay/event.h"

namespace replay::packed {

// The fields of each packed kind, in packed order: the body's field list
// (event.h), which only ever grows at its end.
template <typename B>
struct Fields;

#define REPLAY_PACKED_COUNT_(type, member, schema, json, role) +1
#define REPLAY_PACKED_VISIT_(type, member, schema, json, role) f(a.member, b.member);
#define REPLAY_PACKED_NAME_(type, member, schema, json, role) #member,
#define REPLAY_PACKED_FIELDS_(Body, fields)                              \
  template <>                                                            \
  struct Fields<Body> {                                                  \
    static constexpr unsigned kCount = 0 fields(REPLAY_PACKED_COUNT_);   \
    static constexpr const char* kNames[] = {fields(REPLAY_PACKED_NAME_)}; \
    /* f(field of a, the same field of b), in packed order. */           \
    template <typename F, typename A, typename C>                        \
    static void Each(F&& f, A& a, C& b) {                                \
      fields(REPLAY_PACKED_VISIT_)                                       \
    }                                                                    \
  };
REPLAY_PACKED_FIELDS_(OpEvent, REPLAY_OP_FIELDS)
REPLAY_PACKED_FIELDS_(ReturnEvent, REPLAY_RETURN_FIELDS)
REPLAY_PACKED_FIELDS_(CompletionEvent, REPLAY_COMPLETION_FIELDS)
REPLAY_PACKED_FIELDS_(TestEvent, REPLAY_TEST_FIELDS)
REPLAY_PACKED_FIELDS_(CudaEvent, REPLAY_CUDA_FIELDS)
#undef REPLAY_PACKED_FIELDS_
#undef REPLAY_PACKED_NAME_
#undef REPLAY_PACKED_VISIT_
#undef REPLAY_PACKED_COUNT_

// Mask bits before the fields': call site, thread, list.
inline constexpr unsigned kHeadBits = 3;
inline constexpr uint64_t kSiteBit = 1;
inline constexpr uint64_t kThreadBit = 2;
inline constexpr uint64_t kListBit = 4;
// The most fields a mask can cover.
inline constexpr unsigned kMaxFields = 64 - kHeadBits;
static_assert(Fields<OpEvent>::kCount <= kMaxFields && Fields<ReturnEvent>::kCount <= kMaxFields &&
              Fields<CompletionEvent>::kCount <= kMaxFields && Fields<TestEvent>::kCount <= kMaxFields &&
              Fields<CudaEvent>::kCount <= kMaxFields);

// The slot of `key` in the block's 64-entry direct-mapped tables (seq,
// references, time predictions), as trace.capnp gives it.
inline size_t SlotOf(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 58); }

// A field as 64 bits: signed types by sign, the rest by value.
template <typename T>
uint64_t Wide(T v) {
  if constexpr (std::is_enum_v<T>) {
    return Wide(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? 1 : 0;
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}
// And back: the low bits of `v` (any non-zero value is true).
template <typename T>
T Narrow(uint64_t v) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<T>(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

inline uint64_t ZigZag(uint64_t d) { return (d << 1) ^ static_cast<uint64_t>(static_cast<int64_t>(d) >> 63); }
inline uint64_t UnZigZag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

// The longest varint.
inline constexpr size_t kMaxVarint = 10;

inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Bytes PutVarint writes for `v`.
inline size_t VarintSize(uint64_t v) { return 1 + static_cast<size_t>(63 - __builtin_clzll(v | 1)) / 7; }

// Reads a varint at `*p`, before `end`; false when it is cut short or longer
// than 64 bits.
inline bool GetVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p == end) return false;
    const uint8_t b = *(*p)++;
    // The tenth byte holds the top bit only.
    if (shift == 63 && b > 1) return false;
    x |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = x;
      return true;
    }
  }
  return false;
}

// A growing byte buffer that varints are written into.
class Bytes {
 public:
  void Clear() { size_ = 0; }
  // Where `n` more bytes go; Commit(end) then keeps those written.
  uint8_t* Room(size_t n) {
    if (size_ + n > capacity_) {
      size_t grown = std::max(size_ + n, 2 * capacity_);
      auto bigger = std::make_unique<uint8_t[]>(grown);
      if (size_ != 0) std::memcpy(bigger.get(), bytes_.get(), size_);
      bytes_ = std::move(bigger);
      capacity_ = grown;
    }
    return bytes_.get() + size_;
  }
  void Commit(const uint8_t* end) { size_ = static_cast<size_t>(end - bytes_.get()); }
  std::span<const uint8_t> view() const { return {bytes_.get(), size_}; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Time deltas, each stored less the last delta of the same kind at the same
// call site (trace.capnp, EventBlock.timeDeltasPacked): steady intervals
// leave only their jitter.
class TimePredictor {
 public:
  void Clear() { used_.fill(false); }
  // The value to store for `delta`, and back; both note the delta.
  uint64_t Encode(uint64_t call_site, unsigned kind, uint64_t delta) {
    Slot& s = SlotFor(call_site, kind);
    uint64_t stored = delta - s.delta;
    s.delta = delta;
    return stored;
  }
  uint64_t Decode(uint64_t call_site, unsigned kind, uint64_t stored) {
    Slot& s = SlotFor(call_site, kind);
    s.delta += stored;
    return s.delta;
  }

 private:
  struct Slot {
    uint64_t call_site;
    unsigned kind;
    uint64_t delta;
  };
  // The pair's slot, emptied (a prediction of 0) when it held another pair.
  Slot& SlotFor(uint64_t call_site, unsigned kind) {
    const size_t i = SlotOf(call_site + kind);
    Slot& s = slots_[i];
    if (!used_[i] || s.call_site != call_site || s.kind != kind) {
      used_[i] = true;
      s = Slot{call_site, kind, 0};
    }
    return s;
  }
  std::array<Slot, 64> slots_{};
  std::array<bool, 64> used_{};
};

// The references a record is compared with: the last record of the kind at
// the same call site, direct-mapped.
template <typename B>
class References {
 public:
  struct Entry {
    uint64_t call_site;
    uint32_t thread;
    B body;
  };
  void Clear() { used_.fill(false); }
  // The entry for `call_site`, or a record of zeros.
  const Entry& Find(uint64_t call_site) const {
    size_t s = SlotOf(call_site);
    return used_[s] && entries_[s].call_site == call_site ? entries_[s] : zero_;
  }
  void Note(uint64_t call_site, uint32_t thread, const B& body) {
    size_t s = SlotOf(call_site);
    used_[s] = true;
    entries_[s].call_site = call_site;
    entries_[s].thread = thread;
    std::memcpy(&entries_[s].body, &body, sizeof(B));
  }

 private:
  std::array<Entry, 64> entries_{};
  std::array<bool, 64> used_{};
  Entry zero_{};
};

// Writes one kind's packed column.
template <typename B>
class Packer {
 public:
  void Begin() {
    bytes_.Clear();
    refs_.Clear();
    prev_site_ = 0;
    bytes_.Commit(PutVarint(bytes_.Room(kMaxVarint), Fields<B>::kCount));
  }

  // The next record: `body` as stored (seq relative, announced hashes 0).
  void Add(uint64_t call_site, uint32_t thread, const B& body, std::span<const int64_t> list) {
    const auto& ref = refs_.Find(call_site);
    uint8_t fields[Fields<B>::kCount * kMaxVarint];
    uint8_t* f = fields;
    uint64_t mask = 0;
    // Padding is copied along with the body, so equal bytes are the common
    // case that skips the comparison of each field.
    if (std::memcmp(&body, &ref.body, sizeof(B)) != 0) {
      uint64_t bit = uint64_t{1} << kHeadBits;
      Fields<B>::Each(
          [&](const auto& v, const auto& r) {
            if (uint64_t d = Wide(v) - Wide(r); d != 0) {
              mask |= bit;
              f = PutVarint(f, ZigZag(d));
            }
            bit <<= 1;
          },
          body, ref.body);
    }
    const uint64_t site_delta = call_site - prev_site_;
    const uint64_t thread_delta = static_cast<uint64_t>(thread) - ref.thread;
    if (site_delta != 0) mask |= kSiteBit;
    if (thread_delta != 0) mask |= kThreadBit;
    if (!list.empty()) mask |= kListBit;
    uint8_t* p = bytes_.Room(3 * kMaxVarint + static_cast<size_t>(f - fields) + (1 + list.size()) * kMaxVarint);
    p = PutVarint(p, mask);
    if (site_delta != 0) p = PutVarint(p, ZigZag(site_delta));
    if (thread_delta != 0) p = PutVarint(p, ZigZag(thread_delta));
    std::memcpy(p, fields, static_cast<size_t>(f - fields));
    p += f - fields;
    if (!list.empty()) {
      p = PutVarint(p, list.size());
      for (int64_t v : list) p = PutVarint(p, ZigZag(static_cast<uint64_t>(v)));
    }
    bytes_.Commit(p);
    prev_site_ = call_site;
    refs_.Note(call_site, thread, body);
  }

  std::span<const uint8_t> bytes() const { return bytes_.view(); }

 private:
  Bytes bytes_;
  References<B> refs_;
  uint64_t prev_site_ = 0;
};

// Reads one kind's packed column. Every error is a sentence for a Corruption
// status; the column is damage once one is returned.
template <typename B>
class Unpacker {
 public:
  // Starts on `bytes`; an error when its field count is damaged.
  const char* Start(std::span<const uint8_t> bytes) {
    p_ = bytes.data();
    end_ = p_ + bytes.size();
    refs_.Clear();
    prev_site_ = 0;
    uint64_t fields = 0;
    if (!Varint(&fields)) return "its field count is cut short";
    if (fields > kMaxFields) return "it declares more fields than a mask covers";
    fields_ = static_cast<unsigned>(fields);
    return nullptr;
  }

  // The next record into `body` (seq still relative, announced hashes 0), its
  // call site, thread and list into `e`.
  const char* Next(Event* e, B* body) {
    uint64_t mask = 0;
    if (!Varint(&mask)) return "a record is cut short";
    if (fields_ < kMaxFields && (mask >> (kHeadBits + fields_)) != 0) return "a record's mask names a field beyond its count";
    uint64_t site = prev_site_;
    if ((mask & kSiteBit) != 0) {
      uint64_t d = 0;
      if (!Varint(&d)) return "a record is cut short";
      site += UnZigZag(d);
    }
    const auto& ref = refs_.Find(site);
    uint64_t thread = ref.thread;
    if ((mask & kThreadBit) != 0) {
      uint64_t d = 0;
      if (!Varint(&d)) return "a record is cut short";
      thread += UnZigZag(d);
    }
    std::memcpy(body, &ref.body, sizeof(B));
    uint64_t bit = uint64_t{1} << kHeadBits;
    unsigned i = 0;
    bool short_read = false;
    Fields<B>::Each(
        [&](auto& v, const auto&) {
          if (i++ < fields_ && (mask & bit) != 0) {
            uint64_t d = 0;
            if (!Varint(&d)) short_read = true;
            v = Narrow<std::remove_cvref_t<decltype(v)>>(Wide(v) + UnZigZag(d));
          }
          bit <<= 1;
        },
        *body, *body);
    if (short_read) return "a record is cut short";
    // Fields a newer writer added: read past.
    for (; i < fields_; ++i, bit <<= 1) {
      uint64_t d = 0;
      if ((mask & bit) != 0 && !Varint(&d)) return "a record is cut short";
    }
    if ((mask & kListBit) != 0) {
      uint64_t n = 0;
      if (!Varint(&n)) return "a record is cut short";
      // Every value takes a byte at least.
      if (n > static_cast<uint64_t>(end_ - p_)) return "a record's list is longer than the column";
      e->list.reserve(e->list.size() + n);
      for (uint64_t k = 0; k < n; ++k) {
        uint64_t z = 0;
        if (!Varint(&z)) return "a record is cut short";
        e->list.push_back(static_cast<int64_t>(UnZigZag(z)));
      }
    }
    e->call_site = site;
    e->thread = static_cast<uint32_t>(thread);
    prev_site_ = site;
    refs_.Note(site, static_cast<uint32_t>(thread), *body);
    return nullptr;
  }

  // Whether every byte was read.
  bool done() const { return p_ == end_; }

 private:
  bool Varint(uint64_t* v) { return GetVarint(&p_, end_, v); }

  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  unsigned fields_ = 0;
  References<B> refs_;
  uint64_t prev_site_ = 0;
};

}  // namespace replay::packed
