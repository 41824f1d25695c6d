// json.h: JSON inside the library and the `replay` command.
//
// The public headers give JSON as text; inside, documents are built as
// nlohmann::json values and printed through JsonText, the one place that
// decides how. Stateless; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace replay {

// `j` as JSON text, `indent` spaces per level (-1: one line). Strings from a
// trace or a dump may hold bytes that are not UTF-8: they are replaced (U+FFFD),
// never thrown on.
std::string JsonText(const nlohmann::json& j, int indent = -1);

// `text` parsed; an empty object when it is empty or not JSON.
nlohmann::json ParseJsonObject(const std::string& text);

}  // namespace replay
