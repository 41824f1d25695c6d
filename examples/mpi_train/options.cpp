#include "options.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace mpi_train {

const char kUsage[] =
    "usage: mpirun -n N mpi_train [options]\n"
    "\n"
    "A small data-parallel logistic-regression trainer over MPI. Without --fault a\n"
    "run is deterministic: the same options print the same lines.\n"
    "\n"
    "options:\n"
    "  --steps N         training steps (default 20)\n"
    "  --params N        model parameters, weights plus bias (default 2048)\n"
    "  --batch N         points per rank per step (default 32)\n"
    "  --lr X            learning rate (default 0.5)\n"
    "  --seed N          seed for the data, the initial parameters and batch sampling\n"
    "                    (default 1)\n"
    "  --ckpt-every K    checkpoint after every K-th step; 0: never (default 5)\n"
    "  --ckpt-dir DIR    checkpoint directory (default ckpt)\n"
    "  --resume STEP     load the checkpoints of STEP and continue from STEP+1\n"
    "  --fault SPEC      inject a fault; repeatable. SPEC is NAME or\n"
    "                    NAME:rank=R,step=S (defaults rank=1, step=3):\n"
    "                      hang      rank R skips the gradient allreduce at step S\n"
    "                      mismatch  rank R passes half the count to it at step S\n"
    "                      order     rank R swaps two collectives at step S\n"
    "                      nan       rank R's gradient gets a NaN at step S\n"
    "                      unseeded  parameters and sampling seeded from getrandom()\n"
    "                      race      loss summed in wildcard-receive arrival order\n"
    "                      crash     rank R raises SIGSEGV at step S\n"
    "  --help            print this and exit\n"
    "\n"
    "exit status: 0 on success, 2 on a bad argument, 1 on a checkpoint error.\n";

namespace {

template <typename T>
bool ParseNumber(std::string_view text, T* value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

}  // namespace

bool ParseOptions(int argc, char** argv, Options* options, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options->help = true;
      continue;
    }
    // Accept both "--name value" and "--name=value".
    std::string_view name = arg;
    std::string_view value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    auto need_value = [&]() {
      if (has_value) return true;
      if (i + 1 >= argc) {
        *error = std::string(name) + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    auto bad = [&](std::string_view what) {
      *error = "bad value '" + std::string(value) + "' for " + std::string(name) + ": expected " +
               std::string(what);
      return false;
    };

    // Reads the value into *out: a number that `ok` accepts, else "expected <what>".
    auto number = [&](auto* out, auto ok, std::string_view what) {
      if (!need_value()) return false;
      return (ParseNumber(value, out) && ok(*out)) || bad(what);
    };

    if (name == "--steps") {
      if (!number(&options->steps, [](int64_t v) { return v >= 1; }, "an integer >= 1")) return false;
    } else if (name == "--params") {
      if (!number(&options->params, [](int v) { return v >= 2 && v <= (1 << 20); }, "an integer from 2 to 1048576")) {
        return false;
      }
    } else if (name == "--batch") {
      if (!number(&options->batch, [](int v) { return v >= 1 && v <= (1 << 16); }, "an integer from 1 to 65536")) {
        return false;
      }
    } else if (name == "--lr") {
      if (!number(&options->lr, [](float v) { return std::isfinite(v) && v > 0.0f; }, "a positive number")) {
        return false;
      }
    } else if (name == "--seed") {
      if (!number(&options->seed, [](uint64_t) { return true; }, "a non-negative integer")) return false;
    } else if (name == "--ckpt-every") {
      if (!number(&options->ckpt_every, [](int64_t v) { return v >= 0; }, "a non-negative integer")) return false;
    } else if (name == "--ckpt-dir") {
      if (!need_value()) return false;
      if (value.empty()) return bad("a directory");
      options->ckpt_dir = value;
    } else if (name == "--resume") {
      if (!number(&options->resume, [](int64_t v) { return v >= 1; }, "a checkpointed step >= 1")) return false;
    } else if (name == "--fault") {
      if (!need_value()) return false;
      Fault fault;
      if (!ParseFault(value, &fault, error)) return false;
      options->faults.Add(fault);
    } else {
      *error = "unknown option '" + std::string(arg) + "' (try --help)";
      return false;
    }
  }
  return true;
}

}  // namespace mpi_train
