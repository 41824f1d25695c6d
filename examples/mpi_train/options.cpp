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

    if (name == "--steps") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->steps) || options->steps < 1) {
        return bad("an integer >= 1");
      }
    } else if (name == "--params") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->params) || options->params < 2 ||
          options->params > (1 << 20)) {
        return bad("an integer from 2 to 1048576");
      }
    } else if (name == "--batch") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->batch) || options->batch < 1 ||
          options->batch > (1 << 16)) {
        return bad("an integer from 1 to 65536");
      }
    } else if (name == "--lr") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->lr) || !std::isfinite(options->lr) || options->lr <= 0.0f) {
        return bad("a positive number");
      }
    } else if (name == "--seed") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->seed)) return bad("a non-negative integer");
    } else if (name == "--ckpt-every") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->ckpt_every) || options->ckpt_every < 0) {
        return bad("a non-negative integer");
      }
    } else if (name == "--ckpt-dir") {
      if (!need_value()) return false;
      if (value.empty()) return bad("a directory");
      options->ckpt_dir = value;
    } else if (name == "--resume") {
      if (!need_value()) return false;
      if (!ParseNumber(value, &options->resume) || options->resume < 1) {
        return bad("a checkpointed step >= 1");
      }
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
