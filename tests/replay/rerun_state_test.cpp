#include "replay/rerun_state.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

namespace replay {
namespace {

// Every variable of the request, unset, so that a test starts from nothing.
void ClearRequest() {
#define REPLAY_RERUN_UNSET_(field, type, name, doc) unsetenv(name);
  REPLAY_RERUN_VARIABLES(REPLAY_RERUN_UNSET_)
#undef REPLAY_RERUN_UNSET_
}

TEST_CASE("a re-run request goes through the environment unchanged", "[replay]") {
  ClearRequest();
  RerunRequest sent;
  sent.mode = RerunMode::kOneRank;
  sent.trace_dir = "/traces/job 1";
  sent.rank = 3;
  sent.state = "/tmp/replay-rerun-abc";
  sent.programs = "/work/train\x1f" "ab12\x1f" "./train\x1f" "--steps\x1f" "3";
  sent.args = "--steps\x1f" "4";
  sent.stop_at = 1200;
  sent.from_mark = "checkpoint=40";
  std::vector<std::string> names = sent.Export();
  CHECK(names.size() == 8);
  RerunRequest got = RerunRequest::FromEnvironment();
#define REPLAY_RERUN_SAME_(field, type, name, doc) CHECK(got.field == sent.field);
  REPLAY_RERUN_VARIABLES(REPLAY_RERUN_SAME_)
#undef REPLAY_RERUN_SAME_
  ClearRequest();
}

TEST_CASE("a request leaves unset what it does not say, and says which variables it set", "[replay]") {
  ClearRequest();
  setenv("REPLAY_RERUN_STOP_AT", "5", 1);  // left from an earlier request
  RerunRequest sent;
  sent.mode = RerunMode::kAllRanks;
  sent.trace_dir = "/t";
  sent.state = "/tmp/d";
  std::vector<std::string> names = sent.Export();
  CHECK(names == std::vector<std::string>{"REPLAY_MODE", "REPLAY_RERUN_TRACE", "REPLAY_RERUN_STATE"});
  CHECK(std::getenv("REPLAY_RERUN_STOP_AT") == nullptr);
  RerunRequest got = RerunRequest::FromEnvironment();
  CHECK(got.all_ranks());
  CHECK(got.rank == -1);
  CHECK(got.stop_at == -1);
  CHECK(got.programs.empty());
  ClearRequest();
}

TEST_CASE("a process without a request does not re-run", "[replay]") {
  ClearRequest();
  CHECK(RerunRequest::FromEnvironment().mode == RerunMode::kNone);
  setenv("REPLAY_MODE", "record", 1);
  CHECK(RerunRequest::FromEnvironment().mode == RerunMode::kNone);
  ClearRequest();
}

TEST_CASE("the state file carries what the re-run program wrote back to the command", "[replay]") {
  auto path = CreateRerunStateFile();
  REQUIRE(path.ok());
  RerunState* mapped = MapRerunState(*path);
  REQUIRE(mapped != nullptr);
  CHECK(std::memcmp(mapped->magic, kRerunStateMagic, sizeof(kRerunStateMagic)) == 0);
  CHECK(mapped->last_index == -1);
  mapped->last_index = 41;
  mapped->verdict = static_cast<int32_t>(RerunVerdict::kDiverged);
  std::strcpy(mapped->message, "the data sent differs");
  std::optional<RerunState> st = TakeRerunState(*path);
  REQUIRE(st.has_value());
  CHECK(st->last_index == 41);
  CHECK(static_cast<RerunVerdict>(st->verdict) == RerunVerdict::kDiverged);
  CHECK(std::string(st->message) == "the data sent differs");
  CHECK_FALSE(TakeRerunState(*path).has_value());  // taken: the file is gone
}

TEST_CASE("every rank of a whole-job re-run has its own state file", "[replay]") {
  auto dir = CreateRerunStateDir();
  REQUIRE(dir.ok());
  CHECK(RerunStatePath(*dir, 0) != RerunStatePath(*dir, 1));
  REQUIRE(MapRerunState(RerunStatePath(*dir, 1)) != nullptr);
  CHECK_FALSE(TakeRerunState(RerunStatePath(*dir, 0)).has_value());  // rank 0 never started
  CHECK(TakeRerunState(RerunStatePath(*dir, 1)).has_value());
  CHECK(rmdir(dir->c_str()) == 0);
}

}  // namespace
}  // namespace replay
