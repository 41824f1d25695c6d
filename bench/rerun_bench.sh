#!/usr/bin/env bash
# rerun_bench.sh: how long `replay rerun --rank R` takes against the recorded
# run it re-runs, and what level data stores per rank.
#
# Records the example trainer at level data once (RANKS ranks), then times,
# ROUNDS times interleaved, a plain run of the job and a re-run of rank 1 alone,
# and prints the medians, their ratio, and the payload bytes the recording
# stored for rank 1 against the bytes it received.
#
# Usage: bench/rerun_bench.sh [ROUNDS] [RANKS] [STEPS]    (defaults 7, 4, 300)
#        BUILD=build (default) names the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
ranks=${2:-4}
steps=${3:-300}
build=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$PWD/$build/replay
train=$PWD/$build/examples/mpi_train/mpi_train
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args="--steps $steps --params 4096 --ckpt-every 0 --fault unseeded"
mpirun="mpirun -np $ranks --oversubscribe --bind-to none"

source bench/lib.sh
seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

rec_s=$(cd "$work" && seconds "$replay" record --level data -o "$work/t" -- $mpirun "$train" $args)
plain=() rerun=()
for ((r = 0; r < rounds; r++)); do
  plain+=("$(cd "$work" && seconds $mpirun "$train" $args)")
  rerun+=("$(cd "$work" && seconds "$replay" rerun "$work/t" --rank 1 -- "$train" $args)")
done
pm=$(printf '%s\n' "${plain[@]}" | median)
rm_=$(printf '%s\n' "${rerun[@]}" | median)
stored=$("$replay" info --json "$work/t" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([r for r in d["ranks"] if r["rank"]==1][0]["payload_bytes"])')
received=$(( steps * (4096 + 1) * 4 ))
printf 'ranks %d, steps %d, rounds %d\n' "$ranks" "$steps" "$rounds"
printf '%-28s %10.3f s\n' "recording at level data" "$rec_s"
printf '%-28s %10.3f s (median)\n' "plain run of the job" "$pm"
printf '%-28s %10.3f s (median)\n' "rerun --rank 1 alone" "$rm_"
printf '%-28s %10.3f\n' "rerun / plain" "$(echo "$rm_ / $pm" | bc -l)"
printf '%-28s %10d B stored for ~%d B of gradients received\n' "rank 1 payloads" "$stored" "$received"
