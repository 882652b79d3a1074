// Binding a run of the tile interpreter: outputs allocated or taken over from dead operands,
// each operand's read path chosen (in place, linear with conversion, or strided/broadcast),
// scalars read. The read paths depend only on the operands' layouts, so they are kept from
// run to run and recomputed only when a layout changes.
#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/strided.h"
#include "backends/cpu/tile_program.h"

namespace sloth::cpu {

// Outputs allocated (or donated buffers taken over), operands bound, scalars read, the
// reduction's output allocated: everything a run needs before its loops.
absl::Status TileProgram::prepare(Env& env, Bind& b, bool donate) const {
  const int64_t n = n_;
  // Cleared only after a run that donated (most runs of most programs do not).
  if (b.donated.size() != exts_.size() || b.any_donated) {
    b.donated.assign(exts_.size(), 0);
    b.donor_ptr.assign(exts_.size(), nullptr);
    b.any_donated = false;
  }
  b.outp.resize(outs_.size());
  // Which operands may give their buffer to which output depends on the layouts only (dtype,
  // shape, contiguity) but for the reference counts: under the same layout generation the
  // candidates of the last run are kept (cand), and a run only checks that each candidate's
  // buffer is still unshared.
  const bool cands_ok = donate && env.layout_gen != 0 && b.cand_gen == env.layout_gen;
  if (donate && !cands_ok) {
    b.cand.clear();
    b.cand_begin.assign(outs_.size() + 1, 0);
    for (size_t o = 0; o < outs_.size(); ++o) {
      const DType t = vals_[outs_[o].val].dtype;
      b.cand_begin[o] = static_cast<int32_t>(b.cand.size());
      for (size_t j = 0; j < donors_.size(); ++j) {
        const Donor& d = donors_[j];
        if (d.last_read > out_def_[o]) continue;
        const DeviceData& x = env.vals[exts_[d.ext].slot];
        if (x.dtype != t || !lazy::same_dims(x.layout.shape, shape_) || !x.is_contiguous() ||
            x.numel() != n)
          continue;
        b.cand.push_back(static_cast<int32_t>(j));
      }
    }
    b.cand_begin[outs_.size()] = static_cast<int32_t>(b.cand.size());
    b.cand_gen = env.layout_gen;  // 0: recomputed next run too
  }
  for (size_t o = 0; o < outs_.size(); ++o) {
    const DType t = vals_[outs_[o].val].dtype;
    bool done = false;
    for (int32_t j = donate ? b.cand_begin[o] : 0; donate && j < b.cand_begin[o + 1]; ++j) {
      const Donor& d = donors_[b.cand[j]];
      if (b.donated[d.ext]) continue;
      const int slot = exts_[d.ext].slot;
      DeviceData& x = env.vals[slot];
      if (!x.storage || x.storage->use_count() != 1) continue;
      b.donated[d.ext] = 1;
      b.any_donated = true;
      // The operand is dead after this kernel (its slot is released at the kernel's end):
      // its buffer moves to the output slot (no reference count taken and dropped), and
      // every load of the operand reads it through donor_ptr.
      char* p = ptr(x);
      for (size_t e = 0; e < exts_.size(); ++e)
        if (exts_[e].slot == slot) b.donor_ptr[e] = p;
      lazy::move_data(env.vals[outs_[o].slot], x);
      done = true;
      break;
    }
    if (!done) env.alloc_to(outs_[o].slot, shape_, t);
    b.outp[o] = ptr(env.vals[outs_[o].slot]);
  }
  b.jit = nullptr;
  if (n > 0) {
    // Same layout generation as the run that last checked the keys: the layouts are the
    // same (a replayed step), only the pointers below change.
    if (!b.valid || env.layout_gen == 0 || b.gen != env.layout_gen) {
      bool hit = b.valid;
      for (size_t e = 0; e < exts_.size() && hit; ++e) {
        const DeviceData& x = env.get(exts_[e].slot);
        hit = x.dtype == b.key_dtype[e] && x.layout.shape == b.key_shape[e] &&
              x.layout.strides == b.key_strides[e];
      }
      if (!hit) rebind(env, b);
      b.gen = env.layout_gen;
    }
    b.jit = jit_fn(n);
    if (b.jit != nullptr) ++env.compiled_runs;
    for (size_t e = 0; e < exts_.size(); ++e)
      b.bound[e].args.base = b.donor_ptr[e] ? b.donor_ptr[e] : ptr(env.get(exts_[e].slot));
    b.cv.resize(consts_.size());
    for (size_t c = 0; c < consts_.size(); ++c) b.cv[c] = env.scalar(consts_[c].slot);
  }
  if (sink_ >= 0) {
    const int64_t kn = numel(red_.shape);
    if (kn > 0 && n == 0 && (red_.op == OpId::kAmax || red_.op == OpId::kAmin))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: cannot reduce over an empty dim (no identity)", op_name(red_.op)));
    b.red_out = ptr(env.alloc_to(red_.out, red_.shape, red_.dtype));
  }
  return absl::OkStatus();
}

void TileProgram::rebind(Env& env, Bind& b) const {
  const size_t ne = exts_.size();
  b.key_dtype.resize(ne);
  b.key_shape.resize(ne);
  b.key_strides.resize(ne);
  b.st.resize(ne + 1);
  b.geo = shape_;
  absl::InlinedVector<const DeviceData*, 8> data(ne);
  const size_t nd_out = shape_.size();
  for (size_t e = 0; e < ne; ++e) {
    const DeviceData& x = *(data[e] = &env.get(exts_[e].slot));
    b.key_dtype[e] = x.dtype;
    b.key_shape[e] = x.layout.shape;
    b.key_strides[e] = x.layout.strides;
    Dims& s = b.st[e];
    s.resize(nd_out);
    broadcast_strides_into(x.layout.shape, x.layout.strides, absl::MakeSpan(s.data(), s.size()));
  }
  Dims& lin_out = b.st.back();
  lin_out.resize(nd_out);
  contiguous_strides_into(shape_, absl::MakeSpan(lin_out.data(), lin_out.size()));
  absl::InlinedVector<Dims*, 9> sp;
  for (auto& x : b.st) sp.push_back(&x);
  coalesce(b.geo, absl::MakeConstSpan(sp));
  const Dims& lin = b.st.back();
  b.bound.assign(ne, Bound{});
  for (size_t e = 0; e < ne; ++e) {
    Bound& x = b.bound[e];
    x.args = {nullptr, b.geo.data(), b.st[e].data(), static_cast<int>(b.geo.size())};
    x.linear = b.st[e] == lin;
    x.direct = x.linear && data[e]->dtype == exts_[e].dtype;
    x.src_size = dtype_size(data[e]->dtype);
    const bool splat = std::all_of(b.st[e].begin(), b.st[e].end(), [](int64_t s) { return s == 0; });
    x.splat = splat && !x.linear;
    const size_t nd = b.geo.size();
    x.period = 0;
    if (!splat && !x.linear && nd >= 2 && b.geo[nd - 1] > 0 && kTile % b.geo[nd - 1] == 0 &&
        std::all_of(b.st[e].begin(), b.st[e].begin() + static_cast<ptrdiff_t>(nd - 1),
                    [](int64_t s) { return s == 0; }))
      x.period = b.geo[nd - 1];
    x.load = splat ? tile::splat_for(data[e]->dtype, exts_[e].dtype)
                   : tile::load_for(data[e]->dtype, exts_[e].dtype);
    x.conv = ew::conv_for(data[e]->dtype, exts_[e].dtype);
  }
  b.valid = true;
}

}  // namespace sloth::cpu
