// replay bundle DIR -o FILE: a whole trace as one file to attach to a bug report.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "replay/bundle.h"
#include "replay/event_format.h"
#include "term.h"
#include "trace_input.h"
#include "util/json.h"

namespace replay::cli {
namespace {

constexpr const char* kHelp = R"(Pack a trace into one file that explains itself: every rank (or those of
--ranks), the manifest, and in front a JSON header with the result of
`replay check`, versions, hosts and their ranks, sizes, and what was redacted.

Environment values and command-line arguments that look like secrets (names
with TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH...; well-known token
formats; passwords in URLs such as https://user:pass@host) are replaced by
[REDACTED:N] placeholders, equal secrets by equal placeholders, and listed in
the header. --no-redact keeps them (the file is then readable by you only).

Every command that takes a trace directory also takes a bundle:
  replay check job.rpb    replay info job.rpb    replay report job.rpb
The layout of the file is in docs/bundle.md.

Exit status: 0 written, 2 the trace could not be read or the file not written.)";

struct Options {
  std::string dir;
  std::string out;
  bool no_payloads = false;
  bool no_redact = false;
  bool json = false;
  std::string ranks;
};

std::string Name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  std::string name = std::filesystem::path(p).filename().string();
  return name.empty() ? p : name;
}

int Run(const Options& opt) {
  const auto start = std::chrono::steady_clock::now();
  BundleOptions bo;
  bo.redact = !opt.no_redact;
  bo.payloads = !opt.no_payloads;
  bo.source_name = Name(opt.dir);
  if (!opt.ranks.empty()) {
    auto ranks = ParseRankList(opt.ranks);
    if (!ranks.ok()) return Fail("bundle", ranks.status());
    bo.ranks = *ranks;
  }
  auto dir = ResolveTraceDir(opt.dir);
  if (!dir.ok()) return Fail("bundle", dir.status());
  Progress progress("bundling", 0);
  bo.progress = [&](const std::string& what, uint64_t done, uint64_t total) {
    progress.Update(what, done, total, what == "packing");
  };
  auto summary = WriteBundle(*dir, opt.out, bo);
  if (!summary.ok()) return Fail("bundle", summary.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const BundleSummary& s = *summary;
  const nlohmann::json header = ParseJsonObject(s.header);
  if (opt.json) {
    nlohmann::json j = {{"path", s.path},         {"bytes", s.bytes},       {"trace_bytes", s.trace_bytes},
                        {"files", s.files},       {"ranks", s.ranks},       {"redacted", s.redacted},
                        {"findings", s.findings}, {"seconds", seconds},     {"payloads", bo.payloads},
                        {"redaction", header.value("redaction", nlohmann::json::object())}};
    std::printf("%s\n", JsonText(j, 2).c_str());
    return kExitOk;
  }
  std::printf("%s %s: %llu rank%s, %llu files, %s (%s of trace) in %.1f s\n", Paint(Color::kBold, "replay bundle").c_str(),
              s.path.c_str(), static_cast<unsigned long long>(s.ranks), s.ranks == 1 ? "" : "s",
              static_cast<unsigned long long>(s.files),
              HumanBytes(s.bytes).c_str(), HumanBytes(s.trace_bytes).c_str(), seconds);
  if (!bo.payloads) std::printf("  received bytes left out (--no-payloads)\n");
  if (!bo.redact) {
    std::printf("  %s\n", Paint(Color::kYellow, "not redacted (--no-redact): it may hold secrets; do not share it").c_str());
  } else if (s.redacted == 0) {
    std::printf("  redacted: nothing looked like a secret\n");
  } else {
    std::printf("  redacted %llu secret value%s:\n", static_cast<unsigned long long>(s.redacted), s.redacted == 1 ? "" : "s");
    for (const auto& item : header["redaction"]["items"]) {
      std::printf("    %s %s (%s)\n", item.value("where", "").c_str(), item.value("name", "").c_str(),
                  item.value("why", "").c_str());
    }
  }
  auto check = header.find("check");
  if (check != header.end() && check->contains("error")) {
    std::printf("  check: could not run: %s\n", (*check)["error"].get<std::string>().c_str());
  } else if (check != header.end()) {
    std::printf("  check: %s\n", s.findings == 0 ? "no findings"
                                                 : (std::to_string(s.findings) + (s.findings == 1 ? " finding" : " findings") +
                                                    " (replay check " + s.path + ")").c_str());
  }
  return kExitOk;
}

}  // namespace

void AddBundleCommand(CLI::App& app, int* exit_code) {
  auto [cmd, opt] = AddCommand<Options>(
      app, "bundle", "Pack a trace into one file to attach to a bug report (secrets redacted)", kHelp, exit_code, Run);
  AddTraceArgument(cmd, &opt->dir);
  cmd->add_option("-o,--output", opt->out, "The bundle file to write (e.g. job.rpb)")->required();
  cmd->add_flag("--no-payloads", opt->no_payloads, "Leave out the received bytes (level data)");
  cmd->add_option("--ranks", opt->ranks, "Only these world ranks, e.g. 0,2,5-7");
  cmd->add_flag("--no-redact", opt->no_redact, "Keep values that look like secrets");
  cmd->add_flag("--json", opt->json, "Print what was written as JSON");
}

}  // namespace replay::cli
