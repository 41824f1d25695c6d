// ShrinkReadme (replay/shrink.h): what a reduced job shows, what was taken
// out of the recording, and what of the recorded job a maintainer needs.
#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "replay/shrink.h"
#include "util/clock.h"

namespace replay {
namespace {

std::string Join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// Environment variables that change how the libraries communicate, not those
// a launcher sets for its own bookkeeping.
bool Matters(const std::string& key) {
  static const char* const kPrefixes[] = {"NCCL_", "UCX_", "FI_", "I_MPI_", "MV2_", "TORCH_NCCL_", "CUDA_",
                                          "OMPI_MCA_"};
  static const char* const kBookkeeping[] = {
      "OMPI_MCA_orte_",  "OMPI_MCA_ess_",  "OMPI_MCA_pmix",  "OMPI_MCA_mca_base_env_list", "OMPI_MCA_initial_wdir",
      "OMPI_MCA_shmem_RUNTIME", "OMPI_MCA_ompi_", "OMPI_MCA_opal_", "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_rmaps_"};
  bool match = false;
  for (const char* p : kPrefixes) match = match || key.rfind(p, 0) == 0;
  for (const char* p : kBookkeeping) match = match && key.rfind(p, 0) != 0;
  return match;
}

}  // namespace

std::string ShrinkReadme(const ShrinkResult& r, const TraceReader& recorded, const TraceReader& reduced) {
  std::ostringstream o;
  const std::string title = r.reduced.title.empty() ? r.target.title : r.reduced.title;
  o << "# " << title << "\n\n";
  o << "`replay shrink` reduced a recorded job that fails with\n\n"
    << "> **" << FindingKindName(r.target.kind) << "** " << r.target.title << "\n\n"
    << "to the smallest job it found that, re-issued without the application (`replay drive`), still fails "
       "the same way (the same kind of finding, call and communicator; for a hang the same ranks waiting in "
       "the same calls). Checked as it is in this directory:\n\n"
    << "> **" << FindingKindName(r.reduced.kind) << "** " << r.reduced.title << "\n\n";
  for (const std::string& d : r.reduced.details) o << ">     " << d << "\n";
  if (!r.reduced.details.empty()) o << "\n";

  o << "| | recorded | reduced |\n|---|---|---|\n"
    << "| ranks | " << r.before.ranks << " | " << r.after.ranks << " |\n"
    << "| calls, besides MPI_Init and MPI_Finalize | " << r.before.operations << " | " << r.after.operations << " |\n"
    << "| calls of the busiest rank | " << r.before.max_rank_operations << " | " << r.after.max_rank_operations
    << " |\n"
    << "| communicators created | " << r.before.communicators << " | " << r.after.communicators << " |\n\n";
  o << "Rank " << (r.origin.size() == 1 ? "0 here is rank " : "0, 1, ... here are ranks ") << Join(r.origin)
    << " of the recording.\n\n";

  o << "## What was removed\n\n";
  if (r.after.ranks < r.before.ranks) {
    std::vector<int32_t> gone;
    std::set<int32_t> kept(r.origin.begin(), r.origin.end());
    for (int32_t k = 0; k < static_cast<int32_t>(r.before.ranks); ++k) {
      if (kept.count(k) == 0) gone.push_back(k);
    }
    o << "- Ranks " << Join(gone) << ": every communicator was rebuilt over the ranks that remain (members, "
      << "sizes, the ranks in it, peers, roots and per-rank counts renumbered).\n";
  }
  if (r.tail_units > 0) {
    o << "- Everything before the job's last " << r.tail_units
      << " collectives and messages (communicators' creations aside): the search started from the end of "
         "the job, which still failed the same way.\n";
  }
  if (r.iterations_found >= 2) {
    o << "- " << (r.tail_units > 0 ? "What was kept" : "The recording's loop") << " repeats its calls "
      << r.iterations_found << " times; whole iterations were removed first, then single calls.\n";
  }
  if (r.after.operations < r.before.operations) {
    o << "- " << r.before.operations - r.after.operations
      << " calls (a collective on all its members, a message at both ends, a communicator with everything "
         "on it), with their waits.\n";
  }
  if (r.scaled_units > 0) {
    o << "- Counts: " << r.scaled_units
      << " collectives and messages carry smaller counts (every count of one divided by what they all share, "
         "so counts that differed still differ in the same ratio).\n";
  }
  o << "- Data: the bytes are synthetic; the recorded values were not needed (fingerprints and received "
       "bytes are not kept).\n";
  if (r.budget_exhausted) {
    o << "\nThe search stopped at its budget (`--budget`); a smaller job may exist.\n";
  }
  o << "\n" << r.candidates << " candidate jobs were written and checked, " << r.drives << " of them driven.\n\n";

  o << "## Running it\n\n"
    << "`repro.c` makes the calls of the reduced job, rank by rank, with no dependency on replay:\n\n"
    << "```sh\n" << ReproCommands(reduced, &r.reduced) << "\n```\n\n"
    << "(as root, Open MPI also wants `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`, and "
       "`--oversubscribe` past the cores of the machine.)\n\n"
    << "This directory is also the reduced job's trace, which every `replay` command reads:\n\n"
    << "```sh\n"
    << "replay check .                      # the finding above\n"
    << "replay drive . --timeout 10         # re-issue it\n"
    << "replay record -o t -- mpirun -np " << r.after.ranks << " ./repro && replay check t\n"
    << "replay bundle . -o repro.rpb        # to attach to an issue\n"
    << "```\n\n";

  o << "## The recorded job\n\n";
  if (recorded.manifest()) {
    const JobManifest& m = *recorded.manifest();
    std::string cmd;
    for (const std::string& a : m.command) cmd += (cmd.empty() ? "" : " ") + a;
    const std::string when = FormatUtc(m.created_realtime_ns, "%Y-%m-%d %H:%M UTC");
    o << "- Command: `" << cmd << "`\n";
    o << "- Recorded " << (when.empty() ? "" : when + " ") << "on " << m.host << ", level "
      << LevelName(m.level) << ", " << m.world_size << " ranks\n";
  }
  // Versions and settings, as rank 0 recorded them; those that differ across
  // ranks are `replay check`'s config finding.
  if (!recorded.ranks().empty()) {
    const RankHeader& h = recorded.ranks().front().header;
    if (!h.versions.empty()) {
      o << "- Versions:";
      for (size_t i = 0; i < h.versions.size(); ++i) {
        o << (i ? "," : "") << " " << h.versions[i].first << " `" << h.versions[i].second << "`";
      }
      o << "\n";
    }
    std::vector<std::string> settings;
    for (const auto& [k, v] : h.environment) {
      if (Matters(k)) settings.push_back("`" + k + "=" + v + "`");
    }
    std::sort(settings.begin(), settings.end());
    if (settings.empty()) {
      o << "- Settings: no NCCL, UCX, CUDA or MPI tuning variables were set\n";
    } else {
      o << "- Settings:";
      for (size_t i = 0; i < settings.size(); ++i) o << (i ? "," : "") << " " << settings[i];
      o << "\n";
    }
    if (!h.host.empty()) o << "- Host of rank 0: " << h.host << ", " << h.cores << " cores\n";
  }
  return o.str();
}

}  // namespace replay
