// program_identity.h: which program a process runs, as a re-run recognises it.
//
// A recorded rank's header keeps the program it ran: the executable the
// kernel started (symlinks resolved: /usr/bin/python3 runs python3.11), its
// GNU build id, and the argument vector. `replay rerun` starts a command that
// may reach the program through a launcher, a shell, `env`, a wrapper script
// that execs it or a virtualenv's python; every process of it loads the
// preload, and only the one that runs the recorded program is served. A
// process runs it when its executable is the recorded one (same build id, or
// the same file name: a rebuilt program keeps its name) and its arguments after
// argv[0] are the recorded ones, or those the user gave `replay rerun`.
//
// Thread safety: plain values and pure functions; ThisProcess reads /proc and
// the loaded program headers, and may be called before any constructor of
// the preload has run (it uses no global state).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace replay {

struct ProgramIdentity {
  std::string executable;  // resolved path of the executable; empty if not known
  std::string build_id;    // GNU build id in lowercase hex; empty if it has none
  std::vector<std::string> argv;

  // "/usr/bin/python3.11 (build id 1a2b…) run as `python3 train.py`"
  std::string Describe() const;
};

// The program this process runs.
ProgramIdentity ThisProcess();
// The resolved path of this process's executable, and its build id.
std::string ExecutablePath();
std::string ExecutableBuildId();

// Whether `process` runs the program `recorded` describes. `given_args` are
// the arguments (after argv[0]) of the command the user asked to run, which
// may differ from the recorded ones on purpose. A recording without an
// executable (an older trace) is recognised by the file name of argv[0].
bool RunsRecordedProgram(const ProgramIdentity& process, const ProgramIdentity& recorded,
                         const std::vector<std::string>& given_args);

// Why `process` is not the recorded program, for a report ("another
// executable", "other arguments").
std::string WhyNotRecordedProgram(const ProgramIdentity& process, const ProgramIdentity& recorded,
                                  const std::vector<std::string>& given_args);

// Identities as one environment value and back (fields and arguments are
// separated by control characters no argument of a real command holds).
std::string EncodeIdentities(const std::vector<ProgramIdentity>& identities);
std::vector<ProgramIdentity> DecodeIdentities(std::string_view text);
std::string EncodeArgs(const std::vector<std::string>& args);
std::vector<std::string> DecodeArgs(std::string_view text);

}  // namespace replay
