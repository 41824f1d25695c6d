// make_seed_corpus: writes the fuzz target's seed corpus from real writer output.
//
// Usage: trace_fuzz_seeds DIR
// Records the sample events of every kind (tests/support/sample_events.cpp) with
// a TraceWriter and keeps: the events stream, the rank header, the job manifest,
// an events stream with one uncompressed block (so mutations reach Cap'n Proto
// directly), and the short form of a ring left unclosed, as a crash leaves it.
// tests/fuzz/corpus/ holds this program's output; rerun it when the format changes.
// The corpus also keeps the events seeds of format epochs 2 and 3 (*-epoch2,
// *-epoch3), written by those epochs' writers, since readers still read them.
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_support.h"
#include "replay/trace_writer.h"
#include "support/sample_events.h"
#include "support/temp_dir.h"
#include "trace/block.h"
#include "trace/event_codec.h"

namespace {

replay::WriterOptions Options(const std::string& dir) {
  replay::WriterOptions o;
  o.dir = dir;
  o.header.rank = 0;
  o.header.world_size = 2;
  o.header.host = "seed";
  o.header.api_names = {"MPI_Init", "MPI_Allreduce", "MPI_Send"};
  o.header.versions = {{"replay", "seed"}};
  o.manifest.command = {"train", "--steps", "2"};
  o.ring_slot_bytes = 4096;
  o.background_thread = false;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace replay;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string out = argv[1];
  std::filesystem::create_directories(out);
  std::string scratch = (std::filesystem::temp_directory_path() / "replay-fuzz-seeds").string();
  std::filesystem::remove_all(scratch);
  std::vector<Event> events = testing::SampleEventsOfEveryKind();

  // A complete recording.
  {
    auto w = TraceWriter::Open(Options(scratch + "/closed"));
    if (!w.ok()) return 1;
    for (const Event& e : events) (*w)->Append(e);
    if (!(*w)->Close(CloseReason::kFinalize).ok()) return 1;
    std::string rank = (*w)->rank_dir();
    testing::WriteFile(out + "/events", testing::ReadFile(rank + "/events"));
    testing::WriteFile(out + "/header", testing::ReadFile(rank + "/header"));
    testing::WriteFile(out + "/manifest", testing::ReadFile(scratch + "/closed/manifest"));
  }
  // A recording whose process "died": the ring still holds what was appended.
  {
    auto w = TraceWriter::Open(Options(scratch + "/crashed"));
    if (!w.ok()) return 1;
    for (size_t i = 0; i < 6; ++i) (*w)->Append(events[i * 2]);
    std::string ring = testing::ReadFile((*w)->rank_dir() + "/ring");
    testing::WriteFile(out + "/ring", fuzz::CompactRing(
                                 {reinterpret_cast<const uint8_t*>(ring.data()), ring.size()}));
    (*w)->Close(CloseReason::kExit);
  }
  // An events stream with one block stored uncompressed.
  {
    std::vector<Event> block;
    for (size_t i = 0; i < 4; ++i) {
      block.push_back(events[i * 3]);
      block.back().index = i;
    }
    EventBlockEncoder enc;
    std::span<const uint8_t> raw = enc.Encode(block);
    std::string file;
    const uint8_t uuid[16] = {1};
    EncodeFileHeader(format::StreamKind::kEvents, uuid, &file);
    fuzz::AppendRawBlock(format::BlockKind::kEvents, 0, 4, raw, &file);
    testing::WriteFile(out + "/events-raw-block", file);
  }
  std::filesystem::remove_all(scratch);
  return 0;
}
