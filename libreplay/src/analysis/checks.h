// checks.h: the individual checks of `replay check`, over a job that has been
// read: the rank digests, the communicator lineage, the collective index and
// the point-to-point ledger.
//
// Each check appends findings with a ranking key; CheckTrace (check.cpp) sorts
// them and assembles the report. The checks only read the JobView and may run
// in any order, from one thread (the symbol resolver is the only shared
// cache); CheckEndings last, for it reads what the others found.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/call_site.h"
#include "analysis/collective_index.h"
#include "analysis/comm_lineage.h"
#include "analysis/p2p_ledger.h"
#include "analysis/rank_digest.h"
#include "replay/check.h"
#include "util/json.h"

namespace replay::analysis {

// Everything the checks know about one job.
struct JobView {
  CheckOptions options;
  bool live = false;
  int64_t now_realtime_ns = 0;     // live: when the check started
  int64_t end_realtime_ns = 0;     // the latest event of any rank
  int64_t start_realtime_ns = 0;   // the earliest
  int32_t world_size = -1;
  std::vector<RankDigest> digests;                  // readable ranks, by rank
  std::unordered_map<int32_t, size_t> by_rank;      // world rank -> digests index
  std::vector<int32_t> untraced;                    // ranks of the job with no readable trace
  // Ranks whose trace lacks some of their calls: their recording stopped on
  // an error (a full disk) while they ran on, or events were dropped or lost
  // to damage. A collective or message they do not show may be in what is
  // lacking, so nothing is judged missing from them.
  std::vector<int32_t> incomplete;
  CommLineage lineage;
  CollectiveIndex collectives;
  P2pLedger p2p;
  std::unordered_map<uint64_t, uint32_t> transitions;  // job-wide counts (see RankDigest)
  mutable SymbolResolver symbols;

  const RankDigest* Rank(int32_t rank) const;
};

// A collective's summary with its rank sets rebuilt: who entered it, and the
// ranks of every signature, output and predecessor group (collective_index.h
// says why the index does not keep them). Costs a pass over the ranks; done
// only for collectives that are reported.
struct Expanded {
  RankSet entered;
  std::vector<SigGroup> sigs;   // with ranks and API names
  std::vector<OutGroup> outs;
  std::vector<PredClaim> preds;
};
Expanded Expand(const JobView& job, const CollKey& key, const CollSummary& s);

// A finding as the checks build it: its kind-specific facts as a JSON value,
// printed into Finding::data when the report is assembled.
struct Draft : Finding {
  nlohmann::json facts = nlohmann::json::object();
};

// Findings ordered by kind, then by `score` (higher first), then by time.
struct RankedFinding {
  Draft finding;
  double score = 0;
  int64_t time = 0;
};

// Describing ranks and calls, shared by the checks.
class Narrator {
 public:
  explicit Narrator(const JobView& job) : job_(job) {}

  // "MPI_Allreduce on dup(WORLD) #3", "MPI_Recv from rank 2 (tag 7) on WORLD".
  std::string Call(const OpenCall& call, const RankDigest& d) const;
  nlohmann::json CallJson(const OpenCall& call, const RankDigest& d, bool returned) const;
  // What the rank was doing when its trace ends, in a phrase.
  std::string Doing(int32_t rank) const;
  nlohmann::json DoingJson(int32_t rank) const;
  CommRef Comm(uint64_t id) const;
  CallSite Site(int32_t rank, uint64_t address) const;
  // How long a call entered at rank-relative `enter_ns` stayed in progress:
  // until now (live), until the rank closed its trace or died of a signal;
  // -1 when the trace does not say (a process killed without a trace of it).
  int64_t Waited(const RankDigest& d, int64_t enter_ns) const;
  // "for 4.1 s", or "since 0.347 s into its run" when Waited does not know.
  std::string WaitPhrase(const RankDigest& d, int64_t enter_ns) const;
  // How many of the rank's last calls followed one another in an order no
  // other point of the job saw: evidence that this rank's control flow went
  // its own way just before the end.
  int Deviation(int32_t rank) const;

 private:
  const JobView& job_;
};

void CheckCollectives(const JobView& job, std::vector<RankedFinding>* out);
void CheckGraphLaunches(const JobView& job, std::vector<RankedFinding>* out);
void CheckOrder(const JobView& job, std::vector<RankedFinding>* out);
void CheckPointToPoint(const JobView& job, std::vector<RankedFinding>* out);
void CheckErrors(const JobView& job, std::vector<RankedFinding>* out);
void CheckNanInf(const JobView& job, std::vector<RankedFinding>* out);
void CheckDevices(const JobView& job, std::vector<RankedFinding>* out);
void CheckConfig(const JobView& job, std::vector<RankedFinding>* out);
void CheckStragglers(const JobView& job, std::vector<RankedFinding>* out);
// Ranks stopped from outside (a signal the program does not raise itself, or
// none recorded) that no finding in `found` names: run after the other checks.
void CheckEndings(const JobView& job, const std::vector<RankedFinding>& found, std::vector<RankedFinding>* out);

// "complete", "salvaged", "running", "failed": a rank's status in reports.
std::string StatusWord(RankStatus status);

// Whether an environment variable is expected to differ from rank to rank
// (its rank, pid, per-process paths) and so says nothing about configuration.
bool IsPerRankSetting(const std::string& key);

}  // namespace replay::analysis
