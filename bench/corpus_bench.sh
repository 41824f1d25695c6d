#!/usr/bin/env bash
# corpus_bench.sh: the cost of recording and re-running the programs of the
# corpus (tests/e2e/corpus_e2e_test.cpp), real MPI programs from Debian.
#
# For each program, at RANKS ranks: ROUNDS interleaved pairs of a plain run
# and a run recorded at level data (median wall times and the median of the
# per-pair ratios), the trace's size per rank (the largest rank directory),
# and `replay rerun --rank 0` against the recorded run (median wall times).
#
# Usage: bench/corpus_bench.sh [ROUNDS] [RANKS]    (defaults 5, 4)
#        BUILD=build (default) names the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
ranks=${2:-4}
build=${BUILD:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$PWD/$build/replay
src=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun="mpirun -np $ranks --oversubscribe --bind-to none"

source bench/lib.sh
seconds() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

# LAMMPS's own "melt" example, 100 steps (as the corpus test runs it).
lammps_input() {
  printf 'units lj\natom_style atomic\nlattice fcc 0.8442\nregion box block 0 6 0 6 0 6\ncreate_box 1 box\n' >in.melt
  printf 'create_atoms 1 box\nmass 1 1.0\nvelocity all create 3.0 87287 loop geom\npair_style lj/cut 2.5\n' >>in.melt
  printf 'pair_coeff 1 1 1.0 1.0 2.5\nneighbor 0.3 bin\nneigh_modify every 20 delay 0 check no\n' >>in.melt
  printf 'fix 1 all nve\nthermo 25\nrun 100\n' >>in.melt
}

# name | environment | set-up | command of one rank
programs=(
  "numpy+mpi4py trainer|||/usr/bin/python3 $src/tests/e2e/programs/mpi4py_train.py --steps 20"
  "mpi4py.bench helloworld|||/usr/bin/python3 -m mpi4py.bench helloworld"
  "mpi4py.bench ringtest|||/usr/bin/python3 -m mpi4py.bench ringtest -n 1024 -l 200"
  "PT-Scotch dgpart|SCOTCH_PTHREAD_NUMBER=1|gmk_m2 80 80 mesh.grf|dgpart $ranks mesh.grf parts.map"
  "LAMMPS melt, 100 steps||lammps_input|lmp -in in.melt -log none"
)

printf 'ranks %d, rounds %d (interleaved pairs; medians)\n\n' "$ranks" "$rounds"
printf '%-26s %9s %9s %7s %12s %9s %9s %7s\n' program plain recorded ratio "trace/rank" recorded "rerun -r0" ratio
for entry in "${programs[@]}"; do
  IFS='|' read -r name env setup cmd <<<"$entry"
  dir=$work/$(echo "$name" | tr -c 'a-zA-Z0-9' _)
  mkdir -p "$dir"
  (
    cd "$dir"
    [[ -n "$env" ]] && export "${env?}"
    [[ -n "$setup" ]] && $setup >/dev/null
    plain=() recorded=() ratios=() rec_times=() rerun=()
    for ((r = 0; r < rounds; r++)); do
      p=$(seconds $mpirun $cmd)
      rm -rf t
      q=$(seconds "$replay" record --level data -o t -- $mpirun $cmd)
      plain+=("$p") recorded+=("$q") ratios+=("$(echo "$q / $p" | bc -l)")
      rerun+=("$(seconds "$replay" rerun t --rank 0 -- $cmd)")
    done
    size=$(du -sb t/rank-* | sort -n | tail -1 | cut -f1)
    pm=$(printf '%s\n' "${plain[@]}" | median)
    qm=$(printf '%s\n' "${recorded[@]}" | median)
    rm_=$(printf '%s\n' "${rerun[@]}" | median)
    printf '%-26s %8.3fs %8.3fs %6.2fx %10.1fKiB %8.3fs %8.3fs %6.2fx\n' "$name" "$pm" "$qm" \
      "$(printf '%s\n' "${ratios[@]}" | median)" "$(echo "$size / 1024" | bc -l)" "$qm" "$rm_" \
      "$(echo "$rm_ / $qm" | bc -l)"
  )
done
