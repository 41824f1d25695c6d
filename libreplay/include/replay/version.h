// version.h: the version of replay and of the trace format it writes.
#pragma once

#include <string>

namespace replay {

// "0.1.0"
const char* Version();
// The trace format epoch this build writes and reads (format.h kFormatEpoch).
unsigned TraceEpoch();
// "replay 0.1.0 (trace format epoch 1)"
std::string VersionLine();

}  // namespace replay
