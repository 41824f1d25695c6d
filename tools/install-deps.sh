#!/usr/bin/env bash
# Installs the Debian packages replay builds against, only those that are missing.
# Quiet and quick when everything is already present. Usage:
#   tools/install-deps.sh            # build, test and demo dependencies
#   tools/install-deps.sh --fuzz     # also clang + libFuzzer runtime, for the fuzz targets
set -euo pipefail

packages=(
  cmake g++ make pkg-config python3
  openmpi-bin libopenmpi-dev
  capnproto libcapnp-dev
  libzstd-dev libxxhash-dev libdw-dev
  # Perfetto's protobuf trace format (replay export --format pftrace).
  protobuf-compiler libprotobuf-dev
  libspdlog-dev libfmt-dev
  catch2 libcli11-dev nlohmann-json3-dev
  # The report tests render pages in headless Chromium and read its screenshots.
  chromium libpng-dev
  # The corpus of real MPI programs the end-to-end tests record and re-run
  # (tests/e2e/corpus_e2e_test.cpp).
  python3-mpi4py python3-numpy scotch ptscotch lammps
  # PyTorch as Debian ships it (CPU), for tests/e2e/torch_e2e_test.cpp.
  python3-torch
)
if [[ "${1:-}" == "--fuzz" ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
