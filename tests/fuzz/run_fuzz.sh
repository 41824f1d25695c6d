#!/usr/bin/env bash
# run_fuzz.sh: runs a fuzz target for a fixed time.
#
# Usage: [TARGET=NAME] tests/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR] [-- LIBFUZZER_FLAGS...]
#   TARGET     trace_decoder_fuzz (default: the trace's bytes),
#              trace_analysis_fuzz (what check, reports, diff, dump and the
#              exports make of a well-formed trace's content),
#              flight_recorder_fuzz (importing PyTorch Flight Recorder dumps) or
#              bundle_fuzz (reading and unpacking a bundle)
#   SECONDS    how long to fuzz (default 60)
#   BUILD_DIR  a clang build with REPLAY_BUILD_FUZZ=ON (default build-fuzz); it is
#              configured here if missing, and the target is (re)built.
#
# New inputs go to a scratch corpus, BUILD_DIR/fuzz-corpus (-analysis,
# -flight-recorder, -bundle for the other targets), seeded from the checked-in
# tests/fuzz/corpus (corpus-analysis, corpus-flight-recorder, corpus-bundle),
# never written to. Exit status 0 means no finding; otherwise the failing input is in
# BUILD_DIR/fuzz-artifacts/ and the log names it.
# Reproduce a finding with: BUILD_DIR/tests/fuzz/TARGET FILE
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
secs="${1:-60}"
build="${2:-$src/build-fuzz}"
shift $(( $# > 2 ? 2 : $# ))
[[ "${1:-}" == "--" ]] && shift

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DREPLAY_BUILD_FUZZ=ON -DREPLAY_BUILD_EXAMPLES=OFF
fi
target="${TARGET:-trace_decoder_fuzz}"
case "$target" in
  trace_decoder_fuzz) corpus="$build/fuzz-corpus" seeds="$src/tests/fuzz/corpus" ;;
  trace_analysis_fuzz) corpus="$build/fuzz-corpus-analysis" seeds="$src/tests/fuzz/corpus-analysis" ;;
  flight_recorder_fuzz) corpus="$build/fuzz-corpus-flight-recorder" seeds="$src/tests/fuzz/corpus-flight-recorder" ;;
  bundle_fuzz) corpus="$build/fuzz-corpus-bundle" seeds="$src/tests/fuzz/corpus-bundle" ;;
  *) echo "run_fuzz.sh: unknown TARGET $target (trace_decoder_fuzz, trace_analysis_fuzz, flight_recorder_fuzz," \
          "bundle_fuzz)" >&2
     exit 2 ;;
esac
cmake --build "$build" --target "$target" -j"$(nproc)"

artifacts="$build/fuzz-artifacts"
mkdir -p "$corpus" "$artifacts"
# -rss_limit_mb: a decoder that allocates without bound fails the run;
# -timeout: an input that takes longer than this (seconds) counts as a hang.
exec "$build/tests/fuzz/$target" \
  -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" \
  "$corpus" "$seeds"
