#!/usr/bin/env bash
# Runs a test binary as one MPI job: dist_mpi_test.sh NP BINARY [args...]. As root Open MPI
# also needs --allow-run-as-root; --oversubscribe lets NP exceed the cores. The shared-memory
# and TCP transports only (no InfiniBand probing), over loopback inside Bazel's sandbox.
set -euo pipefail
np="$1"; shift
bin="$1"; shift
export OMPI_MCA_btl="self,vader,tcp"
export OMPI_MCA_btl_tcp_if_include="lo"
export OMPI_MCA_oob_tcp_if_include="lo"
export OMPI_MCA_btl_vader_single_copy_mechanism="none"   # no CMA inside containers
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
# Bazel's per-test files are for one process: the ranks would race on them.
unset TEST_PREMATURE_EXIT_FILE XML_OUTPUT_FILE GTEST_OUTPUT
# Mismatched collectives fail with a named error instead of hanging (backends/cpu/collectives.cc).
export SLOTH_DIST_CHECK=1
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
# Under --config=asan: no leak check in the MPI ranks. Open MPI leaks in MPI_Init/Finalize
# (its dlopen'ed MCA components, hwloc, op selection; the stacks end in unloaded modules, so
# suppressions cannot name them). sloth's own code on these paths is leak-checked by the
# same tests run as one process (dist_test, ddp_test), which do not touch MPI.
if [[ -n "${ASAN_OPTIONS:-}" ]]; then export ASAN_OPTIONS="${ASAN_OPTIONS}:detect_leaks=0"; fi
# Each collective in the test must finish in time: a hang fails the test instead of Bazel's
# timeout.
exec timeout --signal=TERM --kill-after=10 120 \
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$bin" "$@"
