// Every SLOTH_* environment variable the library reads, read in this one place (all at once,
// at the first call of settings()) and documented here field by field; README.md has the
// same list as a table. Code asks settings(), never getenv, so a variable has one name, one
// parser and one default. (The oracle test's SLOTH_ORACLE_* belong to that test alone.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sloth {

// The instruction set a CPU loop is built for.
enum class Isa : uint8_t { kAvx2, kAvx512 };

struct Settings {
  // SLOTH_LOG: what to print to stderr, a list of topics ("plans,fusion") or "all":
  // plans (each plan-cache miss and why), fusion (fusion and row-group decisions), jit (each
  // compile, cache hit and failure),
  // blas (the OpenBLAS core SLOTH_BLAS_CORE chose).
  std::string log;
  // SLOTH_PROFILE=path: profile the whole program (from its first sync to exit) and write a
  // Chrome trace-event file there (sloth/profiler.h).
  std::string profile;
  // SLOTH_DUMP_IR (any value): print the IR of every new graph.
  bool dump_ir = false;
  // SLOTH_FUSION=0: no fusion, one kernel per op.
  bool fusion = true;
  // SLOTH_ROW_GROUPS=0: CPU steps over the same rows no longer run block by block together.
  bool row_groups = true;
  // SLOTH_FROZEN=0: a CPU plan run again with the same layouts no longer replays its kernels
  // from a frozen list (backends/cpu/frozen_run.h); every run binds each kernel again.
  bool frozen_runs = true;
  // SLOTH_NUM_THREADS=n (n > 0): at most n CPU kernel threads (0: one per hardware thread).
  int num_threads = 0;
  // SLOTH_POOL_SPIN_US=n: how long an idle CPU worker polls for the next kernel before it
  // sleeps (and the submitting thread for the last chunks), in microseconds.
  int64_t pool_spin_us = 100;
  // SLOTH_SMALL_GEMM=0: small float matmuls go to OpenBLAS too (by default they use the
  // built-in AVX-512 kernel, backends/cpu/small_gemm.h, where measured faster).
  bool small_gemm = true;
  // SLOTH_BLAS_CORE=auto|env: which OpenBLAS kernels GEMMs run. auto (default): where the CPU
  // has AVX-512 but OPENBLAS_CORETYPE forces a narrower core, OpenBLAS re-detects its core
  // before the first GEMM (backends/cpu/blas_core.h); env: keep OpenBLAS's own choice.
  enum class BlasCore : uint8_t { kAuto, kEnv } blas_core = BlasCore::kAuto;

  // The CPU tile interpreter (backends/cpu/tile_*), for measurements:
  // SLOTH_TILE: elements per tile, a power of two in [64, 16384] (else the default).
  int64_t tile = 512;
  // SLOTH_PREFETCH_TILES: how many tiles ahead operands are prefetched (0: none).
  int64_t prefetch_tiles = 0;
  // SLOTH_STREAM_MB: outputs of at least this many MiB are written with streaming stores
  // (0 or less: never).
  int64_t stream_mb = 8;
  // SLOTH_EW_ISA=avx2|avx512: the interpreter's op loops. avx2 by default; avx512 is used
  // only when asked for and the CPU has it.
  Isa ew_isa = Isa::kAvx2;

  // Run-time compiled CPU kernels (backends/cpu/jit.h):
  // SLOTH_JIT=off|on|sync: on (default) compiles hot kernels on a background thread; sync
  // compiles on first use and waits; off (or 0) never compiles.
  enum class Jit : uint8_t { kOff, kOn, kSync } jit = Jit::kOn;
  // SLOTH_JIT_ISA=avx2|avx512: the compiled kernels' code. avx512 by default where the CPU
  // has it (the results are the same either way); avx2 leaves AVX-512 out.
  Isa jit_isa = Isa::kAvx512;
  // SLOTH_JIT_CXX: the compiler (empty: the first of c++, g++, clang++ on PATH).
  std::string jit_cxx;
  // SLOTH_JIT_DIR: the on-disk cache (empty: $XDG_CACHE_HOME/sloth/jit, else
  // $HOME/.cache/sloth/jit, else /tmp/sloth-jit-<uid>); it must be this user's and not
  // group/world-writable.
  std::string jit_dir;

  // CUDA backend:
  // SLOTH_CUDA_CACHE_DIR: on-disk cache of NVRTC-compiled kernels (empty: none).
  std::string cuda_cache_dir;
  // SLOTH_CUDA_ARCH: the NVRTC target, e.g. sm_90 (empty: the device's own).
  std::string cuda_arch;

  // Distributed (sloth::dist, dist/dist.h; the collectives' kernels):
  // SLOTH_DIST_MPI=1: dist::init() calls MPI_Init even when no MPI launcher started the
  // process (Open MPI's singleton mode); otherwise such a process is a 1-process world.
  bool dist_mpi = false;
  // SLOTH_DIST_CHECK=1: before each collective the ranks compare what they issue (sequence
  // number, op, dtype, shape) and mismatches fail on every rank with an error naming them.
  bool dist_check = false;
  // SLOTH_DIST_TIMEOUT=seconds (> 0): how long a rank waits in one collective (or barrier)
  // before it ends the whole job with an error naming the ranks that did not arrive.
  double dist_timeout_s = 300;

  // Whether SLOTH_LOG asks for `topic`.
  bool log_on(std::string_view topic) const;
};

// The settings, read from the environment at the first call.
const Settings& settings();
// The same object, writable, for tests: set a field before the code that reads it first runs
// (several readers keep what they read at their first use).
Settings& settings_for_test();

}  // namespace sloth
