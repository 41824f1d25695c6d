// trace_decoder_fuzz: libFuzzer target for every path that reads trace bytes a
// reader did not write itself: an events stream (CheckFileHeader, BlockScanner,
// BlockCodec::Decode, DecodeEventBlock), a rank header and a job manifest
// (DecodeRankHeader, DecodeJobManifest), and a ring left by a crashed rank
// (RingTails, SalvageRing).
//
// The property checked is that none of them crashes, hangs, trips ASan or UBSan,
// or allocates without bound: damage must come back as a Status or a reported
// problem. Each input goes through every path, as it is and with its checksums
// repaired (fuzz_support.h), so that mutations behind a checksum are reached.
//
// Build and run: see tests/fuzz/run_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "replay/trace_header.h"
#include "trace/block.h"
#include "trace/event_codec.h"
#include "trace/format.h"
#include "trace/ring.h"

namespace replay::fuzz {
namespace {

// What a RankReader does with an events stream, minus the file system.
void DecodeEventsStream(std::span<const uint8_t> file) {
  format::FileHeader fh;
  if (!CheckFileHeader(file, format::StreamKind::kEvents, "fuzz", &fh).ok()) return;
  BlockScanner scanner(file, fh.header_size);
  BlockCodec codec;
  std::string raw;
  std::vector<Event> events;
  FoundBlock block;
  while (scanner.Next(&block)) {
    if (!codec.Decode(block.header, block.stored, &raw).ok()) continue;
    if (block.header.kind != static_cast<uint8_t>(format::BlockKind::kEvents)) continue;
    events.clear();
    (void)DecodeEventBlock(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()), &events);
  }
}

void DecodeRing(std::span<const uint8_t> file) {
  std::vector<uint64_t> tails = RingTails(file);
  (void)SalvageRing(file, tails);
  (void)SalvageRing(file);
}

}  // namespace
}  // namespace replay::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replay;
  using namespace replay::fuzz;
  std::span<const uint8_t> in(data, size);

  DecodeEventsStream(in);
  DecodeEventsStream(RepairChecksums(in, format::StreamKind::kEvents));

  (void)DecodeRankHeader(in, "fuzz");
  (void)DecodeRankHeader(RepairChecksums(in, format::StreamKind::kHeader), "fuzz");
  (void)DecodeJobManifest(in, "fuzz");
  (void)DecodeJobManifest(RepairChecksums(in, format::StreamKind::kManifest), "fuzz");

  // The input itself as an event block message, as a block stored without
  // compression would hand it over.
  std::vector<Event> events;
  (void)DecodeEventBlock(in, &events);

  DecodeRing(in);
  DecodeRing(ExpandRing(in));
  return 0;
}
