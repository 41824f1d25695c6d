#include "trace/block.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "util/hash.h"

namespace replay {
namespace {

uint64_t BlockChecksum(const format::BlockHeader& h, std::span<const uint8_t> stored) {
  format::BlockHeader copy = h;
  copy.checksum = 0;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &copy, sizeof(copy));
  XXH3_64bits_update(&state, stored.data(), stored.size());
  return XXH3_64bits_digest(&state);
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t FileHeaderChecksum(const format::FileHeader& h) {
  return Hash64(&h, offsetof(format::FileHeader, checksum));
}

BlockCodec::BlockCodec(int zstd_level) : level_(zstd_level) {}

BlockCodec::~BlockCodec() {
  ZSTD_freeCCtx(cctx_);
  ZSTD_freeDCtx(dctx_);
}

size_t BlockCodec::CompressSplit(std::span<const uint8_t> raw, size_t split, size_t bound) {
  ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_and_parameters);
  size_t r = ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
  if (ZSTD_isError(r)) return r;
  // The content size in the frame header, as ZSTD_compressCCtx writes it.
  r = ZSTD_CCtx_setPledgedSrcSize(cctx_, raw.size());
  if (ZSTD_isError(r)) return r;
  ZSTD_outBuffer out{scratch_.data(), bound, 0};
  ZSTD_inBuffer first{raw.data(), split, 0};
  do {
    r = ZSTD_compressStream2(cctx_, &out, &first, ZSTD_e_flush);
    if (ZSTD_isError(r)) return r;
  } while (r != 0);
  ZSTD_inBuffer rest{raw.data() + split, raw.size() - split, 0};
  do {
    r = ZSTD_compressStream2(cctx_, &out, &rest, ZSTD_e_end);
    if (ZSTD_isError(r)) return r;
  } while (r != 0);
  return out.pos;
}

Status BlockCodec::Encode(format::BlockKind kind, uint64_t tag, uint64_t aux,
                          std::span<const uint8_t> raw, std::string* out, size_t min_bytes, size_t random_from) {
  if (raw.size() > format::kMaxRawBlock) {
    return Status::InvalidArgument("block of " + std::to_string(raw.size()) +
                                   " bytes exceeds the format's block limit");
  }
  if (cctx_ == nullptr) {
    cctx_ = ZSTD_createCCtx();
    if (cctx_ == nullptr) return Status::IoError("cannot allocate a zstd compression context");
  }
  // Compressed into a buffer that only grows, so no block pays for zeroing a
  // worst-case-sized output it will mostly not use.
  constexpr size_t kSkippableHeader = 8;  // magic, then the length of what follows
  // A split frame ends one more zstd block (a 3-byte header) early.
  size_t bound = ZSTD_compressBound(raw.size()) + 8;
  size_t room = bound + kSkippableHeader + (min_bytes > sizeof(format::BlockHeader) ? min_bytes : 0);
  if (scratch_.size() < room) scratch_.resize(room);
  size_t n = random_from > 0 && random_from < raw.size()
                 ? CompressSplit(raw, random_from, bound)
                 : ZSTD_compressCCtx(cctx_, scratch_.data(), bound, raw.data(), raw.size(), level_);
  const uint8_t* stored = reinterpret_cast<const uint8_t*>(scratch_.data());
  format::Codec codec = format::Codec::kZstd;
  if (!ZSTD_isError(n) && sizeof(format::BlockHeader) + n < min_bytes) {
    // Padding: a skippable frame (RFC 8878, 3.1.2) of at least its own header.
    size_t pad = std::max(kSkippableHeader, min_bytes - sizeof(format::BlockHeader) - n);
    uint32_t magic = ZSTD_MAGIC_SKIPPABLE_START;
    uint32_t length = static_cast<uint32_t>(pad - kSkippableHeader);
    std::memcpy(scratch_.data() + n, &magic, 4);
    std::memcpy(scratch_.data() + n + 4, &length, 4);
    std::memset(scratch_.data() + n + kSkippableHeader, 0, length);
    n += pad;
  }
  if (ZSTD_isError(n) || (n >= raw.size() && sizeof(format::BlockHeader) + raw.size() >= min_bytes)) {
    // Incompressible (or a codec failure): store as is; the checksum still
    // covers it. From one copy taken now: the caller's bytes may change as
    // they are read (a window's memory under another rank's put), and the
    // checksum must be of exactly the bytes written.
    if (scratch_.size() < raw.size()) scratch_.resize(raw.size());
    if (!raw.empty()) std::memcpy(scratch_.data(), raw.data(), raw.size());
    stored = reinterpret_cast<const uint8_t*>(scratch_.data());
    n = raw.size();
    codec = format::Codec::kNone;
  }
  format::BlockHeader h{};
  h.magic = format::kBlockMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.codec = static_cast<uint8_t>(codec);
  h.stored_size = static_cast<uint32_t>(n);
  h.raw_size = static_cast<uint32_t>(raw.size());
  h.tag = tag;
  h.aux = aux;
  h.checksum = BlockChecksum(h, std::span<const uint8_t>(stored, n));
  out->append(reinterpret_cast<const char*>(&h), sizeof(h));
  out->append(reinterpret_cast<const char*>(stored), n);
  return Status::Ok();
}

Status BlockCodec::Decode(const format::BlockHeader& header, std::span<const uint8_t> stored,
                          std::string* raw) {
  if (header.raw_size > format::kMaxRawBlock) {
    return Status::Corruption("block claims " + std::to_string(header.raw_size) +
                              " bytes uncompressed, above the format's limit");
  }
  switch (static_cast<format::Codec>(header.codec)) {
    case format::Codec::kNone:
      if (stored.size() != header.raw_size) return Status::Corruption("stored block size mismatch");
      raw->assign(reinterpret_cast<const char*>(stored.data()), stored.size());
      return Status::Ok();
    case format::Codec::kZstd: {
      // A frame that declares another size than the block is damaged: say so
      // before allocating what the block header claims.
      unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
      if (declared == ZSTD_CONTENTSIZE_ERROR) return Status::Corruption("zstd: not a zstd frame");
      if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != header.raw_size) {
        return Status::Corruption("zstd frame holds " + std::to_string(declared) +
                                  " bytes, block header says " + std::to_string(header.raw_size));
      }
      raw->resize(header.raw_size);
      if (dctx_ == nullptr) {
        dctx_ = ZSTD_createDCtx();
        if (dctx_ == nullptr) return Status::IoError("cannot allocate a zstd context");
      }
      size_t n = ZSTD_decompressDCtx(dctx_, raw->data(), raw->size(), stored.data(), stored.size());
      if (ZSTD_isError(n)) {
        return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
      }
      if (n != header.raw_size) {
        return Status::Corruption("block decompressed to " + std::to_string(n) + " bytes, expected " +
                                  std::to_string(header.raw_size));
      }
      return Status::Ok();
    }
  }
  return Status::Corruption("unknown block codec " + std::to_string(header.codec));
}

void EncodeFileHeader(format::StreamKind stream, const uint8_t trace_uuid[16], std::string* out) {
  format::FileHeader h{};
  std::memcpy(h.magic, format::kFileMagic, sizeof(h.magic));
  h.epoch = format::kFormatEpoch;
  h.min_reader_epoch = format::kMinReaderEpoch;
  h.stream = static_cast<uint16_t>(stream);
  h.header_size = sizeof(format::FileHeader);
  std::memcpy(h.trace_uuid, trace_uuid, 16);
  h.checksum = FileHeaderChecksum(h);
  out->append(reinterpret_cast<const char*>(&h), sizeof(h));
}

Status CheckFileHeader(std::span<const uint8_t> file, format::StreamKind expected,
                       const std::string& what, format::FileHeader* out) {
  if (file.empty()) {
    return Status::Corruption(what + " is empty: the rank stopped before writing anything");
  }
  if (file.size() < sizeof(format::FileHeader)) {
    if (std::memcmp(file.data(), format::kFileMagic,
                    std::min(file.size(), sizeof(format::kFileMagic))) == 0) {
      return Status::Corruption(what + " is truncated inside its file header (" +
                                std::to_string(file.size()) + " bytes)");
    }
    return Status::NotATrace(what + " is not a replay trace file (too short, no replay header)");
  }
  format::FileHeader h;
  std::memcpy(&h, file.data(), sizeof(h));
  if (std::memcmp(h.magic, format::kFileMagic, sizeof(h.magic)) != 0) {
    return Status::NotATrace(what + " is not a replay trace file (no replay magic at offset 0)");
  }
  // The checksum first: a damaged epoch must not read as a newer replay's.
  if (h.checksum != FileHeaderChecksum(h)) {
    return Status::Corruption(what + ": file header checksum mismatch (damaged at offset 0)");
  }
  if (h.min_reader_epoch > format::kFormatEpoch) {
    return Status::Version(what + " was written by a newer replay (trace format epoch " +
                           std::to_string(h.epoch) + ", needs a reader of epoch " +
                           std::to_string(h.min_reader_epoch) + "; this replay reads epoch " +
                           std::to_string(format::kFormatEpoch) + "): upgrade replay to read it");
  }
  if (h.stream != static_cast<uint16_t>(expected)) {
    return Status::NotATrace(what + " holds stream kind " + std::to_string(h.stream) +
                             ", expected " + std::to_string(static_cast<int>(expected)));
  }
  if (h.header_size < sizeof(format::FileHeader) || h.header_size > file.size()) {
    return Status::Corruption(what + ": file header size " + std::to_string(h.header_size) +
                              " is impossible");
  }
  if (out != nullptr) *out = h;
  return Status::Ok();
}

bool BlockScanner::ValidAt(uint64_t at, FoundBlock* block, std::string* why,
                           bool* truncated) const {
  *truncated = false;
  uint64_t size = data_.size();
  if (size - at < sizeof(format::BlockHeader)) {
    *truncated = true;
    *why = "block header cut short";
    return false;
  }
  format::BlockHeader h;
  std::memcpy(&h, data_.data() + at, sizeof(h));
  if (h.magic != format::kBlockMagic) {
    *why = "no block magic";
    return false;
  }
  if (h.stored_size > format::kMaxStoredBlock || h.raw_size > format::kMaxRawBlock) {
    *why = "block length " + std::to_string(h.stored_size) + " out of range";
    return false;
  }
  if (size - at - sizeof(h) < h.stored_size) {
    *truncated = true;
    *why = "block of " + std::to_string(h.stored_size) + " bytes cut short at end of file";
    return false;
  }
  std::span<const uint8_t> stored(data_.data() + at + sizeof(h), h.stored_size);
  if (BlockChecksum(h, stored) != h.checksum) {
    *why = "block checksum mismatch (stored " + Hex(h.checksum) + ")";
    return false;
  }
  block->header = h;
  block->offset = at;
  block->stored = stored;
  return true;
}

bool BlockScanner::Next(FoundBlock* block) {
  uint64_t size = data_.size();
  if (pos_ >= size) return false;
  std::string why;
  bool truncated = false;
  if (ValidAt(pos_, block, &why, &truncated)) {
    pos_ += sizeof(format::BlockHeader) + block->header.stored_size;
    return true;
  }
  // Damaged or torn: look for the next block that validates.
  uint64_t bad = pos_;
  const uint8_t magic[4] = {0x52, 0x42, 0x4c, 0x4b};
  for (uint64_t at = bad + 1; at + sizeof(format::BlockHeader) <= size; ++at) {
    const void* hit = std::memchr(data_.data() + at, magic[0], size - at);
    if (hit == nullptr) break;
    at = static_cast<const uint8_t*>(hit) - data_.data();
    if (size - at < 4 || std::memcmp(data_.data() + at, magic, 4) != 0) continue;
    std::string why2;
    bool trunc2 = false;
    if (ValidAt(at, block, &why2, &trunc2)) {
      problems_.push_back({bad, at - bad, false, why});
      pos_ = at + sizeof(format::BlockHeader) + block->header.stored_size;
      return true;
    }
  }
  problems_.push_back({bad, size - bad, truncated, truncated ? why : why + "; nothing readable after it"});
  pos_ = size;
  return false;
}

}  // namespace replay
