#include "lazy/matmul_transpose.h"

#include <vector>

#include "core/op_attrs.h"

namespace sloth::lazy {
namespace {

// Does `v` (a view instruction reading a 2-D value) swap its two dims?
bool transposes_2d(const Instr& v, IntSpan in_shape) {
  if (in_shape.size() != 2 || v.shape.size() != 2) return false;
  switch (v.op) {
    case OpId::kT: return true;
    case OpId::kTranspose: {
      const TransposeAttrs t = TransposeAttrs::of(v.attrs);
      const int64_t d0 = t.dim0 < 0 ? t.dim0 + 2 : t.dim0, d1 = t.dim1 < 0 ? t.dim1 + 2 : t.dim1;
      return d0 != d1;
    }
    case OpId::kPermute:
      return v.attrs->dims.size() == 2 && v.attrs->dims[0] == 1 && v.attrs->dims[1] == 0;
    default: return false;
  }
}

}  // namespace

int transpose_matmul_outputs(Plan& p) {
  const size_t n = p.instrs.size();
  std::vector<int32_t> readers(p.slots.size(), 0), producer(p.slots.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t s : p.instrs[i].in) ++readers[s];
    producer[p.instrs[i].out] = static_cast<int32_t>(i);
  }
  for (int32_t o : p.outputs) readers[o] += 2;  // an output is read from outside: keep it
  // Matmul index -> the transpose that replaces it (which is then dropped).
  std::vector<int32_t> turned(n, -1);
  std::vector<bool> drop(n, false);
  int count = 0;
  for (size_t v = 0; v < n; ++v) {
    const Instr& view = p.instrs[v];
    if (view.in.size() != 1) continue;
    const int32_t m = producer[view.in[0]];
    if (m < 0 || readers[view.in[0]] != 1) continue;
    const Instr& mm = p.instrs[m];
    if (mm.op != OpId::kMatmul || mm.in.size() != 2 || mm.shape.size() != 2) continue;
    if (p.slots[mm.in[0]].shape.size() != 2 || p.slots[mm.in[1]].shape.size() != 2) continue;
    if (!transposes_2d(view, mm.shape) || view.dtype != mm.dtype) continue;
    turned[m] = static_cast<int32_t>(v);
    drop[v] = true;
    ++count;
  }
  if (count == 0) return 0;
  std::vector<Instr> out;
  out.reserve(n + count);
  for (size_t i = 0; i < n; ++i) {
    if (drop[i]) continue;
    if (turned[i] < 0) {
      out.push_back(std::move(p.instrs[i]));
      continue;
    }
    const Instr& view = p.instrs[turned[i]];
    Instr& mm = p.instrs[i];
    const int32_t a = mm.in[0], b = mm.in[1];
    // a^T reuses the GEMM's old output slot (now read by nobody); b^T gets a new one.
    auto transpose_of = [&](int32_t src, int32_t slot) {
      const Dims& s = p.slots[src].shape;
      Instr t{view.op, p.slots[src].dtype, Shape{s[1], s[0]}, view.attrs, {src}, slot};
      p.slots[slot].kind = SlotKind::kValue;
      p.slots[slot].dtype = t.dtype;
      p.slots[slot].shape = t.shape;
      return t;
    };
    const int32_t at_slot = mm.out;
    const int32_t bt_slot = static_cast<int32_t>(p.slots.size());
    p.slots.emplace_back();
    out.push_back(transpose_of(b, bt_slot));
    out.push_back(transpose_of(a, at_slot));
    Instr g{OpId::kMatmul, mm.dtype, view.shape, mm.attrs, {bt_slot, at_slot}, view.out};
    out.push_back(std::move(g));
  }
  p.instrs = std::move(out);
  return count;
}

}  // namespace sloth::lazy
