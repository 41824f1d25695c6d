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
      "TOKEN",      "TOKENS",     "SECRET",      "SECRETS",       "PASSWORD",   "PASSWORDS",
      "PASSWD",     "PASSPHRASE", "PASS",        "PASSCODE",      "PW",         "KEY",
      "APIKEY",     "ACCESSKEY",  "SECRETKEY",   "PRIVATEKEY",    "SIGNINGKEY", "CREDENTIAL",
      "CREDENTIALS", "CREDS",     "AUTH",        "AUTHORIZATION", "COOKIE",
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

bool Blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x1f'; }

bool IsPlaceholder(std::string_view v) { return v.substr(0, 10) == "[REDACTED:"; }

// Where the value of a word lies inside the quotes, brackets and punctuation
// around it: `"x"},` -> x.
std::pair<size_t, size_t> CoreOf(std::string_view w) {
  size_t b = 0;
  size_t e = w.size();
  while (b < e && std::string_view("\"'([{<`").find(w[b]) != std::string_view::npos) ++b;
  while (e > b && std::string_view("\"')]}>,;`").find(w[e - 1]) != std::string_view::npos) --e;
  return {b, e};
}

bool EqualsLower(std::string_view w, std::string_view lower) {
  if (w.size() != lower.size()) return false;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(w[i])) != lower[i]) return false;
  }
  return true;
}

// An authorization scheme, which the credential follows: "Bearer <token>".
bool IsScheme(std::string_view w) {
  for (std::string_view s : {"bearer", "basic", "digest", "token", "negotiate"}) {
    if (EqualsLower(w, s)) return true;
  }
  return false;
}

// A word naming a secret key or header whose value is the next word:
// `password:`, `"api_key":`, `Authorization:`.
bool IsSecretKeyWord(std::string_view w) {
  auto [b, e] = CoreOf(w);
  std::string_view core = w.substr(b, e - b);
  if (core.size() < 2 || core.back() != ':') return false;
  core.remove_suffix(1);
  while (!core.empty() && (core.back() == '"' || core.back() == '\'')) core.remove_suffix(1);
  return !core.empty() && std::all_of(core.begin(), core.end(), [](char c) { return TokenChar(c) || c == '.'; }) &&
         IsSecretName(core);
}

}  // namespace

bool IsSecretOption(std::string_view word) {
  size_t dashes = 0;
  while (dashes < word.size() && word[dashes] == '-') ++dashes;
  if (dashes == 0 || dashes > 2 || dashes == word.size()) return false;
  std::string_view name = word.substr(dashes);
  if (!std::all_of(name.begin(), name.end(), [](char c) { return TokenChar(c) || c == '.'; })) return false;
  if (dashes == 1 && name.size() == 1) return name == "p";
  return IsSecretName(name);
}

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
                    const std::string& redacted) {
  auto key = std::make_pair(where, name);
  auto [it, inserted] = record_index_.try_emplace(key, records_.size());
  if (inserted) records_.push_back(Record{where, name, why, {}, {}});
  Record& r = records_[it->second];
  if (std::find(r.ranks.begin(), r.ranks.end(), rank) == r.ranks.end()) r.ranks.push_back(rank);
  // The placeholders in the redacted text, never the text around them.
  for (size_t at = redacted.find("[REDACTED:"); at != std::string::npos; at = redacted.find("[REDACTED:", at + 1)) {
    size_t close = redacted.find(']', at);
    if (close == std::string::npos) break;
    std::string placeholder = redacted.substr(at, close + 1 - at);
    if (std::find(r.placeholders.begin(), r.placeholders.end(), placeholder) == r.placeholders.end()) {
      r.placeholders.push_back(placeholder);
    }
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
  return RedactText(value, why);
}

std::string Redactor::RedactWord(std::string_view word, std::string* why) {
  why->clear();
  auto [b, e] = CoreOf(word);
  std::string_view core = word.substr(b, e - b);
  if (!core.empty() && !IsPlaceholder(core) && LooksLikeToken(core)) {
    *why = "token";
    return std::string(word.substr(0, b)) + Placeholder(core) + std::string(word.substr(e));
  }
  bool changed = false;
  std::string out = RedactUrls(word, &changed);
  if (changed) *why = "credentials in URL";
  bool assigned = false;
  out = RedactPairs(out, &assigned);
  if (assigned && why->empty()) *why = "secret assigned inside the value";
  return out;
}

std::string Redactor::RedactPairs(std::string_view v, bool* changed) {
  constexpr std::string_view kValueEnd = ",;&}] \t\n\r\x1f\"'";
  std::string out;
  size_t copied = 0;
  for (size_t p = 0; p < v.size(); ++p) {
    if (v[p] != '=' && v[p] != ':') continue;
    // The key: name characters before the separator, inside optional quotes.
    size_t ke = p;
    if (ke > 0 && (v[ke - 1] == '"' || v[ke - 1] == '\'')) --ke;
    size_t kb = ke;
    while (kb > 0 && (TokenChar(v[kb - 1]) || v[kb - 1] == '.')) --kb;
    std::string_view key = v.substr(kb, ke - kb);
    while (!key.empty() && key.front() == '-') key.remove_prefix(1);
    if (key.empty() || !IsSecretName(key)) continue;
    size_t vb = p + 1;
    while (vb < v.size() && v[vb] == ' ') ++vb;
    char quote = 0;
    if (vb < v.size() && (v[vb] == '"' || v[vb] == '\'')) quote = v[vb++];
    size_t ve = vb;
    if (quote != 0) {
      while (ve < v.size() && v[ve] != quote) ve += (v[ve] == '\\' && ve + 1 < v.size()) ? 2 : 1;
      ve = std::min(ve, v.size());
    } else {
      while (ve < v.size() && kValueEnd.find(v[ve]) == std::string_view::npos) ++ve;
    }
    std::string_view secret = v.substr(vb, ve - vb);
    if (secret.empty() || IsPlaceholder(secret)) continue;
    out.append(v.substr(copied, vb - copied));
    out.append(Placeholder(secret));
    copied = ve;
    p = ve - 1;
    *changed = true;
  }
  out.append(v.substr(copied));
  return out;
}

void Redactor::RedactWords(std::vector<std::string>* words, std::vector<std::string>* whys,
                           std::vector<std::string>* names) {
  std::vector<std::string>& w = *words;
  whys->assign(w.size(), std::string());
  names->assign(w.size(), std::string());
  // Replaces word i whole (its value part, without the quotes around it).
  auto take = [&](size_t i, const std::string& name, const char* why) {
    auto [b, e] = CoreOf(w[i]);
    if (b >= e) b = 0, e = w[i].size();
    std::string_view core = std::string_view(w[i]).substr(b, e - b);
    if (IsPlaceholder(core)) return;
    w[i] = w[i].substr(0, b) + Placeholder(core) + w[i].substr(e);
    (*whys)[i] = why;
    (*names)[i] = name;
  };
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string word = w[i];
    const bool has_next = i + 1 < w.size() && !w[i + 1].empty();
    if (has_next && IsSecretOption(word) && w[i + 1][0] != '-') {
      take(++i, word, "secret name");  // --password X, -p X
      continue;
    }
    if (has_next && IsSecretKeyWord(word)) {
      // password: X, Authorization: Bearer X
      size_t v = i + 1;
      if (IsScheme(w[v]) && v + 1 < w.size() && !w[v + 1].empty()) ++v;
      auto [b, e] = CoreOf(word);
      std::string name = word.substr(b, e - b - 1);
      take(v, name, "secret name");
      i = v;
      continue;
    }
    if (has_next && EqualsLower(word, "bearer")) {
      take(++i, word, "token");
      continue;
    }
    std::string why;
    std::string out;
    if (std::any_of(word.begin(), word.end(), Blank)) {
      out = RedactText(word, &why);  // one argument holding many words
    } else {
      out = RedactWord(word, &why);
    }
    if (!why.empty()) {
      w[i] = std::move(out);
      (*whys)[i] = why;
    }
  }
}

std::string Redactor::RedactText(std::string_view text, std::string* why) {
  why->clear();
  // Words and the blanks between them, which stay as they are.
  std::vector<std::string> words;
  std::vector<std::string> gaps(1);
  for (size_t i = 0; i < text.size();) {
    if (Blank(text[i])) {
      gaps.back().push_back(text[i++]);
      continue;
    }
    size_t end = i;
    while (end < text.size() && !Blank(text[end])) ++end;
    words.emplace_back(text.substr(i, end - i));
    gaps.emplace_back();
    i = end;
  }
  std::vector<std::string> whys;
  std::vector<std::string> names;
  RedactWords(&words, &whys, &names);
  std::string out = gaps[0];
  for (size_t i = 0; i < words.size(); ++i) {
    out += words[i];
    out += gaps[i + 1];
    if (why->empty() && !whys[i].empty()) *why = whys[i] == "secret name" ? "secret option inside the value" : whys[i];
  }
  return out;
}

std::vector<std::string> Redactor::RedactCommand(const std::vector<std::string>& argv, const std::string& where,
                                                 int32_t rank) {
  std::vector<std::string> out = argv;
  std::vector<std::string> whys;
  std::vector<std::string> names;
  RedactWords(&out, &whys, &names);
  for (size_t i = 0; i < out.size(); ++i) {
    if (whys[i].empty()) continue;
    std::string name = names[i];
    if (name.empty()) {
      // NAME=VALUE (an environment assignment, mpirun -x) or --option=value.
      const std::string& arg = argv[i];
      size_t eq = arg.find('=');
      size_t dashes = arg.find_first_not_of('-');
      std::string_view bare = eq != std::string::npos && dashes < eq ? std::string_view(arg).substr(dashes, eq - dashes)
                                                                      : std::string_view();
      if (!bare.empty() && !LooksLikeToken(bare) &&
          std::all_of(bare.begin(), bare.end(), [](char c) { return TokenChar(c) || c == '.'; })) {
        name = arg.substr(0, eq);
      } else {
        name = "argv[" + std::to_string(i) + "]";
      }
    }
    Note(where, name, whys[i], rank, out[i]);
  }
  return out;
}

std::vector<std::string> RedactedCommand(const std::vector<std::string>& argv) {
  Redactor redactor;
  return redactor.RedactCommand(argv, "command", -1);
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
