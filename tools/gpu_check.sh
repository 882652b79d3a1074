#!/usr/bin/env bash
# One-shot GPU check for the CUDA backend, for a machine with a GPU (device time is scarce:
# this finishes in under 8 minutes). Builds with --config=cuda, runs the CUDA tests (NVRTC
# codegen, the differential test over the whole op table, allocator steady state, the values
# of the benchmarked workloads), runs the CUDA benchmark (//benchmarks:cuda_bench: fused
# elementwise bandwidth, sgemm against cuBLAS) and prints a summary.
#
#   tools/gpu_check.sh            # from the repository root
#   BAZEL=bazel OUTPUT_BASE=/tmp/ob tools/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=$((START + 470))   # leave headroom under 8 minutes
BAZEL=${BAZEL:-bazel}
command -v "$BAZEL" >/dev/null 2>&1 || BAZEL=./bazelw
OB=${OUTPUT_BASE:+--output_base=$OUTPUT_BASE}
JOBS=${JOBS:-$(nproc)}
LOG=${LOG_DIR:-/tmp/sloth_gpu_check}
mkdir -p "$LOG"
left() { echo $((DEADLINE - $(date +%s))); }
summary=()

echo "== device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi

echo "== build (--config=cuda), $(left) s left"
if timeout "$(left)" $BAZEL $OB build --config=cuda --jobs="$JOBS" //backends/cuda/... //tests:cuda_backend_test //benchmarks:cuda_bench \
    >"$LOG/build.log" 2>&1; then
  summary+=("build --config=cuda: OK")
else
  tail -40 "$LOG/build.log"
  summary+=("build --config=cuda: FAILED (see $LOG/build.log)")
  printf '\n== summary\n'; printf '  %s\n' "${summary[@]}"; exit 1
fi

echo "== CUDA tests, $(left) s left"
BAZEL_BIN=$($BAZEL $OB info --config=cuda bazel-bin 2>/dev/null)
BIN=$BAZEL_BIN/tests/cuda_backend_test
SLOTH_CUDA_CACHE_DIR=${SLOTH_CUDA_CACHE_DIR:-$LOG/kernel_cache}
mkdir -p "$SLOTH_CUDA_CACHE_DIR"
export SLOTH_CUDA_CACHE_DIR
rc=0
timeout "$(( $(left) - 60 ))" "$BIN" --gtest_color=no >"$LOG/cuda_backend_test.log" 2>&1 || rc=$?
grep -E "^\[  (FAILED|SKIPPED) \]|Failure|Skipped|NVRTC compiled|plans,|CUDA unavailable" "$LOG/cuda_backend_test.log" | head -80
passed=$(grep -c "^\[       OK \]" "$LOG/cuda_backend_test.log" || true)
failed=$(grep -c "^\[  FAILED  \] [A-Za-z]" "$LOG/cuda_backend_test.log" || true)
skipped=$(grep -c "^\[  SKIPPED \] [A-Za-z]" "$LOG/cuda_backend_test.log" || true)
summary+=("cuda_backend_test: rc=$rc, $passed passed, $failed failed, $skipped skipped (log: $LOG/cuda_backend_test.log)")

echo "== CUDA benchmark (//benchmarks:cuda_bench), $(left) s left"
if [ "$(left)" -gt 90 ]; then
  if timeout "$(( $(left) - 20 ))" "$BAZEL_BIN/benchmarks/cuda_bench" --benchmark_min_time=0.2 \
      >"$LOG/cuda_bench.log" 2>&1; then
    summary+=("cuda_bench: OK (log: $LOG/cuda_bench.log)")
  else
    summary+=("cuda_bench: FAILED or timed out (see $LOG/cuda_bench.log)")
  fi
  grep -E "^BM_|error" "$LOG/cuda_bench.log" | head -20
  while read -r line; do summary+=("$line"); done < <(grep "^BM_" "$LOG/cuda_bench.log")
else
  summary+=("cuda_bench: skipped, no time left")
fi

printf '\n== summary (%d s)\n' $(( $(date +%s) - START ))
printf '  %s\n' "${summary[@]}"
[ "$rc" -eq 0 ]
