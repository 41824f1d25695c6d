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
// PASSWORD, PASSWD, KEY, APIKEY, CREDENTIAL(S), AUTH ... as a word of the name
// (HF_TOKEN, AWS_SECRET_ACCESS_KEY, db-password), not TOKENIZERS_PARALLELISM.
bool IsSecretName(std::string_view name);

// Whether a value looks like a credential whatever its name: well-known token
// formats (ghp_..., hf_..., sk-..., AKIA...) or an "Authorization: Bearer" value.
// Inside other values, credentials in URLs and NAME=VALUE pieces with a secret
// NAME are replaced too.
bool LooksLikeToken(std::string_view value);

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
  // Replaces the values of secret names in NAME=VALUE pieces of `value`
  // ("A=1;HF_TOKEN=x", as launchers pass environment lists on).
  std::string RedactAssignments(std::string_view value, bool* changed);
  void Note(const std::string& where, const std::string& name, const std::string& why, int32_t rank,
            const std::string& placeholder);

  std::map<std::string, std::string, std::less<>> placeholders_;  // secret -> placeholder
  std::vector<Record> records_;
  std::map<std::pair<std::string, std::string>, size_t> record_index_;
};

}  // namespace replay::bundle
