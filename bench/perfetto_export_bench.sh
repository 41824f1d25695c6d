#!/usr/bin/env bash
# perfetto_export_bench.sh: `replay export` of two large traces as Perfetto's
# JSON (--format perfetto) and protobuf (--format pftrace) forms: bytes written,
# wall seconds (median of ROUNDS, the two forms alternating) and peak RSS
# (the largest of the rounds, from /usr/bin/time).
#
# The traces, recorded at level meta: the example trainer at 4 ranks for 7,000
# steps (collectives on three communicators, non-blocking point-to-point and
# collectives, so lanes and both kinds of arrow), and 400,000 8-byte
# allreduces at 2 ranks (bench/mpi_allreduce_loop).
#
# Usage: bench/perfetto_export_bench.sh [ROUNDS]     (default 3)
#        BUILD=build (default) names the build directory; BEFORE=PATH adds a
#        column for another `replay` binary's JSON export, e.g. an older build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
build=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$PWD/$build/replay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source bench/lib.sh

"$replay" record --level meta -o "$work/train" -- mpirun -np 4 --oversubscribe \
  "$PWD/$build/examples/mpi_train/mpi_train" --steps 7000 --ckpt-every 0 --ckpt-dir "$work" >/dev/null 2>&1
"$replay" record --level meta -o "$work/loop" -- mpirun -np 2 --oversubscribe \
  "$PWD/$build/bench/mpi_allreduce_loop" 8 400000 >/dev/null 2>&1

# export NAME BINARY FORMAT TRACE: one run; appends "seconds rss_kib" to $work/NAME.
export_once() {
  local name=$1 bin=$2 format=$3 trace=$4
  /usr/bin/time -f '%e %M' -o "$work/time" "$bin" export "$trace" --format "$format" -o "$work/$name.out" >/dev/null
  cat "$work/time" >>"$work/$name"
  stat -c %s "$work/$name.out" >"$work/$name.bytes"
}

printf '%-22s %-12s %12s %9s %10s\n' trace form bytes seconds "peak RSS"
for trace in train loop; do
  events=$("$replay" info "$work/$trace" | awk '$2 ~ /^complete/ {n += $4} END {print n}')
  forms=("json:$replay:perfetto" "pftrace:$replay:pftrace")
  [[ -n "${BEFORE:-}" ]] && forms+=("json-before:$BEFORE:perfetto")
  for ((i = 0; i < rounds; i++)); do
    for f in "${forms[@]}"; do
      IFS=: read -r label bin format <<<"$f"
      export_once "$trace-$label" "$bin" "$format" "$work/$trace"
    done
  done
  for f in "${forms[@]}"; do
    IFS=: read -r label bin format <<<"$f"
    secs=$(awk '{print $1}' "$work/$trace-$label" | median)
    rss=$(awk '{print $2}' "$work/$trace-$label" | sort -n | tail -1)
    printf '%-22s %-12s %12s %9s %7s MiB\n' "$trace ($(du -sh "$work/$trace" | cut -f1), $events ev)" "$label" \
      "$(cat "$work/$trace-$label.bytes")" "$secs" "$((rss / 1024))"
  done
done
