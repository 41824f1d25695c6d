// Hostile input: a real trace (and a bundle of it) damaged in every way a disk,
// a copy or a person can damage one, through every command that reads a
// trace. Whatever the damage: no crash, no hang, an exit status of 0, 1 or 2,
// a failure said in one line, and never a clean verdict from check or diff on
// a trace that lost something.
//
// The damage is drawn from a seeded generator, so a failure can be replayed:
// REPLAY_HOSTILE_SEED picks the seed (printed with each failure) and
// REPLAY_HOSTILE_CASES how many damaged traces to make (default 40).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "e2e/e2e.h"

namespace replay {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The regular files of a trace directory, relative to it.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t Env(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// One way of damaging a file's bytes, or the file itself.
struct Damage {
  std::string what;       // for messages: "bit flips in rank-00001/events"
  bool loses_data = true; // recorded content is altered or gone
};

class Damager {
 public:
  explicit Damager(uint64_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Damages the bytes of `path` (a regular file).
  Damage Bytes(const std::string& path, const std::string& name) {
    std::string b = ReadAll(path);
    if (b.empty()) b = "x";
    switch (Pick(6)) {
      case 0: {
        size_t flips = 1 + Pick(8);
        for (size_t i = 0; i < flips; ++i) b[Pick(b.size())] ^= static_cast<char>(1u << Pick(8));
        WriteAll(path, b);
        return {std::to_string(flips) + " bit flips in " + name};
      }
      case 1: {
        size_t keep = Pick(b.size());
        WriteAll(path, b.substr(0, keep));
        return {name + " cut to " + std::to_string(keep) + " of " + std::to_string(b.size()) + " bytes"};
      }
      case 2: {
        size_t at = Pick(b.size()), n = 1 + Pick(std::min<size_t>(4096, b.size() - at));
        std::fill(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n), '\0');
        WriteAll(path, b);
        return {std::to_string(n) + " bytes zeroed at " + std::to_string(at) + " in " + name};
      }
      case 3: {
        size_t at = Pick(b.size()), n = 1 + Pick(std::min<size_t>(512, b.size() - at));
        for (size_t i = at; i < at + n; ++i) b[i] = static_cast<char>(Pick(256));
        WriteAll(path, b);
        return {std::to_string(n) + " random bytes at " + std::to_string(at) + " in " + name};
      }
      case 4:
        WriteAll(path, "");
        return {name + " emptied"};
      default: {
        std::string tail(1 + Pick(300), '\0');
        for (char& c : tail) c = static_cast<char>(Pick(256));
        WriteAll(path, b + tail);
        return {std::to_string(tail.size()) + " bytes of garbage appended to " + name, false};
      }
    }
  }

  // Replaces `path` by something that is not a regular file, or removes it.
  Damage Kind(const std::string& path, const std::string& name) {
    fs::remove(path);
    switch (Pick(4)) {
      case 0:
        fs::create_symlink("/dev/zero", path);
        return {name + " is a link to /dev/zero"};
      case 1:
        REQUIRE(mkfifo(path.c_str(), 0600) == 0);
        return {name + " is a pipe nobody writes to"};
      case 2:
        fs::create_directory(path);
        return {name + " is a directory"};
      default:
        return {name + " is gone"};
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Every command that reads a trace, on `input` (a directory or a bundle).
std::vector<std::pair<std::string, std::string>> Commands(const std::string& input, const std::string& base,
                                                          const std::string& out) {
  const std::string r = Replay() + " ";
  return {
      {"info", r + "info " + input},
      {"info --json", r + "info --json " + input},
      {"check", r + "check " + input},
      {"check --json", r + "check --json " + input},
      {"dump", r + "dump " + input + " > /dev/null"},
      {"diff", r + "diff " + base + " " + input},
      {"report", r + "report " + input + " -o " + out + "/report.html"},
      {"report --markdown", r + "report --markdown " + input + " > /dev/null"},
      {"export perfetto", r + "export -f perfetto " + input + " -o " + out + "/trace.json"},
      {"export pftrace", r + "export -f pftrace " + input + " -o " + out + "/trace.pftrace"},
      {"export jsonl", r + "export -f jsonl " + input + " -o " + out + "/trace.jsonl"},
      {"export flight-recorder", r + "export -f flight-recorder " + input + " -o " + out + "/fr"},
      {"bundle", r + "bundle " + input + " -o " + out + "/again.rpb"},
  };
}

// The lines a command wrote to stderr, without blank ones.
std::vector<std::string> ErrorLines(const std::string& err) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < err.size()) {
    size_t nl = err.find('\n', at);
    std::string line = err.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (!line.empty()) out.push_back(line);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

void RunAll(const std::string& input, const std::string& base, const std::string& scratch, const Damage& damage,
            uint64_t seed) {
  for (const auto& [name, command] : Commands(input, base, scratch)) {
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    RunResult r = RunApart(command, 60);
    INFO("seed " << seed << ": " << damage.what << "\n$ " << command << "\nstderr:\n" << r.error);
    // Done, in time, with a status it promises.
    CHECK(r.exit_code >= 0);
    CHECK(r.exit_code <= 2);
    CHECK(r.error.find("terminate called") == std::string::npos);
    CHECK(r.error.find("AddressSanitizer") == std::string::npos);
    CHECK(r.error.find("runtime error") == std::string::npos);
    // A refusal is one line saying what is wrong.
    std::vector<std::string> lines = ErrorLines(r.error);
    if (r.exit_code == 2 && r.output.empty()) {
      CHECK(lines.size() == 1);
      if (!lines.empty()) CHECK(lines[0].rfind("replay ", 0) == 0);
    }
    // No clean verdict on a trace that lost something.
    if (damage.loses_data && (name == "check" || name == "check --json" || name == "diff")) {
      CHECK(r.exit_code != 0);
    }
  }
}

TEST_CASE("damaged traces and bundles: no crash, no hang, one line, no clean verdict", "[e2e][hostile]") {
  TempDir tmp;
  const uint64_t seed = Env("REPLAY_HOSTILE_SEED", 20261206);
  const uint64_t cases = Env("REPLAY_HOSTILE_CASES", 40);
  const std::string base = tmp / "base";
  const std::string other = tmp / "other";
  // Level data: payloads too. Two recordings: one to damage, one whose
  // manifest is foreign to it.
  for (const std::string& dir : {base, other}) {
    RunResult rec = Run(Replay() + " record --level data -o " + dir + " -- " + Mpirun(2) + " " +
                        testing::MpiTrain() + " --steps 3");
    INFO(rec.output);
    REQUIRE(rec.exit_code == 0);
  }
  REQUIRE(Run(Replay() + " check " + base).exit_code == 0);
  REQUIRE(Run(Replay() + " bundle " + base + " -o " + tmp / "base.rpb").exit_code == 0);
  const std::vector<std::string> files = Files(base);
  REQUIRE(files.size() >= 7);  // manifest, and header, events, payloads (+ spare-free) per rank

  Damager damager(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(Env("REPLAY_HOSTILE_SECONDS", 300));
  for (uint64_t i = 0; i < cases && std::chrono::steady_clock::now() < deadline; ++i) {
    const std::string t = tmp / "t";
    fs::remove_all(t);
    fs::remove(tmp / "t.rpb");
    Damage damage;
    std::string input = t;
    switch (damager.Pick(5)) {
      case 0:
      case 1: {
        fs::copy(base, t, fs::copy_options::recursive);
        const std::string& f = files[damager.Pick(files.size())];
        damage = damager.Bytes(t + "/" + f, f);
        break;
      }
      case 2: {
        fs::copy(base, t, fs::copy_options::recursive);
        const std::string& f = files[damager.Pick(files.size())];
        damage = damager.Kind(t + "/" + f, f);
        break;
      }
      case 3: {
        fs::copy(base, t, fs::copy_options::recursive);
        if (damager.Pick(2) == 0) {
          fs::copy_file(other + "/manifest", t + "/manifest", fs::copy_options::overwrite_existing);
          damage = {"the manifest of another recording"};
        } else {
          fs::copy_file(base + "/rank-00001/header", t + "/rank-00000/header", fs::copy_options::overwrite_existing);
          damage = {"rank 1's header in rank 0's directory"};
        }
        break;
      }
      default: {
        fs::copy_file(tmp / "base.rpb", tmp / "t.rpb");
        damage = damager.Bytes(tmp / "t.rpb", "the bundle");
        input = tmp / "t.rpb";
        break;
      }
    }
    RunAll(input, base, tmp / "scratch", damage, seed);
  }
}

}  // namespace
}  // namespace replay
