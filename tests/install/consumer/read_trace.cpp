// read_trace TRACE: reads a trace through the installed public headers alone
// and prints, per rank, its number, status and events and its first call, then
// the number of findings of `replay check`, then how many packets and bytes
// its Perfetto protobuf export has.
#include <cstdio>
#include <sstream>
#include <string>

#include <replay/check.h>
#include <replay/event_format.h>
#include <replay/perfetto.h>
#include <replay/trace_reader.h>
#include <replay/version.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read_trace TRACE\n");
    return 2;
  }
  auto trace = replay::TraceReader::Open(argv[1]);
  if (!trace.ok()) {
    std::fprintf(stderr, "read_trace: %s\n", trace.status().message().c_str());
    return 2;
  }
  std::printf("replay %s\n", replay::Version());
#ifdef REPLAY_EXECUTABLE
  std::printf("command %s\n", REPLAY_EXECUTABLE);
#endif
  for (size_t i = 0; i < (*trace)->ranks().size(); ++i) {
    auto rank = (*trace)->OpenRank(i);
    if (!rank.ok()) {
      std::fprintf(stderr, "read_trace: %s\n", rank.status().message().c_str());
      return 2;
    }
    const replay::RankReader& r = **rank;
    std::printf("rank %d %s %zu events\n", r.rank(), std::string(replay::RankStatusName(r.status())).c_str(),
                r.events().size());
    for (const replay::Event& e : r.events()) {
      if (e.kind != replay::EventKind::kOp) continue;
      std::printf("  first call: %s\n", replay::FormatEventBody(e, r.header()).c_str());
      break;
    }
  }
  auto report = replay::CheckTrace(**trace);
  if (!report.ok()) {
    std::fprintf(stderr, "read_trace: %s\n", report.status().message().c_str());
    return 2;
  }
  std::printf("findings %zu\n", report->findings.size());
  std::ostringstream pftrace;
  auto written = replay::WritePerfettoProto(**trace, pftrace);
  if (!written.ok()) {
    std::fprintf(stderr, "read_trace: %s\n", written.status().message().c_str());
    return 2;
  }
  std::printf("pftrace %llu packets %zu bytes\n", static_cast<unsigned long long>(written->events),
              pftrace.str().size());
  return 0;
}
