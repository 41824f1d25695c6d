// fuzz_support.h: what the trace decoder fuzz target and its seed generator share.
//
// Every stream file is protected by XXH3 checksums (format.h), so a mutated byte
// almost always just fails a checksum and the decoders behind it never see it.
// The fuzz target therefore feeds each input twice: as it is, and with every
// checksum it can find recomputed (RepairChecksums), so that mutations inside a
// block reach zstd, Cap'n Proto and the event decoder.
//
// A ring file is at least 8 KiB, mostly zeros; CompactRing / ExpandRing map it
// to and from a short form (ring header, one slot header, that slot's data) so
// that a seed stays small and mutations land on bytes that matter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "trace/format.h"
#include "trace/ring.h"
#include "util/hash.h"

namespace replay::fuzz {

inline uint64_t BlockChecksum(const format::BlockHeader& h, const uint8_t* stored, size_t n) {
  format::BlockHeader copy = h;
  copy.checksum = 0;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &copy, sizeof(copy));
  XXH3_64bits_update(&state, stored, n);
  return XXH3_64bits_digest(&state);
}

// Appends a block holding `raw` uncompressed (Codec::kNone), as a writer would
// for incompressible content.
inline void AppendRawBlock(format::BlockKind kind, uint64_t tag, uint64_t aux,
                           std::span<const uint8_t> raw, std::string* out) {
  format::BlockHeader h{};
  h.magic = format::kBlockMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.codec = static_cast<uint8_t>(format::Codec::kNone);
  h.stored_size = static_cast<uint32_t>(raw.size());
  h.raw_size = static_cast<uint32_t>(raw.size());
  h.tag = tag;
  h.aux = aux;
  h.checksum = BlockChecksum(h, raw.data(), raw.size());
  out->append(reinterpret_cast<const char*>(&h), sizeof(h));
  out->append(reinterpret_cast<const char*>(raw.data()), raw.size());
}

// A copy of `in` whose file header (set to `stream`) and block checksums are
// recomputed. Blocks are walked back to back from the file header; where a
// block header does not fit, the walk stops and the rest is left alone.
inline std::vector<uint8_t> RepairChecksums(std::span<const uint8_t> in, format::StreamKind stream) {
  std::vector<uint8_t> out(in.begin(), in.end());
  if (out.size() < sizeof(format::FileHeader)) return out;
  format::FileHeader fh;
  std::memcpy(&fh, out.data(), sizeof(fh));
  std::memcpy(fh.magic, format::kFileMagic, sizeof(fh.magic));
  fh.stream = static_cast<uint16_t>(stream);
  fh.checksum = Hash64(&fh, offsetof(format::FileHeader, checksum));
  std::memcpy(out.data(), &fh, sizeof(fh));
  size_t pos = std::clamp<size_t>(fh.header_size, sizeof(format::FileHeader), out.size());
  while (out.size() - pos >= sizeof(format::BlockHeader)) {
    format::BlockHeader h;
    std::memcpy(&h, out.data() + pos, sizeof(h));
    h.magic = format::kBlockMagic;
    size_t room = out.size() - pos - sizeof(h);
    if (h.stored_size > room) h.stored_size = static_cast<uint32_t>(room);
    h.checksum = BlockChecksum(h, out.data() + pos + sizeof(h), h.stored_size);
    std::memcpy(out.data() + pos, &h, sizeof(h));
    pos += sizeof(h) + h.stored_size;
  }
  return out;
}

// The short form of a ring file: [RingHeader, declaring one slot][the first
// slot that holds records: its SlotHeader][its data up to the last non-zero byte].
inline std::string CompactRing(std::span<const uint8_t> file) {
  std::string out;
  if (file.size() < kRingHeaderBytes) return out;
  RingHeader h;
  std::memcpy(static_cast<void*>(&h), file.data(), sizeof(h));
  size_t slot_bytes = kSlotHeaderBytes + h.capacity;
  for (size_t at = kRingHeaderBytes; at + slot_bytes <= file.size(); at += slot_bytes) {
    SlotHeader sh;
    std::memcpy(static_cast<void*>(&sh), file.data() + at, sizeof(sh));
    if (sh.head.load() == sh.tail.load()) continue;
    h.slots_used.store(1);
    out.append(reinterpret_cast<const char*>(&h), sizeof(h));
    out.append(reinterpret_cast<const char*>(&sh), sizeof(sh));
    std::span<const uint8_t> data = file.subspan(at + kSlotHeaderBytes, h.capacity);
    size_t end = data.size();
    while (end > 0 && data[end - 1] == 0) --end;
    out.append(reinterpret_cast<const char*>(data.data()), end);
    break;
  }
  return out;
}

// A ring file laid out from its short form: the slot's data is zero-padded to
// the header's capacity when that is small enough to be worth building
// (otherwise the data is placed as it is and the file is short).
inline std::vector<uint8_t> ExpandRing(std::span<const uint8_t> compact) {
  constexpr size_t kFixed = sizeof(RingHeader) + sizeof(SlotHeader);
  if (compact.size() < kFixed) return {};
  RingHeader h;
  std::memcpy(static_cast<void*>(&h), compact.data(), sizeof(h));
  std::span<const uint8_t> data = compact.subspan(kFixed);
  size_t capacity = h.capacity <= (1u << 16) ? static_cast<size_t>(h.capacity) : 0;
  std::vector<uint8_t> file(kRingHeaderBytes + kSlotHeaderBytes + std::max(capacity, data.size()));
  std::memcpy(file.data(), compact.data(), sizeof(RingHeader));
  std::memcpy(file.data() + kRingHeaderBytes, compact.data() + sizeof(RingHeader), sizeof(SlotHeader));
  std::memcpy(file.data() + kRingHeaderBytes + kSlotHeaderBytes, data.data(), data.size());
  return file;
}

}  // namespace replay::fuzz
