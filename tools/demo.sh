#!/usr/bin/env bash
# The replay demo: records a real 4-rank training job that goes wrong, shows
# what the trace holds, diagnoses it, and re-runs one rank alone from the trace.
# Installs missing packages and builds first.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$PWD/build/replay
train=$PWD/build/examples/mpi_train/mpi_train
out=$(mktemp -d /tmp/replay-demo-XXXXXX)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Record a 4-rank data-parallel training job in which rank 2 produces a NaN at step 3"
$replay record -o "$out/nan" -- mpirun -np 4 --oversubscribe "$train" --steps 6 --fault nan:rank=2,step=3 \
  | grep -E 'step [2-4] global' || true

step "2. What the trace holds"
$replay info "$out/nan"

step "3. The gradient allreduce of step 3, as each rank entered it (send fingerprint and NaN count)"
for r in 0 1 2 3; do
  $replay dump "$out/nan" --rank "$r" | grep -m 1 -E 'MPI_Allreduce.*seq=4 count=2048' || true
done

step "4. What went wrong: replay check"
$replay check "$out/nan" || true

step "5. Record a job that hangs: rank 1 skips the gradient allreduce at step 3, then check it"
timeout -s TERM 15 $replay record -o "$out/hang" -- \
  mpirun -np 4 --oversubscribe "$train" --steps 6 --fault hang:rank=1,step=3 >/dev/null 2>&1 || true
$replay info "$out/hang"
$replay check "$out/hang" || true

step "6. Record an unseeded job at level data, then re-run rank 2 alone (no mpirun, no peers)"
(cd "$out" && $replay record --level data -o "$out/unseeded" -- \
  mpirun -np 4 --oversubscribe "$train" --steps 4 --ckpt-every 0 --fault unseeded) | grep 'rank 2 ' || true
echo "-- re-run:"
(cd "$out" && $replay rerun "$out/unseeded" --rank 2 -- "$train" --steps 4 --ckpt-every 0 --fault unseeded) \
  | grep -E 'rank 2 |replay rerun' || true

step "7. A bug-report bundle of the hang, and a page to look at"
$replay bundle "$out/hang" -o "$out/hang.rpb"
$replay report "$out/hang" -o "$out/hang.html"

echo
echo "Traces are in $out. Try: $replay dump $out/hang --rank 1 | tail; open $out/hang.html"
