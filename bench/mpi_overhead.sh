#!/usr/bin/env bash
# mpi_overhead.sh: what recording costs an MPI job, measured side by side.
#
# For each workload (8-byte and 1 MiB MPI_Allreduce loops, the example
# trainer) and each level (meta, hash, data), runs interleaved pairs: a plain
# run, then the same run recorded, ROUNDS times, rotating the level order. It
# reports the median time of each, the median of the per-pair ratios, the added
# time per call (median recorded minus median plain, divided by calls) and the
# trace bytes per operation. Ratios come from pairs run back to back because a
# small shared machine drifts (see shared/research/peer-overhead-mpi.md).
#
# Usage: bench/mpi_overhead.sh [ROUNDS] [RANKS]     (defaults 7 and 4)
#        BUILD=build (default) names the build directory; SMALL_CALLS (100000),
#        LARGE_CALLS (1000) and TRAIN_STEPS (200) size the workloads. With more
#        ranks than cores each call waits for the scheduler: size them down.
#        MPI_ARGS adds mpirun options, e.g. "--mca btl tcp,self" to put the
#        ranks' traffic on TCP (loopback) instead of shared memory, as between
#        nodes. SUITE=nccl times ncclAllReduce loops on the host NCCL stand-in
#        (bench/nccl_allreduce_loop, host memory) instead: 8 bytes and
#        LARGE_BYTES (default 64 MiB), no trainer. LEVELS (default
#        "meta hash data") picks the levels; LEVEL+SCAN records at LEVEL with
#        REPLAY_NAN_SCAN=SCAN, e.g. LEVELS="hash hash+all hash+hashed".
#        WORKLOADS (default "allreduce-8B allreduce-1MiB trainer") picks the
#        workloads by name.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
ranks=${2:-4}
build=${BUILD:-build}
small=${SMALL_CALLS:-100000}
large=${LARGE_CALLS:-1000}
steps=${TRAIN_STEPS:-200}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
loop=$build/bench/mpi_allreduce_loop
train=$build/examples/mpi_train/mpi_train
replay=$build/replay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun="mpirun -np $ranks --oversubscribe --bind-to none ${MPI_ARGS:-}"

# Workloads: name, command, calls per rank (for per-call figures; 0: none), time source.
workloads=(
  "allreduce-8B|$loop 8 $small|$small|self"
  "allreduce-1MiB|$loop 1048576 $large|$large|self"
  "trainer|$train --steps $steps --params 4096 --ckpt-every 0|0|wall"
)
if [[ "${SUITE:-mpi}" == nccl ]]; then
  loop=$build/bench/nccl_allreduce_loop
  large_bytes=${LARGE_BYTES:-67108864}
  workloads=(
    "nccl-8B|$loop 8 $small|$small|self"
    "nccl-${large_bytes}B|$loop $large_bytes $large|$large|self"
  )
fi

source bench/lib.sh

run() {  # run NAME COMMAND SOURCE [LEVEL]: prints seconds
  local cmd=$2 src=$3 level=${4:-}
  local start end out
  start=$(date +%s.%N)
  if [[ -z "$level" ]]; then
    out=$($mpirun $cmd 2>/dev/null)
  else
    rm -rf "$work/t"
    local env=()
    if [[ "$level" == *+* ]]; then
      env=("REPLAY_NAN_SCAN=${level#*+}")
      level=${level%%+*}
    fi
    out=$(env "${env[@]}" $replay record --level "$level" -o "$work/t" -- $mpirun $cmd 2>/dev/null)
  fi
  end=$(date +%s.%N)
  if [[ "$src" == self ]]; then
    echo "$out" | grep -E '^[0-9.]+$' | head -1
  else
    echo "$end - $start" | bc -l
  fi
}

trace_bytes() { du -sb "$work/t" | awk '{print $1}'; }

read -r -a levels <<<"${LEVELS:-meta hash data}"
printf '%-15s %-5s %11s %11s %13s %14s %14s\n' workload level plain_s recorded_s ratio_median added_ns/call trace_B/op
for w in "${workloads[@]}"; do
  IFS='|' read -r name cmd calls src <<<"$w"
  [[ " ${WORKLOADS:-$name} " == *" $name "* ]] || continue
  declare -A plain=() rec=() ratio=() bytes=()
  for ((r = 0; r < rounds; r++)); do
    # Rotate the order of levels round by round.
    for ((k = 0; k < ${#levels[@]}; k++)); do
      lv=${levels[$(((r + k) % ${#levels[@]}))]}
      p=$(run "$name" "$cmd" "$src")
      q=$(run "$name" "$cmd" "$src" "$lv")
      plain[$lv]+="$p "
      rec[$lv]+="$q "
      ratio[$lv]+="$(echo "$q / $p" | bc -l) "
      bytes[$lv]=$(trace_bytes)
    done
  done
  for lv in "${levels[@]}"; do
    pm=$(echo ${plain[$lv]} | tr ' ' '\n' | median)
    qm=$(echo ${rec[$lv]} | tr ' ' '\n' | median)
    rm_=$(echo ${ratio[$lv]} | tr ' ' '\n' | median)
    if [[ "$calls" != 0 ]]; then
      added=$(echo "($qm - $pm) / $calls * 1000000000" | bc -l)
      per_op=$(echo "${bytes[$lv]} / ($calls * $ranks)" | bc -l)
    else
      added=nan
      per_op=nan
    fi
    printf '%-15s %-5s %11.4f %11.4f %13.3f %14.1f %14.1f\n' "$name" "$lv" "$pm" "$qm" "$rm_" "$added" "$per_op"
  done
  unset plain rec ratio bytes
done
