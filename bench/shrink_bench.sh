#!/usr/bin/env bash
# shrink_bench.sh: how long `replay shrink` takes and how small it makes a job,
# for every fault of the example trainers (mpi_train, and nccl_train on the host
# NCCL stand-in) at 4 and 8 ranks, and for a synthetic 64-rank hang
# (bench/shrink_job.cpp), and for LAMMPS (Debian's lmp) at 4 ranks hung from
# outside: its rank 1 stopped (SIGSTOP) mid-run, the job then ended.
#
# Each job is recorded once (a hang is stopped by `timeout` after HANG_S
# seconds), then shrunk with --budget BUDGET; a row per job: what `replay
# check` names first, the seconds shrink took, ranks and calls before and
# after (calls besides MPI_Init and MPI_Finalize; the busiest rank's in
# parentheses), candidates written and driven; or why nothing was written.
#
# Usage: bench/shrink_bench.sh [RANKS...]     (default: 4 8; the 64-rank job always)
#        BUILD=build  BUDGET=600  HANG_S=12  SYNTHETIC=64 (0: skip it)  TRAINERS="mpi nccl"
#        FAULTS="hang ..." (default: every fault of each trainer)  LAMMPS=1 (0: skip it)
#        LAMMPS_RUN_S=2  seconds LAMMPS runs (after its first step) before its rank 1 is stopped
set -euo pipefail
cd "$(dirname "$0")/.."
build=$PWD/${BUILD:-build}
budget=${BUDGET:-600}
hang_s=${HANG_S:-12}
synthetic=${SYNTHETIC:-64}
trainers=${TRAINERS:-mpi nccl}
only_faults=${FAULTS:-}
lammps=${LAMMPS:-1}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4 8)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$build/replay
work=$(mktemp -d /tmp/replay-shrink-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
nccl_libs="$build/nccl_host:$build/nccl_host/cuda"

row() { printf '%-7s %-9s %5s  %-62s %7s  %-18s %-18s %s\n' "$@"; }
row trainer fault ranks "check names first" "seconds" "ranks before>after" "calls before>after" "candidates/driven"

# shrink_one NAME TRACE [ENV...]: shrinks TRACE and prints its row.
shrink_one() {
  local trainer=$1 fault=$2 ranks=$3 trace=$4
  shift 4
  local first out s e secs
  first=$({ "$replay" check --json "$trace" 2>/dev/null || true; } | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = [x for x in d["findings"] if x["kind"] not in ("straggler", "config")]
print((f[0]["kind"] + " " + f[0]["title"])[:62] if f else "nothing")' || echo unreadable)
  s=$(date +%s.%N)
  out=$(env "$@" "$replay" shrink "$trace" -o "$work/out-$trainer-$fault-$ranks" --budget "$budget" 2>&1 || true)
  e=$(date +%s.%N)
  secs=$(printf '%.1f' "$(echo "$e - $s" | bc -l)")
  local summary
  summary=$(grep -E ' ranks -> ' <<<"$out" | head -1 || true)
  if [[ $summary =~ ([0-9]+)\ ranks\ -\>\ ([0-9]+),\ ([0-9]+)\ calls\ -\>\ ([0-9]+)\ \(([0-9]+)\ on\ the\ busiest\ rank\),\ ([0-9]+)\ candidates,\ ([0-9]+)\ driven ]]; then
    local m=("${BASH_REMATCH[@]}") stopped=""
    grep -q 'stopped by --budget' <<<"$summary" && stopped=" (budget)"
    row "$trainer" "$fault" "$ranks" "$first" "$secs" "${m[1]} > ${m[2]}" "${m[3]} > ${m[4]} (${m[5]})" \
      "${m[6]}/${m[7]}$stopped"
  else
    local why
    why=$(grep -E 'replay shrink:' <<<"$out" | tail -1 | sed 's/^replay shrink: //' | cut -c1-80)
    row "$trainer" "$fault" "$ranks" "$first" "$secs" "-" "-" "$why"
  fi
}

for trainer in $trainers; do
  if [ "$trainer" = mpi ]; then
    program=$build/examples/mpi_train/mpi_train
    faults=(hang mismatch order nan unseeded race crash)
    env=()
  else
    program=$build/examples/nccl_train/nccl_train_host
    faults=(hang mismatch order nan unseeded crash device)
    env=("LD_LIBRARY_PATH=$nccl_libs")
    [ -x "$program" ] || { echo "(no $program: NCCL rows skipped)"; continue; }
  fi
  for ranks in "${sizes[@]}"; do
    for fault in "${faults[@]}"; do
      [[ -z $only_faults || " $only_faults " == *" $fault "* ]] || continue
      spec=$fault
      case $fault in hang|mismatch|order|nan|crash) spec="$fault:rank=1,step=3" ;; device) spec="device:rank=1" ;; esac
      trace=$work/$trainer-$fault-$ranks
      (cd "$work" && timeout -s TERM "$hang_s" "$replay" record -o "$trace" -- \
        mpirun -np "$ranks" --oversubscribe "$program" --steps 6 --ckpt-every 0 --fault "$spec" >/dev/null 2>&1) || true
      shrink_one "$trainer" "$fault" "$ranks" "$trace" "${env[@]}"
    done
  done
done

if [ "$synthetic" -gt 0 ]; then
  "$build/bench/shrink_job" --dir="$work/synthetic" --ranks="$synthetic" --steps=6 --hang-step=3 >/dev/null
  shrink_one synth hang "$synthetic" "$work/synthetic"
fi

if [ "$lammps" = 1 ] && command -v lmp >/dev/null; then
  # LAMMPS melts a crystal until its rank 1 is stopped; 3 s later every rank
  # is sent SIGTERM (rank 1 as it resumes), so that its neighbours die waiting.
  printf 'units lj\natom_style atomic\nlattice fcc 0.8442\nregion box block 0 10 0 10 0 10\ncreate_box 1 box\ncreate_atoms 1 box\nmass 1 1.0\nvelocity all create 3.0 87287 loop geom\npair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\nneighbor 0.3 bin\nneigh_modify every 20 delay 0 check no\nfix 1 all nve\nthermo 100\nrun 100000000\n' >"$work/in.melt"
  (cd "$work" && "$replay" record -o "$work/lammps" -- mpirun -np 4 --oversubscribe lmp -in "$work/in.melt" -log none \
    >"$work/lammps.log" 2>&1) &
  rec=$!
  for _ in $(seq 120); do grep -q '^ *Step' "$work/lammps.log" && break; sleep 0.5; done
  sleep "${LAMMPS_RUN_S:-2}"
  others=() stopped=
  for q in $(pgrep -f -- "-in $work/in.melt"); do
    r=$(tr '\0' '\n' <"/proc/$q/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] || continue
    if [ "$r" = 1 ]; then stopped=$q; else others+=("$q"); fi
  done
  kill -STOP "$stopped"; sleep 3
  kill -TERM "${others[@]}" "$stopped"; kill -CONT "$stopped"
  wait "$rec" || true
  shrink_one lammps stopped 4 "$work/lammps"
fi
