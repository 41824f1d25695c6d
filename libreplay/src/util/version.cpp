#include "replay/version.h"

#include "trace/format.h"

namespace replay {

const char* Version() { return REPLAY_VERSION_STRING; }
unsigned TraceEpoch() { return format::kFormatEpoch; }
std::string VersionLine() {
  return std::string("replay ") + Version() + " (trace format epoch " +
         std::to_string(TraceEpoch()) + ")";
}

}  // namespace replay
