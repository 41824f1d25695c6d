#include "bundle/redact.h"
#include "util/json.h"

#include <algorithm>
#include <cctype>

namespace replay::bundle {
namespace {

// Words of a name, upper-cased: "HF_TOKEN" -> HF, TOKEN; "apiKey" -> API, KEY;
// "--db-password" -> DB, PASSWORD.
std::vector<std::string> Words(std::string_view name) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (!std::isalnum(c)) {
      flush();
      continue;
    }
    // camelCase boundary: a lower-case letter followed by an upper-case one.
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]))) flush();
    cur.push_back(static_cast<char>(std::toupper(c)));
  }
  flush();
  return words;
}

// A word that makes the whole name a secret. Lists that change together: the
// comment of IsSecretName in redact.h and docs/bundle.md.
bool SecretWord(const std::string& w) {
  static const char* const kWords[] = {
      "TOKEN",       "TOKENS",      "SECRET",     "SECRETS",     "PASSWORD",   "PASSWORDS",
      "PASSWD",      "PASSPHRASE",  "KEY",        "APIKEY",      "ACCESSKEY",  "SECRETKEY",
      "PRIVATEKEY",  "SIGNINGKEY",  "CREDENTIAL", "CREDENTIALS", "CREDS",      "AUTH",
      "AUTHORIZATION", "COOKIE",
  };
  for (const char* k : kWords) {
    if (w == k) return true;
  }
  auto ends_with = [&](std::string_view suffix) {
    return w.size() > suffix.size() && std::string_view(w).substr(w.size() - suffix.size()) == suffix;
  };
  // APITOKEN, ACCESSTOKEN, MYSECRET, DBPASSWORD; not TOKENIZERS.
  return ends_with("TOKEN") || w.find("SECRET") != std::string::npos ||
         w.find("PASSWORD") != std::string::npos || w.find("PASSWD") != std::string::npos ||
         w.find("CREDENTIAL") != std::string::npos;
}

// A last word that makes the name about where a secret is, or how big, not
// the secret itself: SSL_KEY_FILE, KEY_SIZE.
bool LocationWord(const std::string& w) {
  static const char* const kWords[] = {"FILE", "PATH", "DIR", "SOCK", "FD", "SIZE", "LEN", "LENGTH", "BITS"};
  for (const char* k : kWords) {
    if (w == k) return true;
  }
  return false;
}

bool TokenChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// `s` starts with `prefix` and continues with at least `min_rest` token characters only.
bool PrefixedToken(std::string_view s, std::string_view prefix, size_t min_rest) {
  if (s.substr(0, prefix.size()) != prefix || s.size() < prefix.size() + min_rest) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(prefix.size()), s.end(), TokenChar);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

bool IsSecretName(std::string_view name) {
  std::vector<std::string> words = Words(name);
  if (words.empty() || LocationWord(words.back())) return false;
  return std::any_of(words.begin(), words.end(), SecretWord);
}

bool LooksLikeToken(std::string_view value) {
  std::string_view v = Trim(value);
  struct Prefix {
    const char* text;
    size_t min_rest;
  };
  static const Prefix kPrefixes[] = {
      {"ghp_", 20}, {"gho_", 20}, {"ghu_", 20}, {"ghs_", 20}, {"ghr_", 20}, {"github_pat_", 20},
      {"glpat-", 16}, {"hf_", 30}, {"sk-", 20}, {"xoxb-", 10}, {"xoxp-", 10}, {"xoxa-", 10},
  };
  for (const Prefix& p : kPrefixes) {
    if (PrefixedToken(v, p.text, p.min_rest)) return true;
  }
  // AWS access key ids.
  if (v.size() == 20 && (v.substr(0, 4) == "AKIA" || v.substr(0, 4) == "ASIA") &&
      std::all_of(v.begin(), v.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)); })) {
    return true;
  }
  // An Authorization header's value.
  for (std::string_view scheme : {"Bearer ", "Basic ", "bearer ", "basic "}) {
    if (v.substr(0, scheme.size()) == scheme && v.size() > scheme.size() + 8) return true;
  }
  return false;
}

std::string Redactor::Placeholder(std::string_view secret) {
  auto it = placeholders_.find(secret);
  if (it != placeholders_.end()) return it->second;
  std::string p = "[REDACTED:" + std::to_string(placeholders_.size() + 1) + "]";
  placeholders_.emplace(std::string(secret), p);
  return p;
}

void Redactor::Note(const std::string& where, const std::string& name, const std::string& why, int32_t rank,
                    const std::string& placeholder) {
  auto key = std::make_pair(where, name);
  auto [it, inserted] = record_index_.try_emplace(key, records_.size());
  if (inserted) records_.push_back(Record{where, name, why, {}, {}});
  Record& r = records_[it->second];
  if (std::find(r.ranks.begin(), r.ranks.end(), rank) == r.ranks.end()) r.ranks.push_back(rank);
  if (std::find(r.placeholders.begin(), r.placeholders.end(), placeholder) == r.placeholders.end()) {
    r.placeholders.push_back(placeholder);
  }
}

std::string Redactor::RedactUrls(std::string_view value, bool* changed) {
  std::string out;
  size_t pos = 0;
  while (pos < value.size()) {
    size_t sep = value.find("://", pos);
    if (sep == std::string_view::npos) break;
    // The authority runs to the first character that cannot be in it.
    size_t start = sep + 3;
    size_t end = start;
    while (end < value.size() && std::string_view("/?#,; \t\n\"'<>").find(value[end]) == std::string_view::npos) ++end;
    std::string_view authority = value.substr(start, end - start);
    size_t at = authority.rfind('@');
    out.append(value.substr(pos, start - pos));
    if (at != std::string_view::npos && at > 0) {
      std::string_view userinfo = authority.substr(0, at);
      size_t colon = userinfo.find(':');
      if (colon != std::string_view::npos) {
        // user:password -> user:[REDACTED:N]
        std::string_view password = userinfo.substr(colon + 1);
        out.append(userinfo.substr(0, colon + 1));
        out.append(password.empty() ? std::string() : Placeholder(password));
        *changed = *changed || !password.empty();
      } else if (userinfo.size() >= 16 || LooksLikeToken(userinfo)) {
        // https://<token>@host
        out.append(Placeholder(userinfo));
        *changed = true;
      } else {
        out.append(userinfo);  // ssh://git@host: a user name, not a secret
      }
      out.append(authority.substr(at));
    } else {
      out.append(authority);
    }
    pos = end;
  }
  out.append(value.substr(pos));
  return out;
}

std::string Redactor::RedactValue(std::string_view name, std::string_view value, std::string* why) {
  why->clear();
  if (value.empty()) return std::string(value);
  if (IsSecretName(name)) {
    *why = "secret name";
    return Placeholder(value);
  }
  if (LooksLikeToken(value)) {
    *why = "token";
    return Placeholder(value);
  }
  bool changed = false;
  std::string out = RedactUrls(value, &changed);
  if (changed) *why = "credentials in URL";
  bool assigned = false;
  out = RedactAssignments(out, &assigned);
  if (assigned && why->empty()) *why = "secret assigned inside the value";
  return out;
}

std::string Redactor::RedactAssignments(std::string_view value, bool* changed) {
  constexpr std::string_view kSeparators = ";, \t\n\x1f";  // \x1f: between the words of REPLAY_COMMAND
  std::string out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t end = value.find_first_of(kSeparators, pos);
    if (end == std::string_view::npos) end = value.size();
    std::string_view piece = value.substr(pos, end - pos);
    size_t eq = piece.find('=');
    std::string_view name = eq == std::string_view::npos ? std::string_view() : piece.substr(0, eq);
    while (!name.empty() && name.front() == '-') name.remove_prefix(1);
    std::string_view secret = eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1);
    if (!name.empty() && !secret.empty() && std::all_of(name.begin(), name.end(), TokenChar) && IsSecretName(name) &&
        secret.substr(0, 10) != "[REDACTED:") {
      out.append(piece.substr(0, eq + 1));
      out.append(Placeholder(secret));
      *changed = true;
    } else {
      out.append(piece);
    }
    if (end < value.size()) out.push_back(value[end]);
    pos = end + 1;
  }
  return out;
}

std::vector<std::string> Redactor::RedactCommand(const std::vector<std::string>& argv, const std::string& where,
                                                 int32_t rank) {
  std::vector<std::string> out = argv;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string arg = out[i];
    std::string why;
    size_t eq = arg.find('=');
    size_t dashes = arg.find_first_not_of('-');
    if (dashes == std::string::npos) continue;
    std::string name = eq != std::string::npos && eq > dashes ? arg.substr(dashes, eq - dashes) : "";
    if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return TokenChar(c) || c == '.'; })) {
      // NAME=VALUE (an environment assignment, mpirun -x) or --option=value.
      std::string value = RedactValue(name, std::string_view(arg).substr(eq + 1), &why);
      if (!why.empty()) {
        out[i] = arg.substr(0, eq + 1) + value;
        Note(where, dashes > 0 ? arg.substr(0, eq) : name, why, rank, value);
      }
      continue;
    }
    if (dashes > 0 && i + 1 < out.size() && IsSecretName(arg.substr(dashes)) && !out[i + 1].empty() &&
        out[i + 1][0] != '-') {
      // --option value
      std::string value = Placeholder(out[i + 1]);
      out[i + 1] = value;
      Note(where, arg, "secret name", rank, value);
      ++i;
      continue;
    }
    std::string value = RedactValue("", arg, &why);
    if (!why.empty()) {
      out[i] = value;
      Note(where, "argv[" + std::to_string(i) + "]", why, rank, value);
    }
  }
  return out;
}

void Redactor::RedactHeader(RankHeader* header) {
  for (auto& [name, value] : header->environment) {
    std::string why;
    std::string redacted = RedactValue(name, value, &why);
    if (why.empty()) continue;
    value = redacted;
    Note("environment", name, why, header->rank, redacted);
  }
  header->command_line = RedactCommand(header->command_line, "command line", header->rank);
}

void Redactor::RedactManifest(JobManifest* manifest) {
  manifest->command = RedactCommand(manifest->command, "manifest command", -1);
}

nlohmann::json Redactor::RecordsJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Record& r : records_) {
    std::vector<int32_t> ranks = r.ranks;
    std::sort(ranks.begin(), ranks.end());
    nlohmann::json j = {{"where", r.where}, {"name", r.name}, {"why", r.why}, {"placeholders", r.placeholders}};
    if (!(ranks.size() == 1 && ranks[0] == -1)) j["ranks"] = ranks;
    list.push_back(std::move(j));
  }
  return list;
}

}  // namespace replay::bundle
