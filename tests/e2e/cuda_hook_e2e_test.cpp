// End-to-end: the CUDA driver hook. tests/nccl_host/cuda_hook_program makes a
// fixed sequence of driver calls, finding the driver as the CUDA runtime does
// (dlopen, dlsym, cuGetProcAddress), on the host driver stand-in
// (tests/nccl_host/cuda_host.cpp); the trace must hold exactly those calls, in
// order, with the handles the program got.
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/e2e.h"
#include "replay/trace_reader.h"

namespace replay {
namespace {

// The driver stand-in is found as libcuda.so.1 is on a GPU machine.
std::string DriverPath() { return "LD_LIBRARY_PATH=" + testing::BuildPath("nccl_host/cuda") + " "; }

std::string Program(const std::string& how) {
  return testing::BuildPath("tests/nccl_host/cuda_hook_program") + " " + how;
}

RunResult Record(const std::string& dir, const std::string& how, const std::string& env = "") {
  return Run(DriverPath() + env + " " + Replay() + " record -o " + dir + " -- " + Program(how));
}

// The handles the program printed: "handles ctx=0x.. s1=0x.. ...".
std::map<std::string, uint64_t> Handles(const std::string& output) {
  auto lines = Grep(output, "handles ");
  REQUIRE(lines.size() == 1);
  std::map<std::string, uint64_t> out;
  std::istringstream in(lines[0].substr(lines[0].find("handles ") + 8));
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    out[word.substr(0, eq)] = std::stoull(word.substr(eq + 1), nullptr, 16);
  }
  return out;
}

// A recorded CUDA event, with handles by the names the program gave them.
struct Recorded {
  std::vector<std::string> lines;
  std::vector<uint32_t> threads;
};

Recorded ReadCuda(const std::string& dir, const std::map<std::string, uint64_t>& handles) {
  auto t = TraceReader::Open(dir);
  REQUIRE(t.ok());
  REQUIRE((*t)->ranks().size() == 1);
  auto r = (*t)->OpenRank(0);
  REQUIRE(r.ok());
  auto name = [&](uint64_t v) {
    for (const auto& [n, h] : handles) {
      if (h == v && v != 0) return n;
    }
    return std::to_string(v);
  };
  Recorded out;
  for (const Event& e : (*r)->events()) {
    if (e.kind != EventKind::kCuda) continue;
    const CudaEvent& c = e.cuda;
    out.lines.push_back(std::string(CudaOpName(c.op)) + " s=" + name(c.stream) + " e=" + name(c.event) +
                        " g=" + name(c.graph) + " o=" + name(c.other) +
                        " n=" + std::to_string(static_cast<int64_t>(c.count)) + " rc=" + std::to_string(c.rc) +
                        " d=" + std::to_string(c.device));
    out.threads.push_back(e.thread);
  }
  return out;
}

// The trace of cuda_hook_program, whichever way it found the driver. `each`:
// REPLAY_CUDA_KERNELS=1, every launch written when it is made.
std::vector<std::string> Expected(bool each) {
  auto kernels = [&](const std::string& stream, int n) {
    std::vector<std::string> k;
    if (each) {
      for (int i = 0; i < n; ++i) k.push_back("kernels s=" + stream + " e=0 g=0 o=0 n=1 rc=0 d=0");
    } else {
      k.push_back("kernels s=" + stream + " e=0 g=0 o=0 n=" + std::to_string(n) + " rc=0 d=0");
    }
    return k;
  };
  std::vector<std::string> x = {
      "set_device s=0 e=0 g=0 o=ctx n=0 rc=0 d=0",  // once: the second call changed nothing
      "stream_create s=s1 e=0 g=0 o=1 n=0 rc=0 d=0",
      "stream_create s=s2 e=0 g=0 o=1 n=-1 rc=0 d=0",  // priority -1
      "event_create s=0 e=event g=0 o=2 n=0 rc=0 d=0",
      "event_record s=s1 e=event g=0 o=0 n=0 rc=0 d=0",
      "stream_wait_event s=s2 e=event g=0 o=0 n=0 rc=0 d=0",
      "memcpy_async s=s2 e=0 g=0 o=1 n=4096 rc=0 d=0",  // host to device
  };
  for (auto& k : kernels("s1", 3)) x.push_back(k);  // cuLaunchKernel, ...Ex, ...CooperativeKernel
  x.push_back("event_record s=s1 e=event g=0 o=0 n=0 rc=0 d=0");
  x.push_back("capture_begin s=s1 e=0 g=0 o=2 n=0 rc=0 d=0");  // relaxed
  for (auto& k : kernels("s1", 1)) x.push_back(k);
  for (const char* line : {
           "capture_end s=s1 e=0 g=graph o=0 n=0 rc=0 d=0",
           "graph_instantiate s=0 e=0 g=exec o=graph n=0 rc=0 d=0",
           "graph_launch s=s1 e=0 g=exec o=0 n=0 rc=0 d=0",
           "graph_launch s=s1 e=0 g=exec o=0 n=0 rc=0 d=0",
           "event_query s=0 e=event g=0 o=0 n=0 rc=600 d=0",  // "not ready" once...
           "event_query s=0 e=event g=0 o=0 n=1 rc=0 d=0",    // ... and one left out
           "stream_query s=s2 e=0 g=0 o=0 n=0 rc=600 d=0",
           "stream_query s=s2 e=0 g=0 o=0 n=1 rc=0 d=0",
           "stream_synchronize s=s1 e=0 g=0 o=0 n=0 rc=0 d=0",
           "set_device s=0 e=0 g=0 o=ctx n=0 rc=0 d=0",           // the other thread
           "stream_synchronize s=2 e=0 g=0 o=0 n=0 rc=0 d=0",     // its per-thread default stream
           "event_synchronize s=0 e=event g=0 o=0 n=0 rc=0 d=0",
           "memset_async s=s2 e=0 g=0 o=4 n=4096 rc=0 d=0",
           "memcpy s=0 e=0 g=0 o=2 n=4096 rc=0 d=0",  // device to host, legacy default stream
           "ctx_synchronize s=0 e=0 g=0 o=0 n=0 rc=0 d=0",
           "ctx_synchronize s=0 e=0 g=0 o=ctx n=0 rc=0 d=0",  // cuCtxSynchronize_v2
           "event_destroy s=0 e=event g=0 o=0 n=0 rc=0 d=0",
           "stream_destroy s=s1 e=0 g=0 o=0 n=0 rc=0 d=0",
           "stream_destroy s=s2 e=0 g=0 o=0 n=0 rc=0 d=0",
       }) {
    x.push_back(line);
  }
  for (auto& k : kernels("0", 2)) x.push_back(k);  // written when the trace closes
  return x;
}

// Index of the events made by the program's second thread.
constexpr size_t kOtherThreadFirst = 20;

TEST_CASE("driver calls found through cuGetProcAddress are recorded in order, kernels counted per stream",
          "[e2e][cuda]") {
  TempDir tmp;
  RunResult plain = Run(DriverPath() + Program("proc"));
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  RunResult rec = Record(tmp / "t", "proc");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  Recorded got = ReadCuda(tmp / "t", Handles(rec.output));
  CHECK(got.lines == Expected(false));
  REQUIRE(got.threads.size() == Expected(false).size());
  // The application's threads: the second thread's two calls, and only they,
  // are on another thread. (The last event, written when the trace closed, is
  // on whichever thread closed it.)
  for (size_t i = 0; i + 1 < got.threads.size(); ++i) {
    INFO("event " << i << ": " << got.lines[i]);
    bool other = i == kOtherThreadFirst || i == kOtherThreadFirst + 1;
    CHECK((got.threads[i] != got.threads[0]) == other);
  }
  // Without the preload every function comes from the driver; with it the
  // wrapped ones come from the preload and nothing else changes.
  CHECK(Grep(plain.output, "where ").size() == 8);
  CHECK(Grep(plain.output, "libcuda.so.1").size() == 8);
  for (const char* wrapped : {"cuGetProcAddress_v2", "cuGetProcAddress", "cuStreamCreate", "cuStreamSynchronize",
                              "cuStreamSynchronize/per-thread", "cuLaunchKernel"}) {
    CHECK(Grep(rec.output, std::string("where ") + wrapped + " libreplay_interpose.so").size() == 1);
  }
  CHECK(Grep(rec.output, "where cuInit libcuda.so.1").size() == 1);
  CHECK(Grep(rec.output, "where cuMemAlloc libcuda.so.1").size() == 1);
}

TEST_CASE("driver calls found by dlsym on libcuda's handle and on RTLD_DEFAULT are recorded alike", "[e2e][cuda]") {
  for (const char* how : {"dlsym", "default"}) {
    INFO(how);
    TempDir tmp;
    RunResult rec = Record(tmp / "t", how);
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
    CHECK(ReadCuda(tmp / "t", Handles(rec.output)).lines == Expected(false));
    CHECK(Grep(rec.output, "where cuStreamCreate libreplay_interpose.so").size() == 1);
    CHECK(Grep(rec.output, "where cuStreamSynchronize/per-thread libreplay_interpose.so").size() == 1);
    CHECK(Grep(rec.output, "where cuMemAlloc libcuda.so.1").size() == 1);
  }
}

std::string LinkedModule(const std::string& name) { return testing::BuildPath("tests/nccl_host/lib" + name + ".so"); }

// cuda_hook_program's output, plain and recorded, when it calls the driver
// through an object linked against libcuda: the same program, the recorded
// one's wrapped functions in the preload.
void CheckLinked(const std::string& program, const std::string& how) {
  TempDir tmp;
  std::string run = testing::BuildPath("tests/nccl_host/" + program) + " " + how;
  RunResult plain = Run(DriverPath() + run);
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  CHECK(Grep(plain.output, "where cuStreamCreate libcuda.so.1").size() == 1);
  RunResult rec = Run(DriverPath() + Replay() + " record -o " + (tmp / "t") + " -- " + run);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  CHECK(Grep(rec.output, "replay:").size() == Grep(rec.output, "replay: trace in").size());  // no warning
  // Every call, those through its GOT and the launches through its PLT.
  CHECK(ReadCuda(tmp / "t", Handles(rec.output)).lines == Expected(false));
  for (const char* wrapped : {"cuStreamCreate", "cuStreamSynchronize", "cuStreamSynchronize/per-thread"}) {
    CHECK(Grep(rec.output, std::string("where ") + wrapped + " libreplay_interpose.so").size() == 1);
  }
  // Functions the preload does not record are left as they were.
  CHECK(Grep(rec.output, "where cuInit libcuda.so.1").size() == 1);
  CHECK(Grep(rec.output, "where cuMemAlloc libcuda.so.1").size() == 1);
}

TEST_CASE("driver calls of a module linked against libcuda, opened and looked into as Python imports one, are "
          "recorded",
          "[e2e][cuda]") {
  SECTION("bound lazily") { CheckLinked("cuda_hook_program", "linked " + LinkedModule("cuda_linked_module")); }
  SECTION("bound at load time, its GOT read-only") {
    CheckLinked("cuda_hook_program", "linked " + LinkedModule("cuda_linked_module_now"));
  }
  SECTION("loaded as a dependency of the module opened") {
    CheckLinked("cuda_hook_program", "linked " + LinkedModule("cuda_linked_outer"));
  }
}

TEST_CASE("driver calls of a program linked against libcuda are recorded", "[e2e][cuda]") {
  CheckLinked("cuda_linked_program", "startup");
}

TEST_CASE("REPLAY_CUDA_LINKED=0 leaves objects linked against libcuda untouched", "[e2e][cuda]") {
  TempDir tmp;
  std::string run = Program("linked " + LinkedModule("cuda_linked_module_now"));
  RunResult rec = Run(DriverPath() + "REPLAY_CUDA_LINKED=0 " + Replay() + " record -o " + (tmp / "t") + " -- " + run);
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  CHECK(Grep(rec.output, "where cuStreamCreate libcuda.so.1").size() == 1);
  // Nothing was recorded, so no rank began a trace.
  CHECK(Grep(rec.output, "nothing recorded: no process of the command made").size() == 1);
}

TEST_CASE("REPLAY_CUDA_KERNELS=1 records every kernel launch where it was made", "[e2e][cuda]") {
  TempDir tmp;
  RunResult rec = Record(tmp / "t", "proc", "REPLAY_CUDA_KERNELS=1");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  CHECK(ReadCuda(tmp / "t", Handles(rec.output)).lines == Expected(true));
}

TEST_CASE("with REPLAY_DISABLE=1, or REPLAY_CUDA_DRIVER=0, every lookup of the driver finds what it finds without "
          "the preload",
          "[e2e][cuda]") {
  const std::string setting = GENERATE(std::string("REPLAY_DISABLE=1"), std::string("REPLAY_CUDA_DRIVER=0"));
  for (const std::string& how :
       std::vector<std::string>{"proc", "dlsym", "default", "linked " + LinkedModule("cuda_linked_module_now")}) {
    INFO(setting << " " << how);
    TempDir tmp;
    RunResult plain = Run(DriverPath() + Program(how));
    REQUIRE(plain.exit_code == 0);
    RunResult off = Run(DriverPath() + setting + " REPLAY_DIR=" + (tmp / "t") + " LD_PRELOAD=" +
                        testing::Preload() + " " + Program(how));
    INFO(off.output);
    CHECK(off.exit_code == 0);
    // No wrapper is handed out, through dlsym, cuGetProcAddress or an import:
    // the same functions, the same handles, the same words.
    CHECK(Grep(off.output, "libreplay_interpose.so").empty());
    CHECK(Grep(off.output, "where ") == Grep(plain.output, "where "));
    CHECK(Grep(off.output, "replay:").empty());
    CHECK(Grep(off.output, "handles ").size() == 1);
    CHECK(Run("test -e " + (tmp / "t")).exit_code != 0);  // no trace
  }
}

TEST_CASE("a name behind more functions than it has wrapper slots hands out the rest unwrapped, said once",
          "[e2e][cuda]") {
  TempDir tmp;
  for (int i = 1; i <= 6; ++i) {
    REQUIRE(Run("cp " + testing::BuildPath("nccl_host/cuda/libcuda.so.1") + " " + (tmp / "libcuda-") +
                std::to_string(i) + ".so")
                .exit_code == 0);
  }
  RunResult rec = Record(tmp / "t", "slots " + tmp.path() + " 6");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  for (int i = 1; i <= 6; ++i) {
    std::string where = "where cuStreamQuery#" + std::to_string(i) + " ";
    CHECK(Grep(rec.output, where + (i <= 4 ? "libreplay_interpose.so" : "libcuda-" + std::to_string(i) + ".so"))
              .size() == 1);
  }
  CHECK(Grep(rec.output, "replay: cuStreamQuery resolves to more than 4 different functions").size() == 1);
  // The calls through the four wrappers, and only they, are recorded.
  std::vector<std::string> four(4, "stream_query s=0 e=0 g=0 o=0 n=0 rc=0 d=0");
  CHECK(ReadCuda(tmp / "t", {}).lines == four);
}

TEST_CASE("replay dump shows CUDA events by what they did", "[e2e][cuda]") {
  TempDir tmp;
  RunResult rec = Record(tmp / "t", "proc");
  INFO(rec.output);
  REQUIRE(rec.exit_code == 0);
  RunResult dump = Run(Replay() + " dump " + (tmp / "t"));
  INFO(dump.output);
  REQUIRE(dump.exit_code == 0);
  CHECK(Grep(dump.output, "cuda kernels stream=0x").size() == 2);
  CHECK(Grep(dump.output, "cuda event_query event=0x").size() == 2);
  CHECK(Grep(dump.output, "ready=yes left_out=1").size() == 2);  // the event and the stream
  CheckOneLineEach(dump.output, {"launches=3 device=0 rc=0", "cuda kernels stream=legacy launches=2",
                                 "cuda stream_synchronize stream=per-thread", "cuda memcpy_async stream=0x",
                                 "dir=HtoD bytes=4096", "cuda capture_begin stream=0x", "mode=relaxed",
                                 "priority=-1"});
}

}  // namespace
}  // namespace replay
