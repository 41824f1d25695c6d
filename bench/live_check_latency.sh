#!/usr/bin/env bash
# live_check_latency.sh: how soon `replay check --live` names the missing rank
# of a job that is hung right now.
#
# Each round records examples/mpi_train at RANKS ranks with rank 2 skipping a
# collective at step 2 (--fault hang:rank=2,step=2), runs
# `replay check --live --json` every POLL_MS milliseconds until it reports a
# finding, and prints the seconds from the moment the last rank got stuck (the
# finding's stuck_since_realtime_ns) to the moment the report was in hand. A
# report comes no sooner than check's --min-wait (default 0.5 s); the rest is
# the polling interval and the time one check takes. Then the job is killed.
#
# Usage: bench/live_check_latency.sh [ROUNDS] [RANKS]     (defaults 5 and 4)
#        BUILD=build (default) names the build directory; POLL_MS (100) the
#        interval between two checks.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
ranks=${2:-4}
build=${BUILD:-build}
poll_ms=${POLL_MS:-100}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
replay=$build/replay
train=$build/examples/mpi_train/mpi_train
[ -x "$replay" ] && [ -x "$train" ] || { echo "live_check_latency.sh: build $replay and $train first" >&2; exit 2; }
work=$(mktemp -d)
job=""
cleanup() {
  [ -n "$job" ] && kill -KILL -- "-$job" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

poll_s=$(awk -v m="$poll_ms" 'BEGIN {printf "%.3f", m / 1000}')
latencies=()
for ((r = 1; r <= rounds; r++)); do
  dir=$work/t$r
  # A session of its own, so that the whole job can be killed; a minute at most.
  setsid timeout -s KILL 60 "$replay" record -o "$dir" -- \
    mpirun -np "$ranks" --oversubscribe "$train" --ckpt-every 0 --steps 200 --fault hang:rank=2,step=2 \
    >"$work/log$r" 2>&1 &
  job=$!
  latency=""
  for ((i = 0; i < 30000 / poll_ms; i++)); do
    sleep "$poll_s"
    out=$("$replay" check --live --json "$dir" 2>/dev/null) && continue  # exit 0: nothing found yet
    stuck=$(grep -o '"stuck_since_realtime_ns": *[0-9]*' <<<"$out" | head -1 | grep -o '[0-9]*$' || true)
    [ -n "$stuck" ] || continue  # not a trace yet
    now=$(date +%s%N)
    latency=$(awk -v a="$now" -v b="$stuck" 'BEGIN {printf "%.3f", (a - b) / 1e9}')
    break
  done
  kill -TERM -- "-$job" 2>/dev/null || true
  sleep 0.5
  kill -KILL -- "-$job" 2>/dev/null || true
  wait "$job" 2>/dev/null || true
  job=""
  if [ -z "$latency" ]; then
    echo "round $r: no finding in 30 s of polling; the job's last lines:" >&2
    tail -5 "$work/log$r" >&2
    exit 1
  fi
  echo "round $r: found ${latency} s after the hang"
  latencies+=("$latency")
done
sorted=$(printf '%s\n' "${latencies[@]}" | sort -g)
printf 'median %.3f s, min %.3f, max %.3f, %d rounds\n' "$(median <<<"$sorted")" "$(head -1 <<<"$sorted")" \
  "$(tail -1 <<<"$sorted")" "$rounds"
