// redact.h: taking secrets out of what a trace says about its job before it is
// shared (`replay bundle`).
//
// A trace stores the launcher, MPI, NCCL and similar environment variables and
// the command line of every rank. Some of those carry credentials: a token in
// HF_TOKEN, a password in a URL (https://user:pass@host), `--api-key X` on the
// command line. The Redactor replaces each such value with a placeholder,
// "[REDACTED:N]", numbered per distinct secret, so that equal values stay equal
// and different ones stay different across ranks (the configuration check still
// sees that two ranks disagree, without seeing either value), and it keeps a
// record of what it replaced and where.
//
// What counts as a secret is a heuristic, written down in redact.cpp beside the
// word lists; it errs towards redacting.
//
// Not thread-safe: one Redactor per bundle.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "replay/trace_header.h"
#include "util/json.h"

namespace replay::bundle {

// Whether a variable or option name says its value is a secret: TOKEN, SECRET,
// PASSWORD, PASSWD, PASS, PW, KEY, APIKEY, CREDENTIAL(S), AUTH ... as a word of
// the name (HF_TOKEN, AWS_SECRET_ACCESS_KEY, db-pass), not TOKENIZERS_PARALLELISM.
bool IsSecretName(std::string_view name);

// Whether a command-line word is an option whose next word is a secret:
// `--password`, `--api-key`, `--db-pass`, and the short `-p` (as mysql and
// sshpass take a password).
bool IsSecretOption(std::string_view word);

// Whether a value looks like a credential whatever its name: well-known token
// formats (ghp_..., hf_..., sk-..., AKIA...) or an "Authorization: Bearer" value.
// Inside other values, credentials in URLs and NAME=VALUE pieces with a secret
// NAME are replaced too.
bool LooksLikeToken(std::string_view value);

// A command line as shown where it may be shared (`replay report`, `info`):
// its secrets replaced, each distinct one by its own placeholder.
std::vector<std::string> RedactedCommand(const std::vector<std::string>& argv);

class Redactor {
 public:
  // What was replaced: one entry per (where, name), with the ranks it was seen on.
  struct Record {
    std::string where;        // "environment", "command line", "manifest command"
    std::string name;         // variable, option or argument position ("argv[3]")
    std::string why;          // "secret name", "credentials in URL", "token"
    std::vector<int32_t> ranks;  // -1 for the manifest
    std::vector<std::string> placeholders;
  };

  // Replaces secrets in a rank header's environment and command line.
  void RedactHeader(RankHeader* header);
  // Replaces secrets in the manifest's command line.
  void RedactManifest(JobManifest* manifest);

  // `value` of variable `name` with secrets replaced; `*why` says why when it changed.
  std::string RedactValue(std::string_view name, std::string_view value, std::string* why);
  // Free text with secrets replaced: words separated by blanks (a command line
  // kept as one string, as OMPI_ARGV or REPLAY_COMMAND keep it; a header line;
  // JSON or YAML configuration passed as an argument). Replaces the word after
  // a secret option (`--token X`, `-p X`), after a secret key or header name
  // (`password: X`, `Authorization: Bearer X`), after `Bearer`, and inside
  // words: tokens, passwords in URLs, secret keys assigned with = or :
  // (`HF_TOKEN=X`, `{"api_key":"X"}`, `?access_token=X&`).
  std::string RedactText(std::string_view text, std::string* why);
  // A command line with secrets replaced; records under `where` for `rank`.
  std::vector<std::string> RedactCommand(const std::vector<std::string>& argv, const std::string& where,
                                         int32_t rank);

  // Distinct secrets replaced so far.
  size_t secrets() const { return placeholders_.size(); }
  const std::vector<Record>& records() const { return records_; }
  // The records as the bundle header lists them.
  nlohmann::json RecordsJson() const;

 private:
  std::string Placeholder(std::string_view secret);
  // Replaces user:password@ in every URL of `value`.
  std::string RedactUrls(std::string_view value, bool* changed);
  // Replaces the values of secret keys assigned inside `value`: NAME=VALUE
  // pieces ("A=1;HF_TOKEN=x", as launchers pass environment lists on),
  // --option=value, "key": "value" and key: value.
  std::string RedactPairs(std::string_view value, bool* changed);
  // What one word holds: a token, a URL with a password, secret pairs.
  std::string RedactWord(std::string_view word, std::string* why);
  // Redacts a list of words (a command line's arguments, or the words of free
  // text): `whys[i]` says why word i changed, `names[i]` names the option or
  // key it is the value of, when it is one.
  void RedactWords(std::vector<std::string>* words, std::vector<std::string>* whys, std::vector<std::string>* names);
  // Records that `name` under `where` was redacted to `redacted` (the
  // placeholders in it are listed).
  void Note(const std::string& where, const std::string& name, const std::string& why, int32_t rank,
            const std::string& redacted);

  std::map<std::string, std::string, std::less<>> placeholders_;  // secret -> placeholder
  std::vector<Record> records_;
  std::map<std::pair<std::string, std::string>, size_t> record_index_;
};

}  // namespace replay::bundle
