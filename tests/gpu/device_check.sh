#!/usr/bin/env bash
# tests/gpu/device_check.sh: the GPU checks and benchmarks of replay, in one run
# of under 8 minutes on a machine with one NVIDIA GPU, CUDA, NCCL and PyTorch
# and none of replay's other dependencies.
#
#   here:   tests/gpu/prepare_device.sh          # builds and lays out .device/ (~20 MiB)
#   there:  bash tests/gpu/device_check.sh       # with .device/ carried along
#
# Runs, each step bounded in time and each reported whether it passes or not:
#   1. the `gpu`-labelled tests (tests/gpu/nccl_gpu_test.cpp);
#   2. the CUDA + NCCL trainer (examples/nccl_train, one rank, one-rank
#      communicators) recorded at level data (NCCL operations completed on
#      the GPU, CUDA stream ordering through the driver hook), checked, re-run
#      alone from its trace, and the re-run's parameters compared bit for bit;
#      a NaN fault recorded and checked;
#   2b. a repro.c written by `replay shrink` (prepared on the host stand-ins):
#      built here against real NCCL, run at one rank, where NCCL must return
#      the error the recording had, and recorded, where check must name it;
#   3. PyTorch DistributedDataParallel with the NCCL backend (NCCL inside
#      libtorch_cuda.so, recorded through NCCL's profiler plugin interface;
#      tests/gpu/ddp_step.py): at world size 1, run plain, preloaded with
#      REPLAY_DISABLE=1, and recorded at levels hash and data, each with the
#      plain run's losses; its communicator in the trace; checked; re-run
#      alone from the data trace with the same losses bit for bit; under
#      torchrun --nproc-per-node 1; then two ranks on the one GPU (torchrun
#      --nproc-per-node 2, NCCL told they are on two hosts), recorded with a
#      profiler plugin of the user's chained (its events counted): its
#      collectives in the trace, checked, the plain run's losses, and
#      PyTorch's own Flight Recorder dumps of the same job imported and
#      checked; PyTorch's analyzer (fr_trace) run on those dumps and on
#      replay's Flight Recorder export of the trace, which check also finds
#      clean; NCCL's INFO log of each run in $OUT (nccl.*.log);
#   3a. a single-process NCCL + cuRAND program seeded from getrandom
#      (tests/gpu/nccl_curand_program.cpp), no launcher: recorded at level
#      data, its rank from its communicator, re-run alone with the same
#      output, cuRAND's kernels counted;
#   3b. a Triton kernel launched 50 times (tests/gpu/triton_step.py): its
#      launches, made from a module linked against libcuda, counted;
#   4. device fingerprints: an allreduce sweep with a NaN and an Inf in its
#      input, recorded at level data twice, device buffers fingerprinted by
#      the kernel and by the host from copies (REPLAY_DEVICE_HASH=copy): every
#      operation's fingerprints and NaN/Inf counts must be equal across the
#      two, whole (up to 64 KiB) and sampled, and its send and receive ones
#      within each (the same bytes, on a one-rank communicator); then the sweep at level hash with the kernel and with host
#      copies (REPLAY_DEVICE_HASH=copy), side by side; then a device reset
#      between two sweeps (cudaDeviceReset), recorded at level data: the same
#      results as without the preload, every operation completed, no error;
#   5. an ncclAllReduce size sweep (bench/nccl_allreduce_sweep), 8 B to
#      256 MiB, without the preload and recorded at meta, hash and data,
#      alternated over ROUNDS rounds: the overhead ratio per size, and the
#      microseconds each level adds per allreduce (targets: meta <= 2, hash
#      <= 5 up to 64 KiB), the rate at which device buffers are fingerprinted
#      (hash minus meta; target: 40% of HBM bandwidth) and received bytes are
#      copied to the host (data minus hash; target: 20 GB/s).
# Writes to $OUT (default ./device-out): summary.txt (one line per check and
# the benchmark table), log.txt (everything), sweep.txt, env.txt and a bundle
# of the trainer's trace.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${REPLAY_DEVICE_DIR:-$root/.device}
out=${OUT:-$root/device-out}
rounds=${ROUNDS:-3}
mkdir -p "$out"
work=$(mktemp -d /tmp/replay-device-XXXXXX)
summary=$out/summary.txt
log=$out/log.txt
: >"$summary"
: >"$log"
started=$(date +%s)

say() { echo "$*" | tee -a "$summary" >>"$log"; }
# step NAME SECONDS COMMAND...: runs COMMAND, its output to the log; PASS/FAIL line.
step() {
  local name=$1 secs=$2
  shift 2
  echo "=== $name: $*" >>"$log"
  local t0=$(date +%s)
  timeout -k 5 "$secs" bash -o pipefail -c "$*" >>"$log" 2>&1
  local rc=$?
  local verdict=PASS
  [ $rc -eq 0 ] || verdict="FAIL (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))"
  say "$(printf '%-44s %s  %ss' "$name" "$verdict" $(($(date +%s) - t0)))"
  return $rc
}

if [ ! -x "$carry/replay" ]; then
  echo "device_check.sh: no build at $carry: run tests/gpu/prepare_device.sh first and carry .device" | tee -a "$summary"
  exit 2
fi

# NCCL: the system's, or the one PyTorch's wheels bring.
nccl_dir=""
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 '; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -n "$nccl_dir" ] || nccl_dir=$(dirname "$(find / -name libnccl.so.2 -not -path '*/proc/*' 2>/dev/null | head -1)")
fi
# cuRAND (for tests/gpu/nccl_curand_program): the toolkit's, or PyTorch's wheels'.
curand=$(find $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) /usr/local/cuda*/lib64 \
           -name 'libcurand.so.10' 2>/dev/null | head -1)
curand_dir=${curand:+$(dirname "$curand")}
export LD_LIBRARY_PATH="$carry/lib:$carry/openmpi/lib${nccl_dir:+:$nccl_dir}${curand_dir:+:$curand_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Open MPI from the carried files: a singleton per process, no daemon, shared
# memory and self only.
export OPAL_PKGLIBDIR="$carry/openmpi/lib/openmpi3" OPAL_PKGDATADIR="$carry/openmpi/share"
export OMPI_MCA_mca_base_component_path="$carry/openmpi/lib/openmpi3"
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi,psm,psm2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export REPLAY_TEST_BUILD_DIR="$carry"
R=$carry/replay
train=$carry/examples/nccl_train/nccl_train
sweep=$carry/bench/nccl_allreduce_sweep

{
  date -u
  uname -a
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  "$R" --version
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
  echo "libnccl: ${nccl_dir:-system} $(ldconfig -p | grep -m1 libnccl.so.2 || true)"
  nproc
} >"$out/env.txt" 2>&1
say "# replay device check, $(date -u +%F), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# 1. The gpu-labelled tests.
step "gpu tests (nccl_gpu_test)" 240 "'$carry/tests/gpu_nccl_gpu_test' --reporter compact"
grep -q "SKIPPED" "$log" && say "  note: a gpu test printed SKIPPED (no GPU seen?)"

# 2. The trainer: record, check, re-run alone, compare bits.
args="--steps 20 --ckpt-every 0 --fault unseeded"
step "trainer: record --level data" 120 \
  "cd '$work' && '$R' record --level data -o '$work/train' -- '$train' $args | tee '$work/train.out'"
step "trainer: check finds nothing" 60 "'$R' check '$work/train'"
step "trainer: rerun --rank 0" 120 \
  "cd '$work' && '$R' rerun '$work/train' --rank 0 -- '$train' $args | tee '$work/rerun.out'"
step "trainer: re-run parameters equal, bit for bit" 10 \
  "a=\$(grep 'final-params' '$work/train.out'); b=\$(grep 'final-params' '$work/rerun.out'); echo \"\$a\"; echo \"\$b\"; [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
step "trainer: completions seen on the GPU" 30 \
  "'$R' dump '$work/train' --rank 0 | awk '/ op nccl/ && /device/ {o++} / completion / && /nccl/ {c++} END {print o, \"device ops,\", c, \"completions\"; exit !(o > 0 && c >= o)}'"
step "trainer: CUDA stream ordering recorded" 30 \
  "'$R' dump '$work/train' --rank 0 | awk '/ cuda stream_create/ {s++} / cuda kernels/ {k++} / cuda / {c++} END {print c, \"cuda events,\", s, \"streams created,\", k, \"kernel counts\"; exit !(s > 0 && k > 0)}'"
step "trainer: bundle" 30 "'$R' bundle '$work/train' -o '$out/train.bundle'"
step "trainer nan: record" 120 \
  "cd '$work' && '$R' record -o '$work/nan' -- '$train' --steps 6 --ckpt-every 0 --fault nan:rank=0,step=3"
step "trainer nan: check names rank 0" 60 \
  "'$R' check '$work/nan'; '$R' check --json '$work/nan' >'$work/nan.json'; python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))[\"findings\"]; sys.exit(0 if f and f[0][\"kind\"] == \"nan_inf\" and f[0][\"ranks\"] == [0] else 1)' '$work/nan.json'"

# 2b. A repro.c from `replay shrink` (tests/gpu/prepare_device.sh shrank, on the
# host stand-ins, a job where NCCL refuses a send to a rank its communicator
# does not have): built here against this machine's NCCL and CUDA headers and
# libraries (the binary built with the toolkit at prepare time if no compiler
# or header is found), run at one rank on the GPU, where real NCCL must refuse
# it the same way, and recorded, where check must name the same error.
if [ -f "$carry/shrink/repro.c" ]; then
  cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
  nccl_h=$(for d in "${nccl_dir:+$nccl_dir/../include}" /usr/include "$cuda_inc"; do [ -f "$d/nccl.h" ] && echo "$d" && break; done)
  libnccl=$( [ -n "$nccl_dir" ] && echo "$nccl_dir/libnccl.so.2" || ldconfig -p | awk '/libnccl.so.2 / {print $NF; exit}')
  libcuda=$(ldconfig -p | awk '/libcuda.so.1 / {print $NF; exit}')
  repro=$carry/shrink/repro
  if [ -n "$nccl_h" ] && [ -f "$cuda_inc/cuda.h" ] && [ -n "$libnccl" ] && [ -n "$libcuda" ] && command -v cc >/dev/null &&
    step "shrink repro: build against this machine's NCCL" 60 \
      "cc -std=gnu11 -Wall -o '$work/repro' '$carry/shrink/repro.c' -I'$carry/openmpi/include' -I'$cuda_inc' -I'$nccl_h' '$carry/lib/libmpi.so.40' '$libnccl' '$libcuda'"; then
    repro=$work/repro
  else
    say "  note: repro.c not built here (no compiler, nccl.h, cuda.h or library found); the binary built at prepare time runs"
  fi
  step "shrink repro: real NCCL refuses the send as recorded" 60 \
    "'$repro' >'$work/repro.out' 2>&1; rc=\$?; cat '$work/repro.out'; [ \$rc -eq 1 ] && grep -q 'ncclSend: invalid argument' '$work/repro.out'"
  step "shrink repro: recorded, check names the same error" 60 \
    "'$R' record -o '$work/repro-trace' -- '$repro'; '$R' check --json '$work/repro-trace' >'$work/repro.json'; '$R' check --json '$carry/shrink' >'$work/shrunk.json'; python3 -c 'import json, sys; a, b = (json.load(open(p))[\"findings\"][0] for p in sys.argv[1:]); print(a[\"title\"]); sys.exit(0 if (a[\"kind\"], a[\"op\"], a[\"data\"].get(\"code\")) == (b[\"kind\"], b[\"op\"], b[\"data\"].get(\"code\")) == (\"error\", \"ncclSend\", b[\"data\"].get(\"code\")) else 1)' '$work/repro.json' '$work/shrunk.json'"
else
  say "  note: no .device/shrink/repro.c (prepare_device.sh could not shrink without the host NCCL stand-in)"
fi

# 3. PyTorch DDP, NCCL inside libtorch_cuda.so. NCCL's INFO log goes to files:
# on stdout it is lost when a process aborts.
ddp=$root/tests/gpu/ddp_step.py
same_losses() { echo "diff <(grep '^rank' '$1') <(grep '^rank' '$2') && grep -q params '$1'"; }
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_DEBUG_FILE="$out/nccl.%h.%p.log" PYTHONUNBUFFERED=1
export RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517
step "ddp: plain run" 150 "cd '$work' && python3 '$ddp' 5 | tee '$work/ddp.plain'"
step "ddp: preloaded with REPLAY_DISABLE=1, the same losses" 150 \
  "cd '$work' && LD_PRELOAD='$carry/libreplay_interpose.so' REPLAY_DISABLE=1 python3 '$ddp' 5 | tee '$work/ddp.off' && $(same_losses "$work/ddp.plain" "$work/ddp.off")"
for level in hash data; do
  step "ddp: record --level $level, the same losses" 150 \
    "cd '$work' && '$R' record --level $level -o '$work/ddp-$level' -- python3 '$ddp' 5 | tee '$work/ddp.$level' && $(same_losses "$work/ddp.plain" "$work/ddp.$level")"
done
if ! grep -q "ddp: record --level hash, the same losses *PASS" "$summary"; then
  # What breaks it: the driver hook, or NCCL's profiler plugin?
  step "ddp (diagnosis): recorded with REPLAY_CUDA_DRIVER=0" 150 \
    "cd '$work' && REPLAY_CUDA_DRIVER=0 '$R' record -o '$work/ddp-nodriver' -- python3 '$ddp' 5"
  step "ddp (diagnosis): recorded without the profiler plugin" 150 \
    "cd '$work' && LD_PRELOAD='$carry/libreplay_interpose.so' REPLAY_DIR='$work/ddp-noplugin' python3 '$ddp' 5"
fi
step "ddp: its NCCL communicator in the trace, from NCCL's profiler plugin" 30 \
  "'$R' info '$work/ddp-hash' && '$R' dump '$work/ddp-hash' --rank 0 | grep -E 'ncclProfilerInit|nccl.recorded_by' | tee '$work/ddp.comms' && grep -q 'created by ncclProfilerInit size=1 rank=0' '$work/ddp.comms'"
step "ddp: check finds nothing" 60 "'$R' check '$work/ddp-hash'"
step "ddp: rerun --rank 0 of the data trace, the same losses bit for bit" 150 \
  "cd '$work' && '$R' rerun '$work/ddp-data' --rank 0 -- python3 '$ddp' 5 | tee '$work/ddp.rerun' && $(same_losses "$work/ddp.data" "$work/ddp.rerun")"
rm -rf "$work/ddp-hash" "$work/ddp-data" "$work/ddp-nodriver" "$work/ddp-noplugin"
unset RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
torchrun="python3 -m torch.distributed.run --master-addr 127.0.0.1"
step "ddp: torchrun --nproc-per-node 1, recorded, the same losses" 150 \
  "cd '$work' && '$R' record -o '$work/trun' -- $torchrun --master-port 29518 --nproc-per-node 1 '$ddp' 5 | tee '$work/trun.out' && $(same_losses "$work/ddp.plain" "$work/trun.out") && '$R' info '$work/trun'"
rm -rf "$work/trun"
# Two ranks on the one GPU: NCCL refuses two ranks of one host on one device,
# so each gets its own NCCL_HOSTID and NCCL connects them over sockets.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
ddp2="$torchrun --master-port 29519 --nproc-per-node 2 '$ddp' 5 --one-gpu"
step "ddp2: two ranks on one GPU, plain run" 180 "cd '$work' && $ddp2 | tee '$work/ddp2.plain'"
mkdir -p "$work/counting"
step "ddp2: recorded with the user's profiler plugin and the Flight Recorder on, the same losses" 180 \
  "cd '$work' && COUNTING_PROFILER_OUT='$work/counting' NCCL_PROFILER_PLUGIN='$carry/tests/libnccl-profiler-counting.so' TORCH_NCCL_TRACE_BUFFER_SIZE=2000 '$R' record -o '$work/ddp2' -- $ddp2 --flight-recorder '$work/fr' | tee '$work/ddp2.rec' && diff <(grep '^rank' '$work/ddp2.plain' | sort) <(grep '^rank' '$work/ddp2.rec' | sort)"
step "ddp2: its NCCL collectives in the trace, from NCCL's profiler plugin" 30 \
  "'$R' info '$work/ddp2' && for r in 0 1; do n=\$('$R' dump '$work/ddp2' --rank \$r | grep -c ' op nccl'); c=\$('$R' dump '$work/ddp2' --rank \$r | grep -c ' completion .*by nccl'); echo \"rank \$r: \$n NCCL ops, \$c completions\"; [ \"\$n\" -gt 10 ] && [ \"\$c\" -ge \"\$n\" ] || exit 1; done"
step "ddp2: check finds nothing" 60 "'$R' check '$work/ddp2'"
step "ddp2: the user's profiler plugin was given NCCL's events" 10 \
  "cat '$work/counting'/* && grep -q 'type 2=' '$work/counting'/* && ! grep -v 'bad-parents 0' '$work/counting'/* | grep -q comm"
step "ddp2: PyTorch's Flight Recorder dumps imported and checked" 60 \
  "ls -l '$work/fr' && '$R' info '$work/fr' && '$R' check '$work/fr'"
frtrace="python3 -m torch.distributed.flight_recorder.fr_trace"
step "ddp2: PyTorch's analyzer (fr_trace) reads PyTorch's own dumps" 60 \
  "$frtrace '$work/fr' -p nccl_trace_rank_ 2>&1 | tee '$work/fr.analysis' && ! grep -q Traceback '$work/fr.analysis'"
step "ddp2: fr_trace reads replay's Flight Recorder export; check on it is clean" 90 \
  "'$R' export '$work/ddp2' --format flight-recorder -o '$work/frx' && $frtrace '$work/frx' -p nccl_trace_rank_ 2>&1 | tee '$work/frx.analysis' && ! grep -q -i -E 'Traceback|not a supported|mismatch' '$work/frx.analysis' && '$R' check '$work/frx'"
rm -rf "$work/ddp2" "$work/fr" "$work/frx" "$work/counting"
unset NCCL_SOCKET_IFNAME NCCL_IB_DISABLE NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE PYTHONUNBUFFERED

# 3a. A single-process NCCL + cuRAND program, seeded from getrandom.
solo=$carry/tests/gpu_nccl_curand_program
if [ -x "$solo" ]; then
  step "solo: NCCL + cuRAND seeded from getrandom, recorded at level data" 60 \
    "cd '$work' && '$R' record --level data -o '$work/solo' -- '$solo' | tee '$work/solo.rec'"
  step "solo: its rank from its NCCL communicator" 30 \
    "'$R' info '$work/solo' && '$R' dump '$work/solo' --rank 0 | grep 'nccl.world_rank=0'"
  step "solo: rerun --rank 0 alone, the same output" 60 \
    "cd '$work' && '$R' rerun '$work/solo' --rank 0 -- '$solo' | tee '$work/solo.rerun' && diff <(grep -E '^(seed|step|rank)' '$work/solo.rec') <(grep -E '^(seed|step|rank)' '$work/solo.rerun')"
  step "solo: cuRAND's and NCCL's kernels counted" 30 \
    "'$R' dump '$work/solo' --rank 0 | awk '/ cuda kernels/ {k += 1} END {print k, \"kernel counts\"; exit !(k > 0)}'"
  rm -rf "$work/solo"
else
  say "solo: no build of tests/gpu/nccl_curand_program (cuRAND not found when it was built)"
fi

# 3b. Triton: kernels launched from a Python extension module linked against
# libcuda, counted on their stream; with REPLAY_CUDA_LINKED=0 for comparison
# only (the count is reported, not required).
for linked in 1 0; do
  t=$work/triton$linked
  step "triton: record 50 launches, REPLAY_CUDA_LINKED=$linked" 240 \
    "cd '$work' && REPLAY_CUDA_LINKED=$linked '$R' record -o '$t' -- python3 '$root/tests/gpu/triton_step.py' 50 | tee '$t.out'"
  stream=$(grep -o 'stream 0x[0-9a-f]*' "$t.out" 2>/dev/null | awk '{print $2}')
  step "triton: launches counted on their stream, REPLAY_CUDA_LINKED=$linked" 30 \
    "'$R' dump '$t' --json | python3 '$root/tests/gpu/count_kernels.py' '${stream:-0x0}' $([ $linked = 1 ] && echo 50)"
  rm -rf "$t"
done

# 4. The fingerprint kernel against the host's XXH3.
fp_args="--min 4 --max 268435456 --factor 8 --iters 2 --poison"
for mode in kernel copy; do
  step "fingerprints: record the sweep at level data, $mode" 120 \
    "REPLAY_DEVICE_HASH=$mode '$R' record --level data -o '$work/fp-$mode' -- '$sweep' $fp_args && '$R' dump '$work/fp-$mode' --json >'$work/fp-$mode.json'"
done
step "fingerprints: kernel equals host, every op" 60 \
  "python3 '$root/tests/gpu/compare_fingerprints.py' '$work/fp-kernel.json' '$work/fp-copy.json'"
rm -rf "$work/fp-kernel" "$work/fp-copy" "$work/fp-kernel.json" "$work/fp-copy.json"
for mode in kernel copy; do
  step "fingerprints: sweep at level hash, $mode" 120 \
    "REPLAY_DEVICE_HASH=$mode '$R' record -o '$work/fp-$mode' -- '$sweep' --min 8 --max 268435456 --factor 8 --iters 20 | tee '$out/fp-$mode.txt'"
  rm -rf "$work/fp-$mode"
done
python3 - "$out/fp-kernel.txt" "$out/fp-copy.txt" <<'EOF' | tee -a "$summary" >>"$log"
import sys
def read(path):
    try:
        return {int(f[0]): float(f[1]) for f in (l.split() for l in open(path)) if len(f) == 4 and f[0].isdigit()}
    except OSError:
        return {}
k, c = read(sys.argv[1]), read(sys.argv[2])
print("\nlevel hash: us per allreduce, device buffers fingerprinted by the kernel and from host copies")
print("(copies are made up to REPLAY_HASH_LIMIT_KB only; beyond it they fingerprint nothing)")
print(f"{'bytes':>11} {'kernel':>10} {'copies':>10}")
for size in sorted(k):
    print(f"{size:>11} {k[size]:>10.2f} {c.get(size, float('nan')):>10.2f}")
EOF

# A device reset between two sweeps: the recorder's events, kernel and staging
# buffers go with the destroyed context and are made again in the next one.
reset_args="--min 8 --max 1048576 --factor 16 --iters 5 --resets 1"
step "reset: sweep, cudaDeviceReset, sweep" 60 "'$sweep' $reset_args | tee '$work/reset.plain'"
step "reset: the same recorded at level data" 90 \
  "'$R' record --level data -o '$work/reset' -- '$sweep' $reset_args | tee '$work/reset.rec'"
step "reset: same results under the preload" 10 \
  "[ -s '$work/reset.plain' ] && diff <(awk 'NF == 4 && \$1 ~ /^[0-9]+\$/ { print \$1, \$4 }' '$work/reset.plain') <(awk 'NF == 4 && \$1 ~ /^[0-9]+\$/ { print \$1, \$4 }' '$work/reset.rec')"
step "reset: every operation completed, no error" 30 \
  "'$R' dump '$work/reset' --json | python3 '$root/tests/gpu/count_completions.py'"
rm -rf "$work/reset"

# 5. The allreduce sweep, alternated.
sweep_args="--min 8 --max 268435456 --factor 4 --iters 40"
: >"$out/sweep.txt"
for r in $(seq 1 "$rounds"); do
  [ $(($(date +%s) - started)) -lt 400 ] || { say "  sweep: round $r skipped, out of time"; break; }
  for mode in plain meta hash data; do
    if [ "$mode" = plain ]; then
      cmd="'$sweep' $sweep_args"
    else
      cmd="'$R' record --level $mode -o '$work/sweep-$mode-$r' -- '$sweep' $sweep_args"
    fi
    echo "## round $r $mode" >>"$out/sweep.txt"
    timeout -k 5 90 bash -c "$cmd" 2>>"$log" | grep -E '^ *[0-9]' >>"$out/sweep.txt"
    rm -rf "$work/sweep-$mode-$r"
  done
done
python3 - "$out/sweep.txt" <<'EOF' | tee -a "$summary" >>"$log"
import collections, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
results = collections.defaultdict(set)
mode = None
for line in open(sys.argv[1]):
    if line.startswith("## "):
        mode = line.split()[3]
        continue
    f = line.split()
    if len(f) == 4 and mode:
        runs[mode][int(f[0])].append(float(f[1]))
        results[int(f[0])].add(f[3])
if "plain" not in runs:
    print("sweep: no results"); sys.exit(0)
print("\nncclAllReduce, one-rank communicator: median us per op over rounds; what each level adds (us);")
print("device buffers fingerprinted (send and receive bytes over hash - meta) and received bytes copied to the host")
print("(receive bytes over data - hash), GB/s. Targets: meta +2 us, hash +5 us up to 64 KiB, fp >= 40% of HBM")
print("bandwidth beyond, copy >= 20 GB/s.")
print(f"{'bytes':>11} {'plain us':>9} {'meta +us':>9} {'hash +us':>9} {'data +us':>10}  {'fp GB/s':>8} {'copy GB/s':>9}  same result")
for size in sorted(runs["plain"]):
    p = statistics.median(runs["plain"][size])
    med = {m: statistics.median(runs[m][size]) for m in ("meta", "hash", "data") if runs[m].get(size)}
    row = f"{size:>11} {p:>9.2f}"
    for m, width in (("meta", 9), ("hash", 9), ("data", 10)):
        row += f" {med[m] - p:>{width}.2f}" if m in med else f" {'-':>{width}}"
    fp = copy = ""
    if "meta" in med and "hash" in med and med["hash"] > med["meta"]:
        fp = f"{2 * size / ((med['hash'] - med['meta']) * 1e3):.1f}"
    if "hash" in med and "data" in med and med["data"] > med["hash"]:
        copy = f"{size / ((med['data'] - med['hash']) * 1e3):.1f}"
    row += f"  {fp:>8} {copy:>9}  {'yes' if len(results[size]) == 1 else 'NO'}"
    print(row)
EOF

say ""
say "total $(($(date +%s) - started)) s; failures: $(grep -c 'FAIL' "$summary")"
rm -rf "$work"
grep -q FAIL "$summary" && exit 1
exit 0
