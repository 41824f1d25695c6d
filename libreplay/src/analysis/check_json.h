// check_json.h: the JSON values of `replay check --json` (docs/check.md), for
// the documents that embed a check (bundle headers, reports, exports).
// Implemented in check.cpp; the public header gives the same as text.
#pragma once

#include "replay/check.h"
#include "util/json.h"

namespace replay {

nlohmann::json CheckReportToJson(const CheckReport& report);
nlohmann::json FindingToJson(const Finding& finding);
// A call site as `check --json` gives it (docs/check.md).
nlohmann::json CallSiteToJson(const CallSite& site);

}  // namespace replay
