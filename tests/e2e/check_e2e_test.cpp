// End-to-end: the example trainer's faults, recorded under mpirun, and what
// `replay check` and `replay diff` make of them.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "e2e/e2e.h"
#include "util/json.h"

namespace replay {
namespace {

// Hung jobs are stopped after this many seconds; the faults strike at step 2,
// well within it.
constexpr int kHangTimeoutS = 5;

std::string Train(int ranks, const std::string& args) {
  return Mpirun(ranks) + " " + testing::MpiTrain() + " --ckpt-every 0 " + args;
}

RunResult Record(const std::string& dir, int ranks, const std::string& args, int timeout_s = 120) {
  return Run(Replay() + " record -o " + dir + " -- " + Train(ranks, args), timeout_s);
}

const json* FirstOf(const json& report, const std::string& kind) {
  for (const auto& f : report["findings"]) {
    if (f["kind"] == kind) return &f;
  }
  return nullptr;
}

TEST_CASE("check finds nothing in clean runs at 1, 2 and 4 ranks, nor in faults one run cannot show", "[e2e]") {
  struct Case {
    int ranks;
    const char* args;
  };
  // Unseeded and racy runs differ from run to run; each one alone is consistent.
  // The order fault needs a second rank of the faulty rank's parity to bite:
  // at 2 ranks it is harmless.
  for (Case c : {Case{1, "--steps 4"}, Case{2, "--steps 4"}, Case{4, "--steps 4"},
                 Case{2, "--steps 4 --fault order:rank=1,step=2"}, Case{2, "--steps 4 --fault unseeded"},
                 Case{4, "--steps 4 --fault unseeded"}, Case{2, "--steps 4 --fault race"},
                 Case{4, "--steps 4 --fault race"}}) {
    DYNAMIC_SECTION(c.ranks << " ranks " << c.args) {
      TempDir tmp;
      RunResult r = Record(tmp / "t", c.ranks, c.args);
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      const json k = CheckClean(tmp / "t");
      CHECK(k["notes"].empty());
      CHECK(k["ranks"].size() == static_cast<size_t>(c.ranks));
    }
  }
}

// The first finding of the check of the trainer's `fault` at step 2 of rank 1
// (6 steps at `ranks` ranks): of `kind`, against rank 1, in the gradient
// allreduce of step 2.
json GradientFinding(int ranks, const std::string& fault, const std::string& kind) {
  TempDir tmp;
  Record(tmp / "t", ranks, "--steps 6 --fault " + fault + ":rank=1,step=2", kHangTimeoutS);
  const json f = FirstFinding(tmp / "t", kind, json::array({1}), "MPI_Allreduce");
  CHECK(f["comm"]["name"] == "dup(WORLD)");
  CHECK(f["seq"] == 3);  // the broadcast was 1, step 1's allreduce 2
  return f;
}

TEST_CASE("check names the rank that skipped the gradient allreduce, and where it waits instead", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      const json f = GradientFinding(ranks, "hang", "missing_ranks");
      const json& missing = f["data"]["missing"][0];
      CHECK(missing["blocked_in"]["comm_name"] == "WORLD");
      CHECK(missing["blocked_in"]["api"] == "MPI_Allreduce");
      CHECK(missing["blocked_in"]["returned"] == false);
      CHECK(f["call_site"]["symbol"] != "");
    }
  }
}

TEST_CASE("check reports the count mismatch whatever MPI did after it", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      const json f = GradientFinding(ranks, "mismatch", "mismatch");
      CHECK(f["data"]["field"] == "count");
      for (const auto& g : f["data"]["groups"]) CHECK(g["count"] == (g["expected"] == true ? 2048 : 1024));
    }
  }
}

TEST_CASE("check shows the order fault's deadlock across two communicators at 4 ranks", "[e2e]") {
  TempDir tmp;
  Record(tmp / "t", 4, "--steps 6 --fault order:rank=1,step=2", kHangTimeoutS);
  const json k = CheckFaulty(tmp / "t");
  INFO(Titles(k));
  REQUIRE(k["findings"].size() >= 2);
  // Rank 1 went to the loss allreduce on WORLD before starting its metrics
  // iallreduce; its metrics partner, rank 3, waits for that iallreduce and so
  // never reaches WORLD's.
  const json& first = k["findings"][0];
  CHECK(first["kind"] == "missing_ranks");
  CHECK(first["comm"]["name"] == "split(WORLD, color=1)");
  CHECK(first["ranks"] == json::array({1}));
  CHECK(first["data"]["missing"][0]["blocked_in"]["comm_name"] == "WORLD");
  CHECK(first["data"]["deadlock"][0]["ranks"] == json::array({1}));
  const json& second = k["findings"][1];
  CHECK(second["kind"] == "missing_ranks");
  CHECK(second["comm"]["name"] == "WORLD");
  CHECK(second["ranks"] == json::array({3}));
  CHECK(second["data"]["missing"][0]["blocked_in"]["api"] == "MPI_Wait");
  CHECK(second["data"]["missing"][0]["blocked_in"]["waits_for"][0]["comm_name"] == "split(WORLD, color=1)");
}

TEST_CASE("check names the rank whose gradient first held a NaN", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      int culprit = ranks - 1;
      REQUIRE(Record(tmp / "t", ranks, "--steps 4 --fault nan:rank=" + std::to_string(culprit) + ",step=3").exit_code == 0);
      const json k = CheckFaulty(tmp / "t");
      INFO(Titles(k));
      REQUIRE(k["findings"].size() == 1);
      const json& f = k["findings"][0];
      CHECK(f["kind"] == "nan_inf");
      CHECK(f["ranks"] == json::array({culprit}));
      CHECK(f["comm"]["name"] == "dup(WORLD)");
      CHECK(f["seq"] == 4);
      CHECK(f["data"]["nan"] == 1);
    }
  }
}

TEST_CASE("check names the rank a NaN came from though the others counted only samples of what they received",
          "[e2e]") {
  TempDir tmp;
  const std::string program = std::string("/usr/bin/python3 ") + REPLAY_SOURCE_DIR + "/tests/e2e/programs/mpi4py_nan.py";
  Succeeded(Replay() + " record -o " + (tmp / "t") + " -- " + Mpirun(3) + " " + program);
  // Rank 1's NaN lies outside the sample ranks 0 and 2 counted of step 2's
  // result: they saw none, and sent it on into step 3's allreduce.
  auto trace = ReadTrace(tmp / "t");
  for (int rank : {0, 2}) {
    INFO("rank " << rank);
    const auto& rk = trace.at(rank);
    const std::vector<const Event*> ops = rk.Ops("MPI_Allreduce");
    REQUIRE(ops.size() == 4);
    CHECK(ops[3]->op.send_nan == 1);
    const std::vector<const Event*> rets = rk.OfKind(EventKind::kReturn);
    int sampled = 0;
    for (const Event* e : rets) {
      if (rk.Api(*e) != "MPI_Allreduce") continue;
      ++sampled;
      CHECK((e->ret.flags & op_flags::kRecvSampled) != 0);
      if (e->ret.seq == 3) CHECK(e->ret.recv_nan == 0);
    }
    CHECK(sampled == 4);
  }
  const json k = CheckFaulty(tmp / "t");
  INFO(Titles(k));
  REQUIRE(k["findings"].size() == 1);
  const json& f = k["findings"][0];
  CHECK(f["kind"] == "nan_inf");
  CHECK(f["ranks"] == json::array({1}));
  CHECK(f["seq"] == 3);
}

TEST_CASE("check reports the crash first, then the ranks it left waiting", "[e2e]") {
  for (int ranks : {2, 4}) {
    DYNAMIC_SECTION(ranks << " ranks") {
      TempDir tmp;
      Record(tmp / "t", ranks, "--steps 6 --fault crash:rank=1,step=2", 30);
      const json k = CheckFaulty(tmp / "t");  // at least one finding
      INFO(Titles(k));
      const json& f = k["findings"][0];
      CHECK(f["kind"] == "error");
      CHECK(f["ranks"] == json::array({1}));
      CHECK(f["data"]["signal"] == "SIGSEGV");
      CHECK(std::find(f["categories"].begin(), f["categories"].end(), "segmentation fault") != f["categories"].end());
      const json* missing = FirstOf(k, "missing_ranks");
      if (missing != nullptr) CHECK((*missing)["ranks"] == json::array({1}));
    }
  }
}

TEST_CASE("diff finds nothing between two seeded runs and the getrandom bytes between unseeded ones", "[e2e]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "a", 2, "--steps 3").exit_code == 0);
  REQUIRE(Record(tmp / "b", 2, "--steps 3").exit_code == 0);
  RunResult same = Run(Replay() + " diff --json " + tmp / "a" + " " + tmp / "b");
  INFO(same.output);
  CHECK(same.exit_code == 0);
  CHECK(json::parse(same.output)["diverged"] == false);

  REQUIRE(Record(tmp / "u1", 2, "--steps 3 --fault unseeded").exit_code == 0);
  REQUIRE(Record(tmp / "u2", 2, "--steps 3 --fault unseeded").exit_code == 0);
  RunResult differ = Run(Replay() + " diff --json " + tmp / "u1" + " " + tmp / "u2");
  INFO(differ.output);
  CHECK(differ.exit_code == 1);
  json d = json::parse(differ.output);
  CHECK(d["diverged"] == true);
  for (const auto& r : d["ranks"]) {
    CHECK(r["diverged"] == true);
    CHECK(r["event_a"]["kind"] == "entropy");
    CHECK(r["what"] == "getrandom returned different bytes");
  }
}

TEST_CASE("diff points at rank 0's wildcard receive when the race fault reorders messages", "[e2e]") {
  TempDir tmp;
  REQUIRE(Record(tmp / "a", 4, "--steps 4 --fault race").exit_code == 0);
  // The arrival order of three senders over four steps repeats by chance
  // about once in a thousand runs; try again then.
  json d;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string b = tmp / ("b" + std::to_string(attempt));
    REQUIRE(Record(b, 4, "--steps 4 --fault race").exit_code == 0);
    RunResult r = Run(Replay() + " diff --json " + tmp / "a" + " " + b);
    INFO(r.output);
    d = json::parse(r.output);
    if (d["diverged"] == true) break;
  }
  REQUIRE(d["diverged"] == true);
  CHECK(d["first_rank"] == 0);
  CHECK(d["ranks"][0]["what"] == "a wildcard receive matched a different sender");
}

// A job of mpi_stages recorded in a session of its own, to be killed part way.
struct StagedJob {
  std::string dir;
  pid_t session = 0;
};

StagedJob StartStaged(const TempDir& tmp, const std::string& stage, double seconds) {
  StagedJob job;
  job.dir = tmp / "t";
  RunResult started = Run("setsid timeout -s KILL 60 " + Replay() + " record -o " + job.dir + " -- " + Mpirun(2) +
                          " " + testing::TestProgram("mpi_stages") + " " + stage + " " +
                          std::to_string(seconds) + " > " + tmp / "log" + " 2>&1 & echo $!");
  REQUIRE(started.exit_code == 0);
  job.session = static_cast<pid_t>(std::stol(started.output));
  return job;
}

// Waits until rank `rank` of the running job is doing something whose
// description contains `doing` (as `check --live` says it), with at least
// `events` events; returns its process id, or 0 after 30 s.
pid_t WaitFor(const StagedJob& job, int rank, const std::string& doing, uint64_t events = 0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    RunResult c = Run(Replay() + " check --live --json --min-wait 0 " + job.dir + " 2>/dev/null", 30);
    json report = json::parse(c.output, nullptr, false);
    if (report.is_discarded() || !report.contains("ranks")) continue;
    for (const json& r : report["ranks"]) {
      if (r["rank"] != rank || r["status"] != "running" || r["events"].get<uint64_t>() < events) continue;
      if (r["doing"].get<std::string>().find(doing) == std::string::npos) continue;
      json info = json::parse(Run(Replay() + " info --json " + job.dir + " 2>/dev/null", 30).output, nullptr, false);
      if (info.is_discarded()) continue;
      for (const json& i : info["ranks"]) {
        if (i["rank"] == rank) return i["pid"].get<pid_t>();
      }
    }
  }
  return 0;
}

// The parent of `pid`: for a rank, the launcher that started it.
pid_t ParentOf(pid_t pid) {
  RunResult r = Run("ps -o ppid= -p " + std::to_string(pid));
  return r.exit_code == 0 ? static_cast<pid_t>(std::stol(r.output)) : 0;
}

// Waits for the job to end (the launcher cleans up after a kill).
void WaitEnded(const StagedJob& job) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && kill(-job.session, 0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-job.session, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

// Kills `pid` with `signo`, waits for `job` to end and checks its trace, which
// must have something to report (check exits 1). The report.
json KillAndCheck(const TempDir& tmp, const StagedJob& job, pid_t pid, int signo) {
  kill(pid, signo);
  WaitEnded(job);
  int code = -1;
  json report = CheckTrace(job.dir, &code);
  INFO(Titles(report) << Run("cat " + tmp / "log").output);
  CHECK(code == 1);
  return report;
}

TEST_CASE("check names a rank killed inside MPI_Init, mid-job and inside MPI_Finalize, and a killed mpirun", "[e2e]") {
  TempDir tmp;
  // The stage, the rank to kill, what it is doing then and how many events it
  // has recorded by then, and the title of the finding that names it.
  struct Case {
    const char* stage;
    int victim;
    const char* doing;
    uint64_t events;
    const char* title;
  };
  const Case cases[] = {
      // Rank 1 sleeps before MPI_Init: rank 0 waits inside it for rank 1.
      {"init", 0, "MPI_Init", 0, "rank 0 was killed without a recorded signal (SIGKILL or similar) inside MPI_Init"},
      {"run", 1, "", 200, ""},
      // Rank 1 sleeps before MPI_Finalize: rank 0 waits inside it for rank 1.
      {"finalize", 0, "MPI_Finalize", 0,
       "rank 0 was killed without a recorded signal (SIGKILL or similar) inside MPI_Finalize"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION("killed " << c.stage) {
      StagedJob job = StartStaged(tmp, c.stage, 6);
      pid_t victim = WaitFor(job, c.victim, c.doing, c.events);
      REQUIRE(victim > 0);
      const json checked = KillAndCheck(tmp, job, victim, SIGKILL);
      INFO(Titles(checked));
      // Mid-job, the others may be left waiting for it: then the hang names it.
      const json* named = nullptr;
      for (const json& f : checked["findings"]) {
        for (const json& r : f["ranks"]) {
          if (r == c.victim && named == nullptr) named = &f;
        }
      }
      REQUIRE(named != nullptr);
      if (*c.title != '\0') {
        CHECK((*named)["kind"] == "error");
        CHECK((*named)["title"].get<std::string>().rfind(c.title, 0) == 0);
        CHECK((*named)["data"]["first"] == c.victim);
      }
      CHECK(checked["ranks"][c.victim]["doing"].get<std::string>().find("killed without a recorded signal") !=
            std::string::npos);
    }
  }
  for (int signo : {SIGTERM, SIGKILL}) {
    DYNAMIC_SECTION("mpirun killed by signal " << signo) {
      StagedJob job = StartStaged(tmp, "run", 6);
      pid_t rank = WaitFor(job, 1, "", 200);
      REQUIRE(rank > 0);
      pid_t launcher = ParentOf(rank);
      REQUIRE(launcher > 1);
      // Both ranks are told of: stopped by mpirun's SIGTERM, or made to exit
      // by the loss of their launcher. One may be left waiting for the other
      // first, which a hang finding then tells.
      const json checked = KillAndCheck(tmp, job, launcher, signo);
      INFO(Titles(checked));
      REQUIRE(!checked["findings"].empty());
      const json& f = checked["findings"][0];
      if (f["kind"] == "error") CHECK(f["ranks"] == json::array({0, 1}));
      for (const json& r : checked["ranks"]) {
        std::string doing = r["doing"].get<std::string>();
        CHECK((doing.find("killed by SIGTERM") != std::string::npos ||
               doing.find("exited without calling MPI_Finalize") != std::string::npos));
      }
    }
  }
}

// Seconds on the wall clock, as the trace counts them.
double RealtimeNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST_CASE("check --live names the missing rank of a job hung right now, once it has waited --min-wait", "[e2e]") {
  TempDir tmp;
  std::string dir = tmp / "t";
  // The job runs in a session of its own, so that it can be stopped as a whole,
  // and is killed after a minute whatever happens to this test.
  RunResult started = Run("setsid timeout -s KILL 60 " + Replay() + " record -o " + dir + " -- " +
                          Train(4, "--steps 200 --fault hang:rank=2,step=2") + " > " + tmp / "log" +
                          " 2>&1 & echo $!");
  REQUIRE(started.exit_code == 0);
  pid_t job = static_cast<pid_t>(std::stol(started.output));
  REQUIRE(job > 0);
  json found;
  double found_at = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RunResult r = Run(Replay() + " check --live --json " + dir + " 2>/dev/null", 30);
    if (r.exit_code != 1) continue;  // not a trace yet, or nothing found yet
    json report = json::parse(r.output, nullptr, false);
    if (report.is_discarded() || report["findings"].empty()) continue;
    found = report;
    found_at = RealtimeNow();
    break;
  }
  kill(-job, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(-job, SIGKILL);
  INFO(Titles(found));
  REQUIRE(!found.is_null());
  CHECK(found["live"] == true);
  const json& f = found["findings"][0];
  CHECK(f["kind"] == "missing_ranks");
  CHECK(f["comm"]["name"] == "dup(WORLD)");
  CHECK(f["ranks"] == json::array({2}));
  CHECK(f["data"]["missing"][0]["status"] == "running");
  // Not before the default --min-wait (0.5 s) since the last rank got stuck.
  // How soon after it (well under a second on an idle machine) is measured by
  // bench/live_check_latency.sh, not here: a loaded machine delays it.
  double stuck_at = f["data"]["stuck_since_realtime_ns"].get<double>() / 1e9;
  double latency = found_at - stuck_at;
  INFO("detected " << latency << " s after the hang");
  CHECK(latency > 0.4);
}

}  // namespace
}  // namespace replay
