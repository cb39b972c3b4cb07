#!/usr/bin/env bash
# One GPU session's checks, in the order they are needed, with logs under $OUT
# (the device tool brings that folder back).  Steps are named on the command
# line; each has its own time limit so one slow step cannot starve the rest.
#
#   bash tools/device_check.sh warm tests:gemv,gemm,plans,validation sanitize:blas bench:gemv,gemm,overhead
#
# warm            compile every kernel instantiation into CuPy's cache (16 processes)
# warm:F,G        only those of the sources F, G (e.g. warm:lu,cholesky)
# tests:A,B       pytest -m gpu tests/test_A.py tests/test_B.py, failures named as they happen in
#                 failures_A_B.txt (BATCHED_EXAMPLES=N: hypothesis examples;
#                 MAXFAIL=N: stop after N failures, default 1; TESTS_LIMIT=S: seconds, default 300;
#                 TESTS_K=EXPR: only tests matching pytest's -k EXPR; JOBS=N: pytest-xdist workers)
# sanitize:S,T    compute-sanitizer memcheck (--quick) and racecheck (--race) on sections of tools/sanitize.py
# bench:R,S       bench/run_all.py --only R,S (JSON and PNG under $OUT/<gpu>/)
# sweep:R         the same with --sweep (every setting timed)
# py:PATH         python3 PATH --results-dir $OUT (e.g. py:bench/svd_stages.py); arguments follow
#                 after '+' (py:bench/kblas_mgpu.py+--gpus=2,4+--large=200000:4); the same script
#                 again in one call logs to py_NAME_2.log and writes under $OUT/run2 (a
#                 --results-dir among the arguments overrides either)
# targets         tools/targets.py over every results folder the bench steps wrote under $OUT
#                 (the issues' targets met or missed, row by row; put it after them)
# wheels          pip install --no-index --no-deps the carried .whl/*.whl (dask, distributed,
#                 dask-cuda and what they need that the image lacks: pip download them here)
# LIMIT=S         seconds for each sanitize/bench/sweep/py step (defaults 200/300/400/300)
# More than 8 files under $OUT at the end (what the device tool brings back) are packed
# into $OUT/all.tgz.
set -u
OUT=${OUT:-/tmp/device_check}
mkdir -p "$OUT"
# Two BLAS threads per process: under pytest -n N every worker's NumPy would start
# one per core (16 x N threads on 16 cores); the complex 512 x 512 GEBRD tests
# took over 300 s each that way, against 9 s with two.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
# A kernel cache built here (tools/warm_kernels.py --arch sm_90 [--pack kernel_cache.tar.xz])
# and carried along, as kernel_cache.tar.xz (about 11-25 MB: carry takes 64 MiB in all).
if [ ! -d kernel_cache ] && [ -f kernel_cache.tar.xz ]; then tar -xJf kernel_cache.tar.xz; fi
if [ -d kernel_cache ]; then export BATCHED_CACHE_DIR=$PWD/kernel_cache; fi
python3 -m pip install -q --no-build-isolation --no-deps -e . >/dev/null 2>&1 || echo "pip install failed"

step() {  # step NAME SECONDS COMMAND...: run, log, print the tail
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$?"
  tail -4 "$OUT/$name.log"
}

for arg in "$@"; do
  kind=${arg%%:*}
  what=${arg#*:}
  case $kind in
    warm)
      if [ "$what" = warm ]; then step warm 240 python3 tools/warm_kernels.py --jobs 16
      else step "warm_${what//,/_}" 240 python3 tools/warm_kernels.py --jobs 16 \
        --only "$(echo "$what" | tr ',' '\n' | sed 's|$|.cu|' | paste -sd, -)"; fi ;;
    tests)
      files=$(echo "$what" | tr ',' '\n' | sed 's|.*|tests/test_&.py|' | tr '\n' ' ')
      # shellcheck disable=SC2086
      # failures are named in failures_*.txt as they happen (tests/conftest.py), even when
      # the step is killed at its limit before pytest's summary
      BATCHED_FAILURE_LOG="$OUT/failures_${what//,/_}.txt" \
        step "tests_${what//,/_}" "${TESTS_LIMIT:-300}" python3 -m pytest -q -m gpu --maxfail="${MAXFAIL:-1}" --tb=short -rf -p no:cacheprovider ${JOBS:+-n "$JOBS"} ${TESTS_K:+-k "$TESTS_K"} $files
      grep -m12 "^FAILED\|^ERROR\|Fatal" "$OUT/tests_${what//,/_}.log"
      if [ -s "$OUT/failures_${what//,/_}.txt" ]; then head -12 "$OUT/failures_${what//,/_}.txt"; fi ;;
    sanitize)
      step "memcheck_${what//,/_}" "${LIMIT:-200}" compute-sanitizer --tool memcheck --error-exitcode 1 \
        python3 tools/sanitize.py --quick "--only=$what"
      step "racecheck_${what//,/_}" "${LIMIT:-200}" compute-sanitizer --tool racecheck --error-exitcode 1 \
        python3 tools/sanitize.py --race "--only=$what" ;;
    bench) step "bench_${what//,/_}" "${LIMIT:-300}" python3 bench/run_all.py --only "$what" --results-dir "$OUT" ;;
    py)
      script=${what%%+*}
      extra=()
      if [ "$script" != "$what" ]; then IFS=+ read -r -a extra <<< "${what#*+}"; fi
      # the same script (or another of the same name) again in one call: its own log and
      # results folder (py_NAME_2.log, $OUT/run2), so that the second run does not
      # overwrite the first's files
      name="py_$(basename "${script%.py}")" dir="$OUT" k=2
      while [ -e "$OUT/$name.log" ]; do name="py_$(basename "${script%.py}")_$k" dir="$OUT/run$k" k=$((k + 1)); done
      mkdir -p "$dir"
      step "$name" "${LIMIT:-300}" python3 "$script" --results-dir "$dir" "${extra[@]}" ;;
    wheels) step wheels 120 python3 -m pip install --no-index --no-deps .whl/*.whl ;;
    targets)
      for dir in "$OUT"/*/; do
        if ls "$dir"*.json >/dev/null 2>&1; then
          python3 tools/targets.py --results "$dir" > "$OUT/targets_$(basename "$dir").log" 2>&1
          echo "== targets $(basename "$dir")"
          grep "^issue" "$OUT/targets_$(basename "$dir").log"
        fi
      done ;;
    sweep) step "sweep_${what//,/_}" "${LIMIT:-400}" python3 bench/run_all.py --sweep --only "$what" --results-dir "$OUT" ;;
    *) echo "unknown step $arg" ;;
  esac
done

# The device tool brings back at most 8 files from $OUT (KINDS/README: Limits); past that
# the rest are left out, a bench's JSON among them.  More than 8: one all.tgz instead
# (tar xzf it here), the files removed so that only the archive comes back.
if [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
  (cd "$OUT" && tar czf all.tgz --exclude=all.tgz ./* && find . -type f ! -name all.tgz -delete \
    && find . -mindepth 1 -type d -empty -delete)
  echo "== $OUT packed into all.tgz (more than 8 files)"
fi
