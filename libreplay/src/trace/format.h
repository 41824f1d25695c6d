// format.h: what the trace writer and reader share about the bytes on disk.
//
// The prose specification is docs/trace-format.md; this header is its executable
// half. Everything here is little-endian and packed as declared. Changing any
// layout in this file bumps kFormatEpoch; see "Evolving the format" there.
#pragma once

#include <cstddef>
#include <cstdint>

namespace replay::format {

// The trace format epoch. Bumped when framing (this file) or the layout of an
// events block changes in a way a reader of an older epoch cannot skip; schema
// evolution does not bump it. Epoch 3: events stored by kind (trace.capnp,
// EventBlock). Epoch 4: op, ret, completion, test and CUDA records packed, each
// holding what differs from the last record at its call site. Readers read every
// earlier epoch.
inline constexpr uint32_t kFormatEpoch = 4;
// The lowest reader epoch that can read what this writer produces. A reader
// refuses a trace whose minReaderEpoch is above its own kFormatEpoch. An epoch 3
// reader would find the op, ret and completion lists of an epoch 4 block empty,
// so it must refuse it.
inline constexpr uint32_t kMinReaderEpoch = 4;

// Names inside a trace directory.
inline constexpr const char* kManifestFile = "manifest";
inline constexpr const char* kRankDirPrefix = "rank-";  // rank-00003
inline constexpr const char* kHeaderFile = "header";
inline constexpr const char* kEventsFile = "events";
inline constexpr const char* kPayloadsFile = "payloads";
inline constexpr const char* kRingFile = "ring";

// The most ranks a trace describes: a header or manifest naming a rank or
// world size beyond it is damaged or foreign, and is read as such.
inline constexpr int32_t kMaxRanks = 1 << 20;
// Clock readings a header states (realtime and monotonic ns) lie in
// [0, kMaxClockNs) (2^62 ns: until the year 2116), and an event's time, in ns
// since its rank's start, within +-kMaxEventTimeNs (2^60 ns: 36 years). With
// these bounds a reader's sums and differences of times cannot overflow.
inline constexpr int64_t kMaxClockNs = int64_t{1} << 62;
inline constexpr int64_t kMaxEventTimeNs = int64_t{1} << 60;

// Every stream file (events, payloads) starts with a FileHeader.
inline constexpr char kFileMagic[8] = {'R', 'E', 'P', 'L', 'A', 'Y', 'T', 'R'};

enum class StreamKind : uint16_t {
  kEvents = 1,    // blocks of EventBlock messages
  kPayloads = 2,  // blocks of raw received bytes, one payload (or part) per block
  kHeader = 3,    // `header`: one block holding a RankHeader message
  kManifest = 4,  // `manifest`: one block holding a JobManifest message
};

struct FileHeader {
  char magic[8];            // kFileMagic
  uint32_t epoch;           // writer's kFormatEpoch
  uint32_t min_reader_epoch;
  uint16_t stream;          // StreamKind
  uint16_t header_size;     // sizeof(FileHeader); lets a later epoch grow it
  uint32_t reserved;
  uint8_t trace_uuid[16];
  uint64_t checksum;        // XXH3-64 of the bytes above
};
static_assert(sizeof(FileHeader) == 48);

// After the FileHeader come blocks, back to back, each a BlockHeader followed by
// `stored_size` bytes. A block is self-contained: it decodes without any other
// block, so a reader skips a bad one and goes on. There is no footer or index.
inline constexpr uint32_t kBlockMagic = 0x4b4c4252;  // "RBLK" as little-endian bytes

enum class Codec : uint8_t {
  kNone = 0,
  kZstd = 1,
};

// Kinds of block content.
enum class BlockKind : uint8_t {
  kEvents = 1,    // an EventBlock Cap'n Proto message (unpacked encoding)
  kPayload = 2,   // raw bytes; tag = XXH3-64 of the whole payload, see payload_offset
  kHeader = 3,    // a RankHeader message
  kManifest = 4,  // a JobManifest message
};

struct BlockHeader {
  uint32_t magic;        // kBlockMagic
  uint8_t kind;          // BlockKind
  uint8_t codec;         // Codec
  uint16_t flags;        // 0; reserved
  uint32_t stored_size;  // bytes that follow this header
  uint32_t raw_size;     // bytes after decompression
  uint64_t tag;          // events: first event index; payload: payload hash; else 0
  uint64_t aux;          // events: event count; payload: offset of this part in the payload
  uint64_t checksum;     // XXH3-64 of this header (with checksum = 0) and the stored bytes
};
static_assert(sizeof(BlockHeader) == 40);

// Bounds a reader enforces before allocating, so a corrupt length can't ask for
// gigabytes. Writers never produce blocks larger than these.
inline constexpr uint32_t kMaxStoredBlock = 64u << 20;
inline constexpr uint32_t kMaxRawBlock = 64u << 20;
// Events in one events block at most (REPLAY_BLOCK_EVENTS is capped here): a
// few compressed bytes can declare a huge but cheap list, and a reader builds
// every event it declares.
inline constexpr uint32_t kMaxBlockEvents = 1u << 20;

// A payload larger than this is split across several blocks with the same tag.
inline constexpr uint32_t kPayloadPartBytes = 4u << 20;

}  // namespace replay::format
