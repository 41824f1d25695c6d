// trace_input.h: opening the trace a command was given, the same way everywhere.
#pragma once

#include <memory>
#include <string>

#include "replay/trace_reader.h"

namespace replay::cli {

// Opens a trace directory given on the command line.
Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path);

}  // namespace replay::cli
