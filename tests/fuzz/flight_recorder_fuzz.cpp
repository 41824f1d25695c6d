// flight_recorder_fuzz: libFuzzer target for `replay import` of PyTorch Flight
// Recorder dumps, which come from other machines: the pickle reader
// (interop/pickle.h), the JSON reader and the conversion to a trace, then
// everything that reads the trace made (read_trace.h).
//
// The input holds one to four dumps (FuzzedDataProvider): for each, whether it
// is JSON or a pickle, and its bytes. The property checked is that nothing
// crashes, hangs, trips ASan or UBSan, or allocates without bound: a hostile
// dump yields a Status.
//
// Build and run: TARGET=flight_recorder_fuzz tests/fuzz/run_fuzz.sh.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "interop/pickle.h"
#include "read_trace.h"
#include "replay/flight_recorder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replay;
  static const std::string root = [] {
    std::string d = std::filesystem::temp_directory_path().string() + "/replay-fr-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  std::filesystem::remove_all(root + "/dumps");
  std::filesystem::remove_all(root + "/trace");
  std::filesystem::remove_all(root + "/fr");
  std::filesystem::create_directories(root + "/dumps");

  FuzzedDataProvider in(data, size);
  int n = in.ConsumeIntegralInRange(1, 4);
  std::vector<std::string> files;
  for (int i = 0; i < n; ++i) {
    bool json = in.ConsumeBool();
    std::string bytes = i + 1 == n ? in.ConsumeRemainingBytesAsString() : in.ConsumeRandomLengthString(1 << 16);
    (void)interop::ReadPickle(bytes, "fuzz");
    std::string path = root + "/dumps/nccl_trace_rank_" + std::to_string(i) + (json ? ".json" : "");
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    files.push_back(path);
  }
  if (ImportFlightRecorder(files, root + "/trace").ok()) fuzz::ReadTrace(root + "/trace", root);
  return 0;
}
