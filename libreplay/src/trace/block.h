// block.h: framing of trace stream files into independent, checksummed blocks.
//
// A stream file is a FileHeader followed by blocks (format.h). EncodeBlock frames
// and compresses one block; BlockScanner walks a file's bytes and yields every
// block whose checksum holds, reporting damaged or torn regions instead of
// stopping at them. Nothing here allocates more than a block's bounded size, so
// hostile input cannot exhaust memory.
//
// Thread safety: a BlockScanner or BlockCodec is used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "replay/status.h"
#include "trace/format.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace replay {

// Compression and decompression contexts, reused across blocks.
class BlockCodec {
 public:
  explicit BlockCodec(int zstd_level = 3);
  ~BlockCodec();
  BlockCodec(const BlockCodec&) = delete;
  BlockCodec& operator=(const BlockCodec&) = delete;

  void set_level(int zstd_level) { level_ = zstd_level; }

  // Appends header + compressed `raw` to `out`. `raw` must be at most
  // format::kMaxRawBlock bytes. With `min_bytes`, the block (header included)
  // is made at least that long where zstd can encode it: its frame is followed
  // by a zstd skippable frame, which decoders pass over. (The writer needs this
  // to replace an open block in place without shortening the file.)
  // With `random_from` inside `raw`, the bytes from there on (random ones,
  // such as fingerprints) are compressed as zstd blocks of their own, so that
  // they do not spoil the statistics zstd codes the rest with; the frame
  // decodes as any other.
  Status Encode(format::BlockKind kind, uint64_t tag, uint64_t aux,
                std::span<const uint8_t> raw, std::string* out, size_t min_bytes = 0,
                size_t random_from = SIZE_MAX);

  // Decompresses a block found by BlockScanner into `raw` (replacing its content).
  Status Decode(const format::BlockHeader& header, std::span<const uint8_t> stored,
                std::string* raw);

 private:
  // `raw` as one frame whose bytes from `split` on start a zstd block of their
  // own, into scratch_ (at most `bound` bytes); its size, or a zstd error code.
  size_t CompressSplit(std::span<const uint8_t> raw, size_t split, size_t bound);

  int level_;
  ZSTD_CCtx_s* cctx_ = nullptr;
  ZSTD_DCtx_s* dctx_ = nullptr;
  std::string scratch_;
};

// A region of a stream file that could not be read as blocks.
struct BlockProblem {
  uint64_t offset = 0;  // byte offset in the file
  uint64_t length = 0;  // bytes skipped
  bool torn_tail = false;  // an incomplete last block: the writer died or is still writing
  std::string reason;
};

struct FoundBlock {
  format::BlockHeader header;
  uint64_t offset = 0;                // of the BlockHeader in the file
  std::span<const uint8_t> stored;    // the bytes after the header
};

// The checksum a FileHeader carries: XXH3-64 of the bytes before it.
uint64_t FileHeaderChecksum(const format::FileHeader& h);

// Writes the FileHeader for a stream into `out`.
void EncodeFileHeader(format::StreamKind stream, const uint8_t trace_uuid[16], std::string* out);

// Checks a FileHeader: magic, checksum, then epoch (so that damage never reads
// as a newer format). `what` names the file in messages.
Status CheckFileHeader(std::span<const uint8_t> file, format::StreamKind expected,
                       const std::string& what, format::FileHeader* out);

// Iterates the blocks of `data` starting at `offset` (just past the FileHeader).
class BlockScanner {
 public:
  BlockScanner(std::span<const uint8_t> data, uint64_t offset) : data_(data), pos_(offset) {}

  // The next intact block; false at the end. Damaged regions passed over on the
  // way are appended to problems().
  bool Next(FoundBlock* block);

  const std::vector<BlockProblem>& problems() const { return problems_; }
  uint64_t position() const { return pos_; }

 private:
  // Whether a valid block starts at `at`; fills `block` if so.
  bool ValidAt(uint64_t at, FoundBlock* block, std::string* why, bool* truncated) const;

  std::span<const uint8_t> data_;
  uint64_t pos_;
  std::vector<BlockProblem> problems_;
};

}  // namespace replay
