// bundle_fuzz: libFuzzer target for reading a bundle, which comes attached to
// a bug report from someone else's machine: its header (ReadBundleHeader), its
// entries unpacked into a directory (UnpackBundle: framing, zstd chunks,
// checksums, entry paths, sizes), then everything that reads the trace it
// unpacked to (read_trace.h).
//
// The property checked is that nothing crashes, hangs, trips ASan or UBSan,
// allocates without bound, or writes outside the directory it unpacks into.
//
// Build and run: TARGET=bundle_fuzz tests/fuzz/run_fuzz.sh.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "read_trace.h"
#include "replay/bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replay;
  namespace fs = std::filesystem;
  static const std::string root = [] {
    std::string d = fs::temp_directory_path().string() + "/replay-bundle-fuzz-" + std::to_string(getpid());
    fs::create_directories(d + "/inside");
    return d;
  }();
  const std::string file = root + "/inside/in.rpb";
  const std::string dest = root + "/inside/out";
  fs::remove_all(dest);
  fs::remove_all(root + "/fr");
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  (void)IsBundleFile(file);
  (void)ReadBundleHeader(file);
  if (UnpackBundle(file, dest).ok()) fuzz::ReadTrace(dest, root);
  // Nothing may land beside the directory it was unpacked into.
  for (const auto& e : fs::directory_iterator(root + "/inside")) {
    std::string name = e.path().filename().string();
    if (name != "in.rpb" && name != "out") __builtin_trap();
  }
  for (const auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    if (name != "inside" && name != "fr") __builtin_trap();
  }
  return 0;
}
