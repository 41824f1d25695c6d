#include "trace/block.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "trace/format.h"

namespace replay {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The header at the front of an encoded block.
format::BlockHeader HeaderOf(const std::string& block) {
  format::BlockHeader h;
  std::memcpy(&h, block.data(), sizeof(h));
  return h;
}

const uint8_t kUuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// A stream file with `n` blocks whose content is "block <i>" repeated.
std::string StreamWithBlocks(int n, std::vector<uint64_t>* offsets = nullptr) {
  std::string file;
  EncodeFileHeader(format::StreamKind::kEvents, kUuid, &file);
  BlockCodec codec;
  for (int i = 0; i < n; ++i) {
    std::string raw;
    for (int k = 0; k < 200; ++k) raw += "block " + std::to_string(i) + ";";
    if (offsets) offsets->push_back(file.size());
    REQUIRE(codec.Encode(format::BlockKind::kEvents, i, 1, Bytes(raw), &file).ok());
  }
  return file;
}

std::vector<int> ReadTags(const std::string& file, std::vector<BlockProblem>* problems) {
  BlockScanner scanner(Bytes(file), sizeof(format::FileHeader));
  FoundBlock b;
  std::vector<int> tags;
  BlockCodec codec;
  while (scanner.Next(&b)) {
    std::string raw;
    REQUIRE(codec.Decode(b.header, b.stored, &raw).ok());
    CHECK(raw.rfind("block " + std::to_string(b.header.tag) + ";", 0) == 0);
    tags.push_back(static_cast<int>(b.header.tag));
  }
  *problems = scanner.problems();
  return tags;
}

// `n` bytes of xorshift64 output: no codec shrinks them.
std::string Incompressible(size_t n) {
  std::string out;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out.push_back(static_cast<char>(x));
  }
  return out;
}

TEST_CASE("blocks round-trip and compress", "[trace]") {
  std::string file = StreamWithBlocks(3);
  std::vector<BlockProblem> problems;
  CHECK(ReadTags(file, &problems) == std::vector<int>{0, 1, 2});
  CHECK(problems.empty());
  CHECK(file.size() < 3 * 200 * 8);  // the repetitive content compressed
}

TEST_CASE("reader skips a torn trailing block and reports it", "[trace]") {
  std::string file = StreamWithBlocks(3);
  file.resize(file.size() - 5);
  std::vector<BlockProblem> problems;
  CHECK(ReadTags(file, &problems) == std::vector<int>{0, 1});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].torn_tail);
}

TEST_CASE("reader skips a corrupt middle block and reads the rest", "[trace]") {
  std::vector<uint64_t> offsets;
  std::string file = StreamWithBlocks(4, &offsets);
  file[offsets[1] + sizeof(format::BlockHeader) + 3] ^= 0x40;  // flip a bit in block 1's data
  std::vector<BlockProblem> problems;
  CHECK(ReadTags(file, &problems) == std::vector<int>{0, 2, 3});
  REQUIRE(problems.size() == 1);
  CHECK_FALSE(problems[0].torn_tail);
  CHECK(problems[0].offset == offsets[1]);
  CHECK(problems[0].length == offsets[2] - offsets[1]);
  CHECK(problems[0].reason.find("checksum") != std::string::npos);
}

TEST_CASE("reader resynchronises after a damaged block length", "[trace]") {
  std::vector<uint64_t> offsets;
  std::string file = StreamWithBlocks(3, &offsets);
  // stored_size of block 0 claims far more than is there.
  uint32_t huge = 1u << 30;
  std::memcpy(&file[offsets[0] + 8], &huge, 4);
  std::vector<BlockProblem> problems;
  CHECK(ReadTags(file, &problems) == std::vector<int>{1, 2});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].offset == offsets[0]);
}

TEST_CASE("file header rejects foreign files, damage and newer epochs", "[trace]") {
  std::string good = StreamWithBlocks(1);
  format::FileHeader fh;
  CHECK(CheckFileHeader(Bytes(good), format::StreamKind::kEvents, "events", &fh).ok());

  std::string foreign = "#!/bin/sh\necho this is not a trace\n" + std::string(64, 'x');
  CHECK(CheckFileHeader(Bytes(foreign), format::StreamKind::kEvents, "events", &fh).code() ==
        Status::Code::kNotATrace);

  CHECK(CheckFileHeader(Bytes(std::string()), format::StreamKind::kEvents, "events", &fh).code() ==
        Status::Code::kCorruption);
  CHECK(CheckFileHeader(Bytes(good.substr(0, 20)), format::StreamKind::kEvents, "events", &fh)
            .code() == Status::Code::kCorruption);

  std::string damaged = good;
  damaged[20] ^= 1;
  CHECK(CheckFileHeader(Bytes(damaged), format::StreamKind::kEvents, "events", &fh).code() ==
        Status::Code::kCorruption);

  std::string newer = good;
  uint32_t epoch = format::kFormatEpoch + 1;
  std::memcpy(&newer[offsetof(format::FileHeader, min_reader_epoch)], &epoch, 4);
  // A bit flip there is damage, not a newer replay: the checksum tells them apart.
  Status flipped = CheckFileHeader(Bytes(newer), format::StreamKind::kEvents, "events", &fh);
  CHECK(flipped.code() == Status::Code::kCorruption);
  CHECK(flipped.message().find("newer") == std::string::npos);
  format::FileHeader h;
  std::memcpy(&h, newer.data(), sizeof(h));
  h.checksum = FileHeaderChecksum(h);
  std::memcpy(newer.data(), &h, sizeof(h));
  Status st = CheckFileHeader(Bytes(newer), format::StreamKind::kEvents, "events", &fh);
  CHECK(st.code() == Status::Code::kVersion);
  CHECK(st.message().find("upgrade replay") != std::string::npos);

  CHECK(CheckFileHeader(Bytes(good), format::StreamKind::kPayloads, "events", &fh).code() ==
        Status::Code::kNotATrace);
}

TEST_CASE("incompressible content is stored as is", "[trace]") {
  const std::string raw = Incompressible(4096);
  std::string file;
  BlockCodec codec;
  REQUIRE(codec.Encode(format::BlockKind::kPayload, 7, 0, Bytes(raw), &file).ok());
  format::BlockHeader h = HeaderOf(file);
  CHECK(h.codec == static_cast<uint8_t>(format::Codec::kNone));
  std::string back;
  REQUIRE(codec.Decode(h, Bytes(file).subspan(sizeof(h)), &back).ok());
  CHECK(back == raw);
}

TEST_CASE("a block whose random tail is compressed apart reads back as the same content", "[trace]") {
  // Repetitive bytes, then random ones: what an events block is, fingerprints last.
  std::string raw;
  for (int k = 0; k < 3000; ++k) raw += "op seq " + std::to_string(k % 7) + ";";
  const size_t head = raw.size();
  std::mt19937_64 rng(7);
  for (int k = 0; k < 2000; ++k) {
    uint64_t v = rng();
    raw.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  BlockCodec codec(1);
  std::string whole;
  REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &whole).ok());
  for (size_t split : {size_t{0}, size_t{1}, head, raw.size() - 1, raw.size(), SIZE_MAX}) {
    INFO("split at " << split);
    for (size_t min_bytes : {size_t{0}, whole.size() + 100}) {
      std::string file;
      REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &file, min_bytes, split).ok());
      if (min_bytes != 0) CHECK(file.size() >= min_bytes);
      format::BlockHeader h = HeaderOf(file);
      CHECK(h.codec == static_cast<uint8_t>(format::Codec::kZstd));
      std::string back;
      REQUIRE(codec.Decode(h, Bytes(file).subspan(sizeof(h)), &back).ok());
      CHECK(back == raw);
    }
  }
  // And the codec's next whole-frame block is as before.
  std::string again;
  REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &again).ok());
  CHECK(again == whole);
}

TEST_CASE("a block padded to a minimum length reads back as the same content", "[trace]") {
  std::string compressible;
  for (int k = 0; k < 200; ++k) compressible += "block 1;";
  const std::string random = Incompressible(300);
  for (const std::string& raw : {compressible, random}) {
    BlockCodec codec;
    std::string natural;
    REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &natural).ok());
    // Padding of one byte (less than a skippable frame's header), of some, and of a lot.
    for (size_t extra : {size_t{1}, size_t{7}, size_t{8}, size_t{100}, size_t{5000}}) {
      INFO("raw " << raw.size() << " bytes, " << extra << " more than " << natural.size());
      std::string file;
      EncodeFileHeader(format::StreamKind::kEvents, kUuid, &file);
      size_t at = file.size();
      REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &file, natural.size() + extra).ok());
      CHECK(file.size() - at >= natural.size() + extra);
      CHECK(file.size() - at <= natural.size() + std::max<size_t>(extra, 8) + 16);
      // A second block after it is found too: the padding is inside the block.
      REQUIRE(codec.Encode(format::BlockKind::kEvents, 4, 1, Bytes(compressible), &file).ok());
      BlockScanner scanner(Bytes(file), at);
      FoundBlock b;
      REQUIRE(scanner.Next(&b));
      CHECK(b.header.codec == static_cast<uint8_t>(format::Codec::kZstd));
      std::string back;
      REQUIRE(codec.Decode(b.header, b.stored, &back).ok());
      CHECK(back == raw);
      REQUIRE(scanner.Next(&b));
      CHECK(b.header.tag == 4);
      CHECK_FALSE(scanner.Next(&b));
      CHECK(scanner.problems().empty());
    }
    // Already long enough: no padding.
    std::string file;
    REQUIRE(codec.Encode(format::BlockKind::kEvents, 3, 1, Bytes(raw), &file, natural.size()).ok());
    CHECK(file == natural);
  }
}

TEST_CASE("a block whose zstd frame disagrees with its header is refused before allocating",
          "[trace]") {
  // Found by the decoder fuzz target: a damaged raw_size made every bad block
  // cost a zeroed buffer of up to the format's block limit.
  std::string raw(1000, 'a');
  std::string file;
  BlockCodec codec;
  REQUIRE(codec.Encode(format::BlockKind::kEvents, 0, 1, Bytes(raw), &file).ok());
  format::BlockHeader h = HeaderOf(file);
  REQUIRE(h.codec == static_cast<uint8_t>(format::Codec::kZstd));
  h.raw_size = format::kMaxRawBlock;
  std::string back;
  Status st = codec.Decode(h, Bytes(file).subspan(sizeof(h)), &back);
  CHECK(st.code() == Status::Code::kCorruption);
  CHECK(back.capacity() < raw.size() * 2);
}

}  // namespace
}  // namespace replay
