#include "options.h"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string_view>

#include "mpi_train/faults.h"

namespace nccl_train {
namespace {

constexpr std::string_view kIntro =
    "usage: mpirun -n N nccl_train [options]\n"
    "\n"
    "mpi_train's data-parallel logistic-regression trainer on CUDA and NCCL, one GPU\n"
    "per rank (nccl_train_host: host memory and the host NCCL stand-in). MPI only\n"
    "launches the ranks and carries NCCL's unique id. Without --fault a run is\n"
    "deterministic: the same options print the same lines, and the same as mpi_train.\n"
    "An NCCL or CUDA error ends the job (MPI_Abort) with one line naming the call.\n"
    "\n";

constexpr std::string_view kDeviceFaultHelp =
    "                      device    rank R selects the device of the rank before it\n"
    "                                on its node (takes no step=)\n";

// What an unknown fault's message lists: mpi_train's faults (its kFaultNames) less
// race, plus device. Keep in step with both.
constexpr std::string_view kFaultList = "hang, mismatch, order, nan, unseeded, crash or device";

// "device" or "device:rank=R".
bool ParseDeviceFault(std::string_view spec, int* rank, std::string* error) {
  *rank = 1;
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return true;
  const std::string_view param = spec.substr(colon + 1);
  if (param.starts_with("rank=")) {
    const std::string_view digits = param.substr(5);
    const char* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, *rank);
    if (ec == std::errc() && ptr == end && *rank >= 0) return true;
  }
  *error = "bad fault parameter '" + std::string(param) + "' in '" + std::string(spec) +
           "' (device takes rank=R, a non-negative integer)";
  return false;
}

// Takes a --fault value: a device fault is kept in `options`; one of mpi_train's is
// checked and left to mpi_train's parser (*forward).
bool TakeFault(std::string_view spec, Options* options, bool* forward, std::string* error) {
  const std::string_view name = spec.substr(0, spec.find(':'));
  *forward = false;
  if (name == "device") {
    int rank = 1;
    if (!ParseDeviceFault(spec, &rank, error)) return false;
    options->device_faults.push_back(rank);
    return true;
  }
  mpi_train::Fault fault;
  if (!mpi_train::ParseFault(spec, &fault, error)) {
    if (error->starts_with("unknown fault")) {
      *error = "unknown fault '" + std::string(name) + "' (expected " + std::string(kFaultList) + ")";
    }
    return false;
  }
  if (fault.kind == mpi_train::FaultKind::kRace) {
    *error = "fault 'race' is mpi_train's only: it sums losses in MPI_ANY_SOURCE arrival order, and NCCL has no "
             "wildcard receive";
    return false;
  }
  *forward = true;
  return true;
}

}  // namespace

void Options::ClampRanks(int world_size) {
  train.faults.ClampRanks(world_size);
  for (int& rank : device_faults) rank = std::min(rank, world_size - 1);
}

bool Options::DeviceFault(int rank) const {
  return std::find(device_faults.begin(), device_faults.end(), rank) != device_faults.end();
}

std::string Usage() {
  // mpi_train's list of options, less its race fault, plus the device fault.
  const std::string_view base = mpi_train::kUsage;
  std::string usage(kIntro);
  std::istringstream lines{std::string(base.substr(base.find("options:")))};
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" race ") != std::string::npos) continue;
    usage += line;
    usage += '\n';
    if (line.find(" crash ") != std::string::npos) usage += kDeviceFaultHelp;
  }
  return usage;
}

bool ParseOptions(int argc, char** argv, Options* options, std::string* error) {
  // Everything but the faults nccl_train handles itself goes to mpi_train's parser.
  std::vector<char*> forwarded = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.starts_with("--") ? arg.find('=') : std::string_view::npos;
    const std::string_view name = arg.substr(0, eq);
    if (name != "--fault") {
      forwarded.push_back(argv[i]);
      // Every other option of mpi_train's but --help takes a value: pass it on
      // unread, so that a value spelled like "--fault" stays a value.
      if (eq == std::string_view::npos && arg.starts_with("--") && arg != "--help" && i + 1 < argc) {
        forwarded.push_back(argv[++i]);
      }
      continue;
    }
    if (eq == std::string_view::npos && i + 1 >= argc) {
      forwarded.push_back(argv[i]);  // mpi_train says that it needs a value
      continue;
    }
    const int first = i;
    const std::string_view spec = eq != std::string_view::npos ? arg.substr(eq + 1) : std::string_view(argv[++i]);
    bool forward = false;
    if (!TakeFault(spec, options, &forward, error)) return false;
    if (forward) forwarded.insert(forwarded.end(), argv + first, argv + i + 1);
  }
  return mpi_train::ParseOptions(static_cast<int>(forwarded.size()), forwarded.data(), &options->train, error);
}

}  // namespace nccl_train
