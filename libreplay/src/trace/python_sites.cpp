#include "trace/python_sites.h"

#include <charconv>
#include <cstdio>

namespace replay {
namespace {

void AppendClean(std::string_view text, std::string* out) {
  for (char c : text) out->push_back(c == '\t' || c == '\n' ? ' ' : c);
}

template <typename T>
bool ParseNumber(std::string_view text, int base, T* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string EncodePythonSite(const PythonSite& site) {
  char head[48];
  std::snprintf(head, sizeof(head), "%llx %llx\n", static_cast<unsigned long long>(site.id),
                static_cast<unsigned long long>(site.native));
  std::string out = head;
  for (const SourceFrame& f : site.frames) {
    out += std::to_string(f.line);
    out += '\t';
    AppendClean(f.file, &out);
    out += '\t';
    AppendClean(f.function, &out);
    out += '\n';
  }
  return out;
}

std::optional<PythonSite> DecodePythonSite(std::string_view value) {
  PythonSite site;
  size_t eol = value.find('\n');
  if (eol == std::string_view::npos) return std::nullopt;
  std::string_view head = value.substr(0, eol);
  size_t space = head.find(' ');
  if (space == std::string_view::npos || !ParseNumber(head.substr(0, space), 16, &site.id) ||
      !ParseNumber(head.substr(space + 1), 16, &site.native) || site.id == 0) {
    return std::nullopt;
  }
  value.remove_prefix(eol + 1);
  while (!value.empty()) {
    eol = value.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;
    std::string_view line = value.substr(0, eol);
    value.remove_prefix(eol + 1);
    size_t t1 = line.find('\t');
    size_t t2 = t1 == std::string_view::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string_view::npos) return std::nullopt;
    SourceFrame f;
    if (!ParseNumber(line.substr(0, t1), 10, &f.line)) return std::nullopt;
    f.file = std::string(line.substr(t1 + 1, t2 - t1 - 1));
    f.function = std::string(line.substr(t2 + 1));
    site.frames.push_back(std::move(f));
  }
  return site;
}

}  // namespace replay
