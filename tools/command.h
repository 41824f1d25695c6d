// command.h: how a subcommand plugs into the `replay` command line.
//
// Each subcommand lives in one file, tools/cmd_<name>.cpp, with its help text
// beside its code, and exposes one Add<Name>Command function. main.cpp lists
// them all in one table. Exit codes are the same for every command.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "replay/status.h"

namespace replay::cli {

inline constexpr int kExitOk = 0;        // success; for check/diff: nothing found
inline constexpr int kExitFindings = 1;  // check/diff found something
inline constexpr int kExitBadInput = 2;  // bad arguments or an unreadable trace

// Adds the subcommand to `app`. When it runs, it stores its exit code in `*exit_code`.
using AddCommandFn = void (*)(CLI::App& app, int* exit_code);

struct CommandEntry {
  const char* name;
  AddCommandFn add;
};

// Adds subcommand `name` with its one-line `summary` and the `help` shown
// below its options. Its options fill one Options, kept alive by the
// subcommand's callback; when the subcommand is chosen, `run(options)` gives
// `*exit_code`. Returns the subcommand, to add its options to, and that
// Options.
template <typename Options, typename Run>
std::pair<CLI::App*, Options*> AddCommand(CLI::App& app, const char* name, const char* summary, const char* help,
                                          int* exit_code, Run run) {
  CLI::App* cmd = app.add_subcommand(name, summary);
  cmd->footer(help);
  auto opt = std::make_shared<Options>();
  cmd->callback([opt, exit_code, run] { *exit_code = run(*opt); });
  return {cmd, opt.get()};
}

// Prints "replay <command>: <message>" on stderr (just "replay: " for an empty
// command) and returns kExitBadInput.
int Fail(const std::string& command, const Status& status);
int Fail(const std::string& command, const std::string& message);

// Accepts a number of at least `min`; otherwise the message reads
// "--timeout 0: 0 is not <unit> of 1 or more" ("seconds", "a count").
CLI::Validator AtLeast(double min, const std::string& unit);
// Accepts a number above 0: "--timeout 0: 0 is not a positive number of seconds"
// for unit "a number of seconds".
CLI::Validator Positive(const std::string& unit);

}  // namespace replay::cli
