// Whole runs of a tile program (split over threads when large) and row-blocked runs
// (cpu_backend.cc runs several programs block by block over the same rows).
#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/cpu/compiled_call.h"
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

// ---- frozen runs (frozen_run.h) ----
// The binding of the last run (prepare) holds when it was made under the same layout
// generation: every operand has the dtype, shape and strides its read path was chosen for.
bool TileProgram::frozen_ready(uint64_t layout_gen) const {
  if (!error_.empty() || layout_gen == 0 || bind_.cand_gen != layout_gen) return false;
  if (n_ == 0) return sink_ < 0;  // nothing to read or compute; a reduction has an error
  return bind_.valid && bind_.gen == layout_gen;
}

void TileProgram::frozen_io(std::vector<int32_t>* reads, std::vector<int32_t>* outs,
                            std::vector<std::vector<int32_t>>* donors) const {
  reads->clear();
  outs->clear();
  donors->clear();
  for (const Ext& e : exts_)
    if (std::find(reads->begin(), reads->end(), e.slot) == reads->end()) reads->push_back(e.slot);
  for (size_t o = 0; o < outs_.size(); ++o) {
    outs->push_back(outs_[o].slot);
    donors->emplace_back();
    for (int32_t j = bind_.cand_begin[o]; j < bind_.cand_begin[o + 1]; ++j)
      donors->back().push_back(exts_[donors_[bind_.cand[j]].ext].slot);
  }
  if (sink_ >= 0) {
    outs->push_back(red_.out);
    donors->emplace_back();
  }
}

bool TileProgram::compiled_call(CompiledCall* call) const {
  const Bind& b = bind_;
  if (!jit_ || compute_steps_ == 0 || sink_ >= 0 || n_ <= 0 || n_ >= kParallelThreshold ||
      out_bytes_ >= kStreamBytes || !b.valid ||
      vals_.size() > static_cast<size_t>(CompiledCall::kMaxValues))
    return false;
  call->fn = nullptr;
  call->n = n_;
  call->mem.clear();
  call->scalars.clear();
  call->fills.clear();
  for (int k : load_steps_) {
    const Step& st = steps_[k];
    const Bound& x = b.bound[st.ext];
    const int32_t slot = exts_[st.ext].slot;
    if (x.direct) call->mem.push_back({st.out, slot, static_cast<int64_t>(x.src_size)});
    else if (x.splat || x.period > 0)
      call->fills.push_back({.val = st.out, .slot = slot, .load = x.load, .args = x.args,
                             .period = x.splat ? 0 : x.period,
                             .es = static_cast<int64_t>(dtype_size(vals_[st.out].dtype)),
                             .src_es = static_cast<int64_t>(x.src_size)});
    else return false;  // converted or strided: loaded tile by tile (run_chunk)
  }
  for (size_t o = 0; o < outs_.size(); ++o)
    call->mem.push_back({outs_[o].val, outs_[o].slot, static_cast<int64_t>(out_es_[o])});
  for (const Const& c : consts_) call->scalars.push_back({c.val, c.slot, vals_[c.val].dtype});
  call->tile = call->fills.empty() ? n_ : kTile;
  call->fill_buf.assign(call->fills.size() * static_cast<size_t>(kTile), 0.0);
  return true;
}

void CompiledCall::run(Env& env, char* const* p) {
  void* q[kMaxValues];
  double cells[kMaxValues];  // the scalars, each in its own dtype
  for (size_t j = 0; j < scalars.size(); ++j) {
    tile::fill(&cells[j], scalars[j].dtype, env.scalar(scalars[j].slot), 1);
    q[scalars[j].val] = &cells[j];
  }
  // A filled operand holds the same elements at the start of every tile (compiled_call.h).
  const int64_t first = std::min(tile, n);
  for (size_t j = 0; j < fills.size(); ++j) {
    Fill& f = fills[j];
    f.args.base = p[f.slot];
    double* buf = fill_buf.data() + j * static_cast<size_t>(tile);
    q[f.val] = buf;
    if (f.period == 0) {  // one element: the buffer still holds it unless its bytes changed
      uint64_t bits = 0;
      std::memcpy(&bits, p[f.slot], static_cast<size_t>(f.src_es));
      if (f.filled && bits == f.last_bits) continue;
      f.filled = true;
      f.last_bits = bits;
    }
    if (f.period > 0 && f.period < first) {  // one period through the strided load, then copies
      char* b = reinterpret_cast<char*>(buf);
      f.load(f.args, 0, f.period, buf);
      for (int64_t have = f.period; have < first; have *= 2)
        std::memcpy(b + have * f.es, b, static_cast<size_t>(std::min(have, first - have) * f.es));
    } else {
      f.load(f.args, 0, first, buf);
    }
  }
  for (int64_t t = 0; t < n; t += tile) {
    for (const Mem& m : mem) q[m.val] = p[m.slot] + t * m.es;
    fn(q, std::min(tile, n - t));
  }
}

void TileProgram::run_frozen(Env& env, char* const* slot_ptr) const {
  Bind& b = bind_;
  const int64_t n = n_;
  for (size_t o = 0; o < outs_.size(); ++o) b.outp[o] = slot_ptr[outs_[o].slot];
  if (n > 0) {
    b.jit = jit_fn(n);
    if (b.jit != nullptr) ++env.compiled_runs;
    for (size_t e = 0; e < exts_.size(); ++e) b.bound[e].args.base = slot_ptr[exts_[e].slot];
    for (size_t c = 0; c < consts_.size(); ++c) b.cv[c] = env.scalar(consts_[c].slot);
  }
  if (sink_ >= 0) {
    b.red_out = slot_ptr[red_.out];
    run_reduce(n, b, -1, -1).IgnoreError();  // its errors are the layouts', found by prepare
    return;
  }
  if (n >= kParallelThreshold) {
    parallel_for(n, kTile * 8, [&](int64_t lo, int64_t hi) {
      run_chunk<NoSink>(lo, hi, b, nullptr, b.jit);
    });
  } else if (n > 0) {
    run_chunk<NoSink>(0, n, b, nullptr, b.jit);
  }
}

}  // namespace sloth::cpu
