#include "shrink/finding_key.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace replay::shrink {
namespace {

// "rank M never entered MPI_Allreduce on dup(WORLD), which STUCK are blocked
// in", M itself blocked in `missing_in` on WORLD.
Finding Missing(int32_t missing, std::vector<int32_t> stuck, const std::string& comm = "dup(WORLD)",
                const std::string& missing_in = "MPI_Allreduce") {
  Finding f;
  f.kind = FindingKind::kMissingRanks;
  f.op = "MPI_Allreduce";
  f.comm = CommRef{1, comm, {}};
  f.ranks = {missing};
  nlohmann::json data;
  data["stuck"] = stuck;
  data["missing"] = nlohmann::json::array(
      {{{"rank", missing}, {"blocked_in", {{"api", missing_in}, {"comm_name", "WORLD"}}}}});
  f.data = data.dump();
  return f;
}

// The program calling MPI_Abort, and NCCL returning an error.
Finding Abort() {
  Finding f;
  f.kind = FindingKind::kError;
  f.data = nlohmann::json{{"source", "mpi"}, {"code", 1}, {"abort", true}}.dump();
  return f;
}
Finding NcclError() {
  Finding f;
  f.kind = FindingKind::kError;
  f.data = nlohmann::json{{"source", "nccl"}, {"code", 5}}.dump();
  return f;
}

Finding Mismatch(int32_t odd, const std::string& field = "count") {
  Finding f;
  f.kind = FindingKind::kMismatch;
  f.op = "MPI_Allreduce";
  f.comm = CommRef{1, "dup(WORLD)", {}};
  f.ranks = {odd};
  f.data = nlohmann::json{{"field", field}, {"stuck", {0}}}.dump();
  return f;
}

TEST_CASE("communicator names lose their disambiguating sequence numbers", "[shrink]") {
  CHECK(PlainCommName("split(nccl, color=0)@1") == "split(nccl, color=0)");
  CHECK(PlainCommName("split(dup(WORLD)@3, color=1)@5") == "split(dup(WORLD), color=1)");
  CHECK(PlainCommName("WORLD") == "WORLD");
  CHECK(PlainCommName("a@b") == "a@b");
}

TEST_CASE("calls compare by what they do across MPI and NCCL", "[shrink]") {
  CHECK(OperationOf("MPI_Allreduce") == "allreduce");
  CHECK(OperationOf("MPI_Iallreduce") == "allreduce");
  CHECK(OperationOf("ncclAllReduce") == "allreduce");
  CHECK(OperationOf("ncclBroadcast") == OperationOf("MPI_Ibcast"));
  CHECK(OperationOf("ncclReduceScatter") == OperationOf("MPI_Reduce_scatter_block"));
  CHECK(OperationOf("MPI_Issend") == OperationOf("ncclSend"));
  CHECK(OperationOf("MPI_Init") == "init");
}

TEST_CASE("a finding's ranks are mapped back to the recording's", "[shrink]") {
  FindingKey k = KeyOf(Missing(1, {0}), {2, 5});
  CHECK(k.ranks == std::set<int32_t>{5});
  CHECK(k.stuck == std::set<int32_t>{2});
  REQUIRE(k.blocked_in.count(5) == 1);
  CHECK(k.blocked_in[5] == "MPI_Allreduce on WORLD");
  CHECK(KeyOf(Missing(1, {0}), {}).ranks == std::set<int32_t>{1});
}

TEST_CASE("a hang is the same when the same ranks wait in the same calls", "[shrink]") {
  const FindingKey target = KeyOf(Missing(1, {0, 2, 3}), {});
  const std::set<int32_t> kept = {0, 1};
  std::string why;
  CHECK(SameFinding(target, KeyOf(Missing(1, {0}), {0, 1}), kept, CallMatch::kApi));
  // The missing rank waits somewhere else.
  CHECK_FALSE(SameFinding(target, KeyOf(Missing(1, {0}, "dup(WORLD)", "MPI_Barrier"), {0, 1}), kept,
                          CallMatch::kApi, &why));
  CHECK(why.find("waits elsewhere") != std::string::npos);
  // Another rank is the one missing.
  CHECK_FALSE(SameFinding(target, KeyOf(Missing(0, {1}), {0, 1}), kept, CallMatch::kApi));
  // Another communicator: a split that is no longer one.
  CHECK_FALSE(SameFinding(target, KeyOf(Missing(1, {0}, "WORLD"), {0, 1}), kept, CallMatch::kApi));
  // The missing rank was removed: nothing of the finding is left.
  CHECK_FALSE(SameFinding(target, KeyOf(Missing(0, {1}), {0, 2}), {0, 2}, CallMatch::kApi));
  // A rank waits that did not wait in the recording.
  const FindingKey two_wait = KeyOf(Missing(1, {0}), {});
  CHECK_FALSE(SameFinding(two_wait, KeyOf(Missing(1, {0, 2}), {0, 1, 2}), {0, 1, 2}, CallMatch::kApi));
}

TEST_CASE("a mismatch is the same in the same field whatever the ranks then do", "[shrink]") {
  const FindingKey target = KeyOf(Mismatch(2), {});
  Finding got = Mismatch(1);
  got.data = nlohmann::json{{"field", "count"}, {"stuck", {0, 1}}}.dump();
  CHECK(SameFinding(target, KeyOf(got, {0, 2}), {0, 2}, CallMatch::kApi));
  CHECK_FALSE(SameFinding(target, KeyOf(Mismatch(1, "dtype"), {0, 2}), {0, 2}, CallMatch::kApi));
  CHECK_FALSE(SameFinding(target, KeyOf(Mismatch(0), {0, 2}), {0, 2}, CallMatch::kApi));
}

TEST_CASE("NCCL calls re-issued over MPI compare by operation", "[shrink]") {
  Finding recorded = Missing(1, {0});
  recorded.op = "ncclAllReduce";
  recorded.comm = CommRef{1, "split(nccl, color=0)@1", {}};
  Finding driven = Missing(1, {0}, "split(WORLD, color=4242)", "MPI_Iallreduce");
  driven.op = "MPI_Iallreduce";
  const FindingKey target = KeyOf(recorded, {});
  CHECK_FALSE(SameFinding(target, KeyOf(driven, {0, 1}), {0, 1}, CallMatch::kApi));
  CHECK(SameFinding(target, KeyOf(driven, {0, 1}), {0, 1}, CallMatch::kOperation));
}

TEST_CASE("the finding kept may come second when the first is of its kind", "[shrink]") {
  // A two-rank deadlock: each rank misses the other's collective; which is
  // listed first depends on timing.
  CheckReport report;
  Finding other = Missing(0, {1}, "WORLD");
  report.findings = {other, Missing(1, {0})};
  const FindingKey target = KeyOf(Missing(1, {0, 2, 3}), {});
  std::string why;
  const Finding* f = MatchingFinding(report, "", target, {0, 1}, CallMatch::kApi, &why);
  REQUIRE(f != nullptr);
  CHECK(f == &report.findings[1]);
  // Not when a fault of another kind comes first.
  report.findings.insert(report.findings.begin(), Mismatch(0));
  CHECK(MatchingFinding(report, "", target, {0, 1}, CallMatch::kApi, &why) == nullptr);
  CHECK(why.find("another fault first") != std::string::npos);
  // --keep picks the kind.
  CHECK(MatchingFinding(report, "missing_ranks", target, {0, 1}, CallMatch::kApi, &why) == &report.findings[2]);
}

TEST_CASE("every recorded finding of the kept kind is a target, the one picked first", "[shrink]") {
  // A rank stopped: ranks 0 and 2 each wait on it, a finding each.
  CheckReport recorded;
  recorded.findings = {Missing(1, {0}), Mismatch(3), Missing(3, {2}, "WORLD")};
  const std::vector<const Finding*> targets = TargetFindings(recorded, recorded.findings[0]);
  REQUIRE(targets.size() == 2);
  CHECK(targets[0] == &recorded.findings[0]);
  CHECK(targets[1] == &recorded.findings[2]);
  std::vector<FindingKey> keys;
  for (const Finding* t : targets) keys.push_back(KeyOf(*t, {}));
  // A drive that shows only the second one fails the same way.
  CheckReport driven;
  driven.findings = {Missing(3, {2}, "WORLD")};
  std::string why;
  size_t which = 9;
  CHECK(MatchingTarget(driven, "", keys, {0, 1, 2, 3}, CallMatch::kApi, &why, &which) == &driven.findings[0]);
  CHECK(which == 1);
  // One that shows neither does not, and says why the first is not there.
  driven.findings = {Missing(0, {2}, "WORLD")};
  CHECK(MatchingTarget(driven, "", keys, {0, 1, 2, 3}, CallMatch::kApi, &why, &which) == nullptr);
  CHECK_FALSE(why.empty());
  // The program's own MPI_Abort is no target of another error.
  recorded.findings = {NcclError(), Abort()};
  CHECK(TargetFindings(recorded, recorded.findings[0]).size() == 1);
}

TEST_CASE("only hangs, mismatches and errors can be kept", "[shrink]") {
  CheckReport report;
  Finding nan;
  nan.kind = FindingKind::kNanInf;
  Finding config;
  config.kind = FindingKind::kConfig;
  report.findings = {nan, config};
  CHECK(PickFinding(report, "") == nullptr);
  CHECK(PickFinding(report, "nan_inf") == &report.findings[0]);
  report.findings.push_back(Mismatch(1));
  CHECK(PickFinding(report, "") == &report.findings[2]);
}

TEST_CASE("a program calling MPI_Abort is not the fault kept; what made it give up is", "[shrink]") {
  CheckReport report;
  report.findings = {Abort(), NcclError()};
  CHECK(PickFinding(report, "") == &report.findings[1]);
  CHECK(PickFinding(report, "error") == &report.findings[0]);  // unless asked for
  report.findings = {Abort()};
  CHECK(PickFinding(report, "") == nullptr);
}

}  // namespace
}  // namespace replay::shrink
