#!/usr/bin/env bash
# tests/gpu/prepare_device.sh [BUILD_DIR] [OUT_DIR]: lays out what
# tests/gpu/device_check.sh needs on a GPU machine that has the CUDA driver,
# NCCL, nvcc and PyTorch but none of replay's other dependencies (Cap'n Proto,
# zstd, Open MPI) and no package registry.
#
# Builds (in BUILD_DIR, default build-gpu: Release, CUDA on) the replay command,
# the preload, the CUDA + NCCL trainer, the NCCL allreduce sweep and the gpu
# tests, then copies them, stripped, into OUT_DIR (default .device, which git
# ignores) in the layout of a build tree, with the shared libraries they need
# beyond the C and C++ runtimes, CUDA and NCCL (lib/) and Open MPI's
# components, help files and C headers (openmpi/), so that the programs run
# there as MPI singletons without an Open MPI installation. With the host NCCL
# stand-in it also records and shrinks an NCCL job into shrink/ (the reduced
# trace and its repro.c, built too). Prints the size, which must stay under the
# 64 MiB a device run carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
out=${2:-.device}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DREPLAY_WITH_CUDA=ON >/dev/null
fi
targets=(replay_cli replay_drive replay_interpose nccl_train nccl_allreduce_sweep gpu_nccl_gpu_test
         gpu_nccl_curand_program counting_profiler)
# The host NCCL stand-in and a program on it, to prepare a `replay shrink` repro (below).
stand_in=0
all_targets=$(cmake --build "$build" --target help)  # whole, before grep -q (pipefail)
if grep -q nccl_device_program <<<"$all_targets"; then
  targets+=(nccl_host cuda_host nccl_device_program)
  stand_in=1
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

rm -rf "$out"
mkdir -p "$out/lib" "$out/openmpi/lib" "$out/openmpi/share" "$out/examples/nccl_train" "$out/bench" "$out/tests"
place() {  # place SRC DEST: a stripped copy
  cp "$1" "$2"
  strip --strip-debug "$2"
}
place "$build/replay" "$out/replay"
place "$build/replay-drive" "$out/replay-drive"
place "$build/libreplay_interpose.so" "$out/libreplay_interpose.so"
place "$build/examples/nccl_train/nccl_train" "$out/examples/nccl_train/nccl_train"
place "$build/bench/nccl_allreduce_sweep" "$out/bench/nccl_allreduce_sweep"
place "$build/tests/gpu_nccl_gpu_test" "$out/tests/gpu_nccl_gpu_test"
place "$build/tests/gpu_nccl_curand_program" "$out/tests/gpu_nccl_curand_program"
place "$build/tests/nccl_host/libnccl-profiler-counting.so" "$out/tests/libnccl-profiler-counting.so"

# Open MPI, relocated: the components a singleton on one host uses (the
# libraries they load are copied with everyone's below). Components that need network stacks the GPU machine may lack
# (UCX, libfabric, verbs, PSM) stay behind; device_check.sh turns them off.
ompi_root=$(dirname "$(find /usr/lib -path '*openmpi/lib/openmpi3' -type d | head -1)")
[ -d "$ompi_root/openmpi3" ] || { echo "prepare_device.sh: Open MPI's component directory not found" >&2; exit 1; }
mkdir -p "$out/openmpi/lib/openmpi3"
for c in "$ompi_root"/openmpi3/mca_*.so; do
  deps=$(ldd "$c" 2>/dev/null)  # whole, before grep -q: under pipefail a pipe cut short would say "no match"
  if grep -qE 'libucp|libucs|libuct|libfabric|libibverbs|librdmacm|libpsm|libpmi\.so|libnl-' <<<"$deps"; then continue; fi
  cp "$c" "$out/openmpi/lib/openmpi3/"
done
cp -r /usr/share/openmpi/. "$out/openmpi/share/"
rm -f "$out/openmpi/share/"*.pc

# Shared libraries: everything the programs and components load, except what
# every Linux and every CUDA machine has.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libgcc_s|libstdc\+\+|libcuda\.so|libnccl\.so|libcudart|libcurand|libz\.so)'
elves=("$out/replay" "$out/replay-drive" "$out/libreplay_interpose.so" "$out/examples/nccl_train/nccl_train"
       "$out/bench/nccl_allreduce_sweep" "$out/tests/gpu_nccl_gpu_test" "$out/tests/gpu_nccl_curand_program"
       "$out"/openmpi/lib/openmpi3/*.so)
for e in "${elves[@]}"; do
  ldd "$e" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
done

# A repro.c of `replay shrink` for device_check.sh: NCCL refusing a send to a
# rank its communicator does not have, recorded at two ranks on the host
# stand-ins and shrunk to one; with the program built here against the
# toolkit's NCCL, for a GPU machine that cannot build it. Open MPI's C headers
# go along, for building it there.
if [ "$stand_in" = 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  shrink_work=$(mktemp -d /tmp/replay-prepare-XXXXXX)
  "$build/replay" record -o "$shrink_work/t" -- mpirun -np 2 --oversubscribe \
    "$build/tests/nccl_host/nccl_device_program" --steps 3 --bad-peer 1:2 >/dev/null 2>&1 || true
  LD_LIBRARY_PATH="$build/nccl_host:$build/nccl_host/cuda" "$build/replay" shrink "$shrink_work/t" -o "$out/shrink" \
    >"$shrink_work/shrink.log" 2>&1 || { cat "$shrink_work/shrink.log" >&2; echo "prepare_device.sh: replay shrink failed" >&2; exit 1; }
  cuda=${CUDA_HOME:-/usr/local/cuda}
  mpicc -o "$out/shrink/repro" "$out/shrink/repro.c" -I"$cuda/include" -L"$cuda/lib64" -L"$cuda/lib64/stubs" -lnccl -lcuda
  strip "$out/shrink/repro"
  mkdir -p "$out/openmpi/include"
  mpi_inc=$(mpicc --showme:incdirs | awk '{print $1}')
  for h in mpi.h mpi_portable_platform.h mpi-ext.h; do
    [ -f "$mpi_inc/$h" ] && cp "$mpi_inc/$h" "$out/openmpi/include/"
  done
  rm -rf "$shrink_work"
fi

du -sh "$out"
size=$(du -sm "$out" | cut -f1)
if [ "$size" -ge 60 ]; then
  echo "prepare_device.sh: $out is ${size} MiB; a device run carries at most 64 MiB with the working tree" >&2
  exit 1
fi
