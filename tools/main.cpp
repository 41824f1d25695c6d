// replay: the command line. One file per subcommand (cmd_<name>.cpp); the table
// below is the only list of them.
#include <cstdio>

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
    {"bundle", AddBundleCommand},
    {"report", AddReportCommand},
    {"export", AddExportCommand},
};

}  // namespace

int Fail(const std::string& command, const Status& status) { return Fail(command, status.message()); }

int Fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "replay %s: %s\n", command.c_str(), message.c_str());
  return kExitBadInput;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  return exit_code;
}

}  // namespace replay::cli

int main(int argc, char** argv) { return replay::cli::Main(argc, argv); }
