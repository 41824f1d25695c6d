// The search of `replay shrink` with a driver that needs no MPI: its "drive"
// of a candidate is the candidate's own trace, so a candidate reproduces
// exactly when its trace shows the finding. The real drive is tested
// end to end (tests/e2e/shrink_e2e_test.cpp).
#include "replay/shrink.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "shrink/trainer_job.h"
#include "support/temp_dir.h"

namespace replay {
namespace {

using testing::TempDir;
using testing::Trainer;

class SelfDriver : public ShrinkDriver {
 public:
  explicit SelfDriver(size_t parallel, std::string instead = "") : parallel_(parallel), instead_(std::move(instead)) {}
  std::vector<Outcome> Drive(const std::vector<std::string>& dirs, const Settled&) override {
    std::vector<Outcome> out;
    for (const std::string& d : dirs) out.push_back({Status::Ok(), instead_.empty() ? d : instead_});
    batches.push_back(dirs.size());
    return out;
  }
  size_t Parallel(size_t) const override { return parallel_; }
  bool NcclCalls() const override { return true; }
  std::vector<size_t> batches;

 private:
  size_t parallel_;
  std::string instead_;  // a trace every drive leaves instead of the candidate
};

// Hung at step 3 of 6 and killed 0.6 s later, so that check counts the ranks
// as stuck.
void HungTrainer(const std::string& dir) { Trainer(dir, 6, 3, 4, 600); }

Result<ShrinkResult> Run(const TempDir& tmp, const std::string& trace, ShrinkDriver& driver, const std::string& out,
                         double budget_s = 600) {
  auto t = TraceReader::Open(trace);
  REQUIRE(t.ok());
  std::filesystem::create_directories(tmp / "work");
  ShrinkOptions o;
  o.work_dir = tmp / "work";
  o.budget_s = budget_s;
  return Shrink(**t, driver, o, out);
}

// The hung trainer recorded in tmp/t, shrunk into tmp/out one candidate at a time.
ShrinkResult ShrinkHungTrainer(const TempDir& tmp) {
  HungTrainer(tmp / "t");
  SelfDriver driver(1);
  auto r = Run(tmp, tmp / "t", driver, tmp / "out");
  REQUIRE(r.ok());
  return std::move(r).value();
}

TEST_CASE("shrink reduces a hung job to the two ranks and few calls that hang the same way", "[shrink]") {
  TempDir tmp;
  ShrinkResult r = ShrinkHungTrainer(tmp);
  CHECK(r.before.ranks == 4);
  CHECK(r.after.ranks == 2);
  CHECK(r.after.max_rank_operations <= 4);
  CHECK(r.after.operations < r.before.operations);
  CHECK(r.origin.size() == 2);
  CHECK(std::find(r.origin.begin(), r.origin.end(), 1) != r.origin.end());
  CHECK(r.reduced.kind == FindingKind::kMissingRanks);
  REQUIRE(r.reduced.comm);
  CHECK(r.reduced.comm->name == "dup(WORLD)");
  CHECK(r.reduced.op == "MPI_Allreduce");
  CHECK(r.iterations_found >= 2);
  CHECK_FALSE(r.budget_exhausted);
  REQUIRE(r.steps.size() >= 2);
  CHECK(r.steps.front().what == "as recorded");
  // Each accepted step is no larger than the one before.
  for (size_t i = 1; i < r.steps.size(); ++i) CHECK(r.steps[i].operations <= r.steps[i - 1].operations);
  // The reduced job is a trace in `out`, and nothing else of the search is.
  auto reduced = TraceReader::Open(tmp / "out");
  REQUIRE(reduced.ok());
  CHECK((*reduced)->ranks().size() == 2);
  // Of the candidates written, only the smallest is still there.
  CHECK(std::distance(std::filesystem::directory_iterator(tmp / "work"), std::filesystem::directory_iterator()) <= 1);
}

TEST_CASE("shrink starts a long job from its last calls", "[shrink]") {
  // 80 steps before the hang: 480 collectives and messages, of which only
  // the last matter.
  TempDir tmp;
  Trainer(tmp / "t", 81, 80, 4, 600);
  SelfDriver driver(1);
  auto r = Run(tmp, tmp / "t", driver, tmp / "out");
  REQUIRE(r.ok());
  REQUIRE_FALSE(r->steps.empty());
  CHECK(r->steps.front().what == "last calls");
  CHECK(r->steps.front().operations * 3 < r->before.operations * 2);
  CHECK(r->tail_units == 256);
  CHECK(r->after.ranks == 2);
  CHECK(r->after.max_rank_operations <= 4);
  CHECK(r->reduced.kind == FindingKind::kMissingRanks);
  REQUIRE(r->reduced.comm);
  CHECK(r->reduced.comm->name == "dup(WORLD)");
  // Its README says where the search started.
  auto recorded = TraceReader::Open(tmp / "t");
  auto reduced = TraceReader::Open(tmp / "out");
  REQUIRE(recorded.ok());
  REQUIRE(reduced.ok());
  const std::string readme = ShrinkReadme(*r, **recorded, **reduced);
  CHECK(readme.find("the search started from the end of the job") != std::string::npos);
}

TEST_CASE("shrink gives the same job whatever number of candidates are driven at once", "[shrink]") {
  TempDir tmp;
  HungTrainer(tmp / "t");
  SelfDriver one(1), three(3);
  auto a = Run(tmp, tmp / "t", one, tmp / "a");
  auto b = Run(tmp, tmp / "t", three, tmp / "b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->origin == b->origin);
  CHECK(a->after.operations == b->after.operations);
  for (const char* f : {"manifest", "rank-00000/events", "rank-00000/header", "rank-00001/events"}) {
    CHECK(testing::ReadFile(tmp / "a" + "/" + f) == testing::ReadFile(tmp / "b" + "/" + f));
  }
  // Batches of several were driven.
  CHECK(std::any_of(three.batches.begin(), three.batches.end(), [](size_t n) { return n > 1; }));
}

TEST_CASE("shrink stops at its budget with the smallest job found so far", "[shrink]") {
  TempDir tmp;
  HungTrainer(tmp / "t");
  SelfDriver driver(1);
  auto r = Run(tmp, tmp / "t", driver, tmp / "out", 1e-6);
  REQUIRE(r.ok());
  CHECK(r->budget_exhausted);
  // Only the job as recorded was tried: it is the smallest known.
  CHECK(r->after.ranks == 4);
  CHECK(TraceReader::Open(tmp / "out").ok());
}

TEST_CASE("shrink says so and writes nothing when the drive does not fail the same way", "[shrink]") {
  TempDir tmp;
  HungTrainer(tmp / "t");
  Trainer(tmp / "clean", 2, 99);
  SelfDriver driver(1, tmp / "clean");
  auto r = Run(tmp, tmp / "t", driver, tmp / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kNotFound);
  CHECK(r.status().message().find("does not make this job fail") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST_CASE("shrink refuses a trace whose check names nothing to keep", "[shrink]") {
  TempDir tmp;
  Trainer(tmp / "clean", 2, 99);
  SelfDriver driver(1);
  auto r = Run(tmp, tmp / "clean", driver, tmp / "out");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kNotFound);
  CHECK(r.status().message().find("finds nothing wrong") != std::string::npos);
  CHECK(driver.batches.empty());
  CHECK_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST_CASE("the repro program of a reduced job makes its calls rank by rank", "[shrink]") {
  TempDir tmp;
  ShrinkResult r = ShrinkHungTrainer(tmp);
  auto reduced = TraceReader::Open(tmp / "out");
  REQUIRE(reduced.ok());
  auto c = ReproProgram(**reduced, &r.reduced);
  REQUIRE(c.ok());
  const std::string& text = *c;
  CHECK(text.find("#include <mpi.h>") != std::string::npos);
  CHECK(text.find("nccl.h") == std::string::npos);
  CHECK(text.find("MPI_Comm_dup(MPI_COMM_WORLD, &c1)") != std::string::npos);
  // Each kind of call made from one place, as the recorded loop made it.
  CHECK(text.find("static void mpi_allreduce(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)") !=
        std::string::npos);
  CHECK(text.find(", MPI_FLOAT, MPI_SUM, c1);") != std::string::npos);
  CHECK(text.find(", MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);") != std::string::npos);
  CHECK(text.find("mpi_bcast") == std::string::npos);  // only what it uses
  CHECK(text.find("mpicc -o repro repro.c") != std::string::npos);
  CHECK(text.find("timeout 60 mpirun -np 2 ./repro") != std::string::npos);
  CHECK(text.find(r.reduced.title) != std::string::npos);
  CHECK(text.find("case 1:") != std::string::npos);
  const std::string readme = ShrinkReadme(r, **TraceReader::Open(tmp / "t"), **reduced);
  CHECK(readme.find("| ranks | 4 | 2 |") != std::string::npos);
  CHECK(readme.find("Ranks ") != std::string::npos);
  CHECK(readme.find("`OMPI_MCA_btl=^openib`") != std::string::npos);
  CHECK(readme.find("mpi `Open MPI v4.1.4`") != std::string::npos);
}

}  // namespace
}  // namespace replay
