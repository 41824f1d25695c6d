#!/usr/bin/env bash
# Builds replay and runs every test. Installs missing Debian packages first.
#   tools/test.sh                  # build in build/, run ctest
#   tools/test.sh --sanitize       # also build in build-asan/ with ASan+UBSan, run ctest there
# Environment: REPLAY_WERROR=ON makes warnings errors (CI does); JOBS=N for parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

tools/install-deps.sh
jobs=${JOBS:-$(nproc)}
werror=${REPLAY_WERROR:-OFF}
# mpirun refuses to run as root unless told; the tests run jobs of 1, 2 and 4 ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run_suite DIR [--skip-label LABEL] [cmake arguments...]
run_suite() {
  local dir=$1; shift
  local ctest_args=()
  if [[ "${1:-}" == --skip-label ]]; then
    ctest_args=(--label-exclude "$2"); shift 2
  fi
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPLAY_WERROR="$werror" "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600 "${ctest_args[@]}")
}

run_suite build
if [[ $sanitize -eq 1 ]]; then
  # handle_segv=0: the tests raise SIGSEGV on purpose and check what the
  # program's own handlers and the trace make of it. The corpus of real
  # programs (label corpus), the long end-to-end suites (label long) and real
  # applications (label apps) run once, in the plain build: they are long and
  # exercise the preload, not code a sanitizer sees better. The hostile
  # corpus runs a smaller draw there: every kind of damage still comes up.
  REPLAY_HOSTILE_CASES=16 \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_segv=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan --skip-label 'corpus|long|apps' -DREPLAY_SANITIZE=address,undefined -DREPLAY_BUILD_BENCH=OFF
fi
