#!/usr/bin/env bash
# wrapper_instructions.sh: the instructions the recorder adds to one MPI call,
# counted by Callgrind, for one or more builds of the preload side by side.
# Instruction counts do not depend on the load of the machine, so a change to
# the wrappers shows as a difference of a few instructions per call even on a
# shared, noisy host. One rank, an 8 B MPI_Allreduce loop; the count is of
# everything inside MPI_Allreduce (the wrapper, the real call, the appends),
# divided by the calls, with the unwrapped call's own count for reference.
#
# With COLD=1 it also counts the cache lines each call misses when the caches
# were emptied before it, as the compute between two calls of a real job
# empties them: the loop writes 2 MiB before each call (mpi_allreduce_loop's
# EVICT_KB), and Callgrind simulates a 1 MiB last-level cache. Each line the
# wrapper reads or writes then costs a trip to memory, whatever the
# instructions; `bench/preload_compare.sh` with EVICT_KB=2048 times it.
#
# Usage: bench/wrapper_instructions.sh LEVELS PRELOAD.so [PRELOAD.so ...]
#   LEVELS       comma-separated: meta,hash,data
#   CALLS=20000  calls per run;  BUILD=build  where bench/mpi_allreduce_loop is
#   COLD=1       also the lines missed per call, caches emptied before each
# Needs valgrind (apt-get install valgrind). Example, before/after a change:
#   git worktree add /tmp/v0 HEAD~1 && cmake -S /tmp/v0 -B /tmp/v0/build &&
#     cmake --build /tmp/v0/build --target replay_interpose
#   bench/wrapper_instructions.sh meta,hash /tmp/v0/build/libreplay_interpose.so build/libreplay_interpose.so
set -euo pipefail
cd "$(dirname "$0")/.."

if (( $# < 2 )); then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
command -v valgrind >/dev/null || { echo "wrapper_instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
levels=$1; shift
calls=${CALLS:-20000}
cold_calls=$(( calls / 10 ))
loop=${BUILD:-build}/bench/mpi_allreduce_loop
[[ -x $loop ]] || { echo "wrapper_instructions.sh: no $loop: build the bench targets first" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count PRELOAD|plain LEVEL: instructions per call inside MPI_Allreduce
count() {
  # The wrapper is MPI_Allreduce; unwrapped, the program calls the library's,
  # which Callgrind names PMPI_Allreduce (Open MPI's MPI_ names are aliases).
  local pre=(env) fn=PMPI_Allreduce
  if [[ $1 != plain ]]; then
    pre=(env "LD_PRELOAD=$(realpath "$1")" "REPLAY_DIR=$work/t" "REPLAY_LEVEL=$2")
    fn=MPI_Allreduce
  fi
  rm -rf "$work/t" "$work/cg.out"
  "${pre[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --toggle-collect="$fn" \
    "$loop" 8 "$calls" >/dev/null 2>"$work/err" ||
    { cat "$work/err" >&2; exit 1; }
  awk -v n="$calls" '/^(summary|totals):/ {printf "%d", $2 / n; exit}' "$work/cg.out"
  if [[ ${COLD:-0} == 1 ]]; then
    rm -rf "$work/t" "$work/cg.out"
    # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw: the last three are lines from memory.
    # The writer thread is held back (a ring that holds every call, no timed
    # flush), so that its work, which shares the simulated cache, does not
    # blur the count.
    "${pre[@]}" REPLAY_RING_KB=8192 REPLAY_FLUSH_MS=1000000 valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --toggle-collect="$fn" \
      --cache-sim=yes --LL=1048576,16,64 "$loop" 8 "$cold_calls" 2048 >/dev/null 2>"$work/err" ||
      { cat "$work/err" >&2; exit 1; }
    awk -v n="$cold_calls" '/^(summary|totals):/ {printf " %.1f", ($8 + $9 + $10) / n; exit}' "$work/cg.out"
  fi
  echo
}

read -r plain plain_lines <<<"$(count plain -)"
if [[ ${COLD:-0} == 1 ]]; then
  printf '%-6s %-60s %10s %10s %12s %10s\n' level preload "instr/call" added "cold lines" added
else
  printf '%-6s %-60s %10s %10s\n' level preload "instr/call" added
fi
IFS=, read -r -a lv <<<"$levels"
for level in "${lv[@]}"; do
  for p in "$@"; do
    read -r n lines <<<"$(count "$p" "$level")"
    if [[ ${COLD:-0} == 1 ]]; then
      printf '%-6s %-60s %10d %+10d %12.1f %+10.1f\n' "$level" "$p" "$n" $((n - plain)) "$lines" \
        "$(awk -v a="$lines" -v b="$plain_lines" 'BEGIN {print a - b}')"
    else
      printf '%-6s %-60s %10d %+10d\n' "$level" "$p" "$n" $((n - plain))
    fi
  done
done
if [[ ${COLD:-0} == 1 ]]; then
  printf '%-6s %-60s %10d %10s %12.1f\n' "-" "unwrapped MPI_Allreduce" "$plain" "" "$plain_lines"
else
  printf '%-6s %-60s %10d\n' "-" "unwrapped MPI_Allreduce" "$plain"
fi
