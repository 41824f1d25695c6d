#!/usr/bin/env bash
# preload_compare.sh: two builds of the preload on one MPI workload, side by
# side. Runs the workload plain, under preload A and under preload B, in turn,
# ROUNDS times, and prints the median of each and the added time per call of A
# and B. Use it to measure a change to the recorder: A is a build of the
# commit before it, B this tree.
#
# Usage: bench/preload_compare.sh ROUNDS RANKS LEVEL A.so B.so [BYTES CALLS]
#   LEVEL        meta, hash or data
#   BYTES CALLS  the MPI_Allreduce loop's message size and calls (8 200000)
#   BUILD=build  where bench/mpi_allreduce_loop is
#   EVICT_KB=N   write N KiB before each call, emptying the caches as a real
#                job's compute does, and time the calls alone (2048 for this
#                host's 1 MiB L2; see mpi_allreduce_loop.cpp)
# Example, before/after a change to the MPI wrappers:
#   git worktree add /tmp/v0 HEAD~1 && cmake -S /tmp/v0 -B /tmp/v0/build && cmake --build /tmp/v0/build --target replay_interpose
#   bench/preload_compare.sh 9 1 meta /tmp/v0/build/libreplay_interpose.so build/libreplay_interpose.so
set -euo pipefail
cd "$(dirname "$0")/.."

if (( $# < 5 )); then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
rounds=$1 ranks=$2 level=$3 a=$(realpath "$4") b=$(realpath "$5")
bytes=${6:-8} calls=${7:-200000}
loop=${BUILD:-build}/bench/mpi_allreduce_loop
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun="mpirun -np $ranks --oversubscribe --bind-to none"

run() {  # run PRELOAD|plain: prints rank 0's seconds
  if [[ $1 == plain ]]; then
    $mpirun "$loop" "$bytes" "$calls" ${EVICT_KB:+"$EVICT_KB"}
  else
    rm -rf "$work/t"
    LD_PRELOAD=$1 REPLAY_DIR=$work/t REPLAY_LEVEL=$level \
      $mpirun -x LD_PRELOAD -x REPLAY_DIR -x REPLAY_LEVEL "$loop" "$bytes" "$calls" ${EVICT_KB:+"$EVICT_KB"}
  fi
}

for ((r = 0; r < rounds; ++r)); do
  echo "plain $(run plain)"
  echo "A $(run "$a")"
  echo "B $(run "$b")"
done | awk -v calls="$calls" -v level="$level" -v ranks="$ranks" -v bytes="$bytes" '
  { t[$1, ++n[$1]] = $2 }
  function median(k,   i, j, m, v, tmp) {
    m = n[k]
    for (i = 1; i <= m; ++i) v[i] = t[k, i]
    for (i = 2; i <= m; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  END {
    p = median("plain")
    printf "MPI_Allreduce %d B x %d, %d rank(s), level %s, median of %d rounds\n", bytes, calls, ranks, level, n["plain"]
    printf "%-6s %10s %10s %14s\n", "", "seconds", "ratio", "added ns/call"
    printf "%-6s %10.4f %10s %14s\n", "plain", p, "1", "-"
    for (k = 1; k <= 2; ++k) {
      name = k == 1 ? "A" : "B"
      s = median(name)
      printf "%-6s %10.4f %10.3f %14.1f\n", name, s, s / p, (s - p) * 1e9 / calls
    }
  }'
