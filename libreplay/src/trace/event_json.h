// event_json.h: an event as a JSON value, for the library's own documents
// (dumps, diffs, exports). Implemented in event_format.cpp beside the text
// form; the public header gives the same as text (EventJson).
#pragma once

#include "replay/event.h"
#include "replay/trace_header.h"
#include "util/json.h"

namespace replay {

nlohmann::json EventToJson(const Event& e, const RankHeader& header);

}  // namespace replay
