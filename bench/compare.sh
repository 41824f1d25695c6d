#!/usr/bin/env bash
# compare.sh: runs two builds of one benchmark alternately (A, B, A, B, ...) and
# prints, per column, the median over the rounds of each build's summary row.
# Alternating keeps slow drifts of a shared 2-CPU machine from landing on one
# side only.
#
# Usage: bench/compare.sh ROUNDS ROW BENCH_A BENCH_B [ARGS...]
#   ROW    the first word of the row to take from each run's output, e.g. "median"
#          (trace_throughput_bench) or "paced" (the first paced row of
#          trace_append_bench); numeric cells are collected by position.
# Each run starts once other processes use less than MAX_LOAD CPUs (default
# 0.25; waiting at most WAIT_IDLE seconds, default 120), and a run whose row ends
# with more than MAX_LOAD "others' CPUs" is run again, up to 5 times.
# Example, before/after a change to the writer:
#   bench/compare.sh 7 median old/bench/trace_throughput_bench build/bench/trace_throughput_bench --reps=1
set -euo pipefail

if (( $# < 4 )); then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
rounds=$1 row=$2 a=$3 b=$4
max_load=${MAX_LOAD:-0.25}
shift 4
wait_s=${WAIT_IDLE:-120}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# Waits (at most WAIT_IDLE seconds) until other processes use less than
# MAX_LOAD CPUs, measured over 2 s, so that runs start on an idle machine.
wait_idle() {
  local hz deadline=$((SECONDS + wait_s)) a b
  hz=$(getconf CLK_TCK)
  while ((SECONDS < deadline)); do
    a=$(busy_ticks); sleep 2; b=$(busy_ticks)
    awk -v d=$((b - a)) -v hz="$hz" -v m="$max_load" 'BEGIN { exit !(d / hz / 2 <= m) }' && return
  done
}

for ((i = 1; i <= rounds; ++i)); do
  for side in A B; do
    bin=$a
    [[ $side == B ]] && bin=$b
    # A run whose last column (others' CPUs) says the machine was busy is redone,
    # a few times at most.
    for ((try = 0; try < 5; ++try)); do
      wait_idle
      "$bin" "$@" > "$out/run"
      line=$(awk -v r="$row" '$1 == r { print; exit }' "$out/run")
      busy=$(echo "$line" | awk '{ print $NF }')
      awk -v b="$busy" -v m="$max_load" 'BEGIN { exit !(b + 0 <= m + 0) }' && break
      echo "$side $i: (others kept $busy CPUs busy: again) $line"
    done
    # The table's heading is the line above its rule of dashes.
    [[ -f "$out/heading" ]] || awk '/^-+$/ { print prev; exit } { prev = $0 }' "$out/run" > "$out/heading"
    echo "$side $i: $line"
    echo "$line" >> "$out/$side"
  done
done

median() {  # median of column $1 of file $2 (numeric cells only, rows with a value there)
  awk -v c="$1" '{ n = split($0, f, /  +/); if (c <= n && f[c] ~ /^-?[0-9.]+$/) print f[c] }' "$2" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
cols=$(awk '{ n = split($0, f, /  +/); if (n > m) m = n } END { print m }' "$out/A")
echo
printf "%-26s%12s%12s%8s\n" "column ($rounds rounds)" "median A" "median B" "B/A"
for ((c = 2; c <= cols; ++c)); do
  ma=$(median "$c" "$out/A"); mb=$(median "$c" "$out/B")
  [[ -z "$ma" || -z "$mb" ]] && continue
  name=$(awk -v c="$c" '{ split($0, f, /  +/); print f[c] }' "$out/heading")
  ratio=$(awk -v x="$ma" -v y="$mb" 'BEGIN { if (x != 0) printf "%.3f", y / x; else print "-" }')
  printf "%-26s%12s%12s%8s\n" "$name" "$ma" "$mb" "$ratio"
done
