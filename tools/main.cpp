// replay: the command line. One file per subcommand (cmd_<name>.cpp); the table
// below is the only list of them.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "command.h"
#include "replay/version.h"

namespace replay::cli {

void AddInfoCommand(CLI::App& app, int* exit_code);
void AddDumpCommand(CLI::App& app, int* exit_code);
void AddRecordCommand(CLI::App& app, int* exit_code);
void AddCheckCommand(CLI::App& app, int* exit_code);
void AddDiffCommand(CLI::App& app, int* exit_code);
void AddRerunCommand(CLI::App& app, int* exit_code);
void AddDriveCommand(CLI::App& app, int* exit_code);
void AddShrinkCommand(CLI::App& app, int* exit_code);
void AddBundleCommand(CLI::App& app, int* exit_code);
void AddReportCommand(CLI::App& app, int* exit_code);
void AddExportCommand(CLI::App& app, int* exit_code);

namespace {

constexpr CommandEntry kCommands[] = {
    {"record", AddRecordCommand},
    {"info", AddInfoCommand},
    {"dump", AddDumpCommand},
    {"check", AddCheckCommand},
    {"diff", AddDiffCommand},
    {"rerun", AddRerunCommand},
    {"drive", AddDriveCommand},
    {"shrink", AddShrinkCommand},
    {"bundle", AddBundleCommand},
    {"report", AddReportCommand},
    {"export", AddExportCommand},
};

}  // namespace

int Fail(const std::string& command, const Status& status) { return Fail(command, status.message()); }

int Fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "replay%s%s: %s\n", command.empty() ? "" : " ", command.c_str(), message.c_str());
  return kExitBadInput;
}

namespace {

// Whether `word` names a subcommand.
bool IsCommand(const char* word) {
  for (const CommandEntry& c : kCommands) {
    if (std::strcmp(word, c.name) == 0) return true;
  }
  return false;
}

std::string CommandNames() {
  std::string names;
  for (const CommandEntry& c : kCommands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

}  // namespace

namespace {

// A validator accepting a finite number that `ok` likes; else "VALUE is not <what>".
CLI::Validator NumberValidator(std::function<bool(double)> ok, std::string what) {
  return CLI::Validator(
      [ok = std::move(ok), what = std::move(what)](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(value.c_str(), &end);
        bool number = !value.empty() && end != nullptr && *end == '\0' && errno == 0 && std::isfinite(v);
        return number && ok(v) ? "" : value + " is not " + what;
      },
      "");
}

// For a command that runs COMMAND (given after `--`): the first option before
// the `--` that the command does not know, or "". CLI11 would take it, and
// the words after it, for COMMAND's, and then complain about the command.
std::string UnknownOptionBeforeCommand(const CLI::App& sub, int argc, char** argv) {
  if (sub.get_option_no_throw("COMMAND") == nullptr) return "";
  for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    std::string word = argv[i];
    if (word.size() < 2 || word[0] != '-') continue;
    char* end = nullptr;
    (void)std::strtod(word.c_str(), &end);
    if (end != nullptr && *end == '\0') continue;  // a negative number is an option's value
    std::string name = word.substr(0, word.find('='));
    if (sub.get_option_no_throw(name) == nullptr && name != "-h" && name != "--help") return name;
  }
  return "";
}

}  // namespace

CLI::Validator AtLeast(double min, const std::string& unit) {
  char bound[32];
  std::snprintf(bound, sizeof(bound), "%g", min);
  return NumberValidator([min](double v) { return v >= min; }, unit + " of " + bound + " or more");
}

CLI::Validator Positive(const std::string& unit) {
  return NumberValidator([](double v) { return v > 0; }, "a positive " + unit.substr(unit.find(' ') + 1));
}

int Main(int argc, char** argv) {
  CLI::App app{"replay: record, check and replay distributed training jobs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine());
  app.footer(
      "Exit status: 0 success (check/diff: nothing found), 1 check/diff found something,\n"
      "2 bad arguments or unreadable input. `replay COMMAND --help` for each command.");
  int exit_code = kExitOk;
  for (const CommandEntry& c : kCommands) c.add(app, &exit_code);
  if (argc > 1 && argv[1][0] != '-' && !IsCommand(argv[1])) {
    return Fail("", std::string(argv[1]) + " is not a command; the commands are " + CommandNames() +
                        " (`replay --help`)");
  }
  if (argc > 2 && IsCommand(argv[1])) {
    if (std::string unknown = UnknownOptionBeforeCommand(*app.get_subcommand(argv[1]), argc, argv); !unknown.empty()) {
      return Fail(argv[1], unknown + " is not an option of replay " + argv[1] + "; the command to run goes after -- (`replay " +
                               argv[1] + " --help`)");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, as for every other error: what is wrong and where to look.
    const std::string sub = argc > 1 && IsCommand(argv[1]) ? argv[1] : "";
    std::string what = e.what();
    if (sub.empty() && what == "A subcommand is required") what = "a command is required: one of " + CommandNames();
    return Fail(sub, what + " (`replay " + (sub.empty() ? "" : sub + " ") + "--help`)");
  }
  return exit_code;
}

}  // namespace replay::cli

int main(int argc, char** argv) { return replay::cli::Main(argc, argv); }
