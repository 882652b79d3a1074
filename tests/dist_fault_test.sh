#!/usr/bin/env bash
# A rank that throws, exits, hangs or is killed ends the whole MPI job quickly, with an error
# naming it (tests/dist_fault_test.cc): dist_fault_test.sh BINARY. Each case runs one
# 2-rank job and checks its exit status, its output and how long it took.
set -uo pipefail
bin="$1"
export OMPI_MCA_btl="self,vader,tcp"
export OMPI_MCA_btl_tcp_if_include="lo"
export OMPI_MCA_oob_tcp_if_include="lo"
export OMPI_MCA_btl_vader_single_copy_mechanism="none"
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE GTEST_OUTPUT
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
if [[ -n "${ASAN_OPTIONS:-}" ]]; then export ASAN_OPTIONS="${ASAN_OPTIONS}:detect_leaks=0"; fi
failures=0
# run_case MODE TIMEOUT_S MAX_S WANT_RC(0|fail) PATTERN
run_case() {
  local mode="$1" timeout_s="$2" max_s="$3" want="$4" pattern="$5"
  local out="$TMPDIR/fault_$mode.log" start end rc
  start=$(date +%s)
  SLOTH_DIST_TIMEOUT="$timeout_s" timeout --signal=KILL 90 \
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$bin" "$mode" >"$out" 2>&1
  rc=$?
  end=$(date +%s)
  local took=$((end - start)) bad=""
  if [[ "$want" == 0 && $rc -ne 0 ]]; then bad="exit status $rc, wanted 0"; fi
  if [[ "$want" != 0 && $rc -eq 0 ]]; then bad="the job succeeded, wanted a failure"; fi
  if (( took >= 90 )); then bad="the job hung (killed after 90 s)"; fi
  if ! grep -qE "$pattern" "$out"; then bad="$bad; no line matches /$pattern/"; fi
  if (( took > max_s )); then bad="$bad; took ${took} s, more than ${max_s} s"; fi
  if [[ -n "$bad" ]]; then
    echo "FAIL $mode: $bad"; echo "---- output ----"; cat "$out"; echo "----"
    failures=$((failures + 1))
  else
    echo "ok   $mode: exit $rc in ${took} s"; grep -E "$pattern" "$out" | head -2
  fi
}
# The timeout (60 s) is far above what the fault cases may take: they end through the hooks.
run_case none  60 60 0    "rank 0: done"
run_case throw 60 40 fail "rank 1 of 2: stopped by an uncaught exception: rank 1 failed on purpose"
run_case exit  60 40 fail "rank 1 of 2: exited without sloth::dist::finalize"
# SIGKILL runs no hook of ours: mpirun sees the rank die, names it and ends the job.
run_case kill  60 40 fail "process rank 1 .*exited on signal 9"
# The hang case needs the timeout: 3 s.
run_case hang  3  40 fail "rank 0 of 2: collective #[0-9]+ (all_reduce|AllReduce).* did not complete within 3 s .*rank 1 did not reach it"
exit $((failures > 0))
