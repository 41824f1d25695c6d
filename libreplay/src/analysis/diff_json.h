// diff_json.h: the JSON value of `replay diff --json` (docs/check.md).
// Implemented in diff.cpp; the public header gives the same as text.
#pragma once

#include "replay/diff.h"
#include "util/json.h"

namespace replay {

nlohmann::json DiffReportToJson(const DiffReport& report);

}  // namespace replay
