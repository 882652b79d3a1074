// Whole runs of a tile program (split over threads when large) and row-blocked runs
// (cpu_backend.cc runs several programs block by block over the same rows).
#include <algorithm>
#include <memory>

#include "backends/cpu/thread_pool.h"
#include "backends/cpu/tile_loop.h"
#include "core/error.h"

namespace sloth::cpu {

absl::Status TileProgram::run(Env& env) const {
  if (!error_.empty()) return absl::InternalError(error_);
  // Per-run state lives in the program and is reused (no allocation in steady state). Only
  // the run holding its executable's run state (Env::exclusive) uses it: no other run can
  // use this program meanwhile, so no flag is swapped. A concurrent run of the executable
  // binds into a local copy.
  std::unique_ptr<Bind> local;  // not constructed on the common (exclusive) path
  if (!env.exclusive) local = std::make_unique<Bind>();
  Bind& b = env.exclusive ? bind_ : *local;
  SLOTH_RETURN_IF_ERROR(prepare(env, b));
  const int64_t n = n_;
  if (sink_ >= 0) return run_reduce(n, b, -1, -1);
  if (n >= kParallelThreshold) {
    parallel_for(n, kTile * 8, [&](int64_t lo, int64_t hi) {
      run_chunk<NoSink>(lo, hi, b, nullptr, b.jit);
    });
  } else if (n > 0) {
    run_chunk<NoSink>(0, n, b, nullptr, b.jit);
  }
  return absl::OkStatus();
}

bool TileProgram::row_blockable() const {
  if (!error_.empty() || shape_.size() < 2 || n_ == 0) return false;
  if (sink_ < 0) return true;
  // A reduction over trailing dims that keeps dim 0: each row of dim 0 reduces on its own.
  return !red_.attrs->dims.empty() &&
         *std::min_element(red_.attrs->dims.begin(), red_.attrs->dims.end()) >= 1;
}

absl::Status TileProgram::begin_rows(Env& env) const {
  if (!error_.empty()) return absl::InternalError(error_);
  // No donation: another step of the group may still read the donor's rows of later
  // blocks through a layout that is not row-aligned with this loop.
  return prepare(env, bind_, /*donate=*/false);
}

void TileProgram::run_rows(int64_t r0, int64_t r1) const {
  if (sink_ >= 0) {
    const int64_t per_row = numel(red_.shape) / shape_[0];  // reduced outputs per row
    run_reduce(n_, bind_, r0 * per_row, r1 * per_row).IgnoreError();  // checked in prepare
  } else {
    const int64_t inner = n_ / shape_[0];
    run_chunk<NoSink>(r0 * inner, r1 * inner, bind_, nullptr, bind_.jit);
  }
}

}  // namespace sloth::cpu
