#include "trace_input.h"

namespace replay::cli {

Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path) {
  return TraceReader::Open(path);
}

}  // namespace replay::cli
