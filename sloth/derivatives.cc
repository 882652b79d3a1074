// Derivative formulas, one per differentiable primitive of the op table, written with the
// public ops: the backward pass is lazy IR, batches with the forward pass, and can itself be
// differentiated (create_graph). Each formula reads what PyTorch's node saves (self, other or
// result: sloth/saved_tensors.cc decides, per op, and the version check follows the same
// choice); a result is re-attached to its own node on unpack, so create_graph differentiates
// through it as PyTorch does.
#include <cmath>

#include "autograd/function.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"
#include "lazy/tensor_impl.h"
#include "sloth/autograd_api.h"
#include "sloth/dispatch.h"
#include "sloth/grad_accumulate.h"
#include "sloth/ops.h"
#include "sloth/view_autograd.h"

namespace sloth {
namespace {

using autograd::FormulaArgs;
using lazy::TensorImplPtr;
using Grads = std::vector<TensorImplPtr>;
using internal::sum_to;

Tensor in(const FormulaArgs& a, int i) { return Tensor(a.inputs[i]); }
Tensor grad(const FormulaArgs& a) { return Tensor(a.grad); }
TensorImplPtr ptr(const Tensor& t) { return t.defined() ? t.impl() : nullptr; }
Tensor zeros_for(const FormulaArgs& a, int i) {
  const auto& info = a.input_info[i];
  return zeros(info.shape, TensorOptions().dtype(info.dtype).device(info.device));
}
Tensor mask_of(const Tensor& cond, DType d) { return cond.to(d); }

Grads unary(const FormulaArgs& a) {
  Tensor x = in(a, 0), g = grad(a), y(a.result);
  Tensor r;
  switch (a.op) {
    case OpId::kNeg: r = -g; break;
    case OpId::kAbs: r = g * sign(x); break;
    case OpId::kExp: r = g * y; break;
    case OpId::kLog: r = g / x; break;
    case OpId::kLog1p: r = g / (x + 1.0); break;
    case OpId::kSqrt: r = g / (y * 2.0); break;
    case OpId::kRsqrt: r = g * y * y * y * -0.5; break;
    case OpId::kSin: r = g * cos(x); break;
    case OpId::kCos: r = -g * sin(x); break;
    case OpId::kTanh: r = g * (1.0 - y * y); break;
    case OpId::kSigmoid: r = g * (1.0 - y) * y; break;
    // result > 0 is sign(result) (result >= 0). Written with sign, which is differentiable
    // (with derivative 0), the gradient stays connected to the result as PyTorch's
    // threshold_backward(grad, result) is: under create_graph it requires grad.
    case OpId::kRelu: r = g * sign(y); break;
    case OpId::kGelu: {
      // gelu'(x) = cdf(x) + x pdf(x). cdf is gelu(x) / x: gelu(x) is the forward value (the
      // same node, merged by the plan's CSE), so the fused step evaluates erf once, not
      // twice (it is most of GELU's cost). Near 0, where the quotient would lose precision or
      // divide by zero, cdf = 1/2 + x pdf(0), its first-order expansion (right value and
      // right derivative at 0, so double backward stays exact there).
      const double pdf0 = 1.0 / std::sqrt(2.0 * M_PI);
      Tensor pdf = exp(x * x * -0.5) * pdf0;
      Tensor tiny = abs(x) < 1e-30;
      Tensor cdf = where(tiny, x * pdf0 + 0.5, gelu(x) / where(tiny, 1.0, x));
      r = g * (cdf + x * pdf);
      break;
    }
    case OpId::kSilu: { Tensor s = sigmoid(x); r = g * s * (1.0 + x * (1.0 - s)); break; }
    case OpId::kErf: r = g * exp(-(x * x)) * M_2_SQRTPI; break;
    case OpId::kSquare: r = g * x * 2.0; break;
    case OpId::kReciprocal: r = -g * y * y; break;
    // zeros_like(grad), as PyTorch: a constant, so it does not require grad under create_graph.
    case OpId::kSign: case OpId::kFloor: case OpId::kCeil: case OpId::kRound: case OpId::kTrunc:
      r = zeros(g.shape(), TensorOptions().dtype(g.dtype()).device(g.device()));
      break;
    case OpId::kCast: r = g; break;
    default: fail("internal: no unary formula for %s", op_name(a.op));
  }
  return {ptr(r)};
}

Grads binary(const FormulaArgs& a) {
  Tensor x = in(a, 0), y = in(a, 1), g = grad(a);
  const DType d = g.dtype();
  Tensor gx, gy;
  switch (a.op) {
    case OpId::kAdd: gx = g; gy = g; break;
    case OpId::kSub: gx = g; gy = -g; break;
    case OpId::kMul:
      if (a.needs[0]) gx = g * y;
      if (a.needs[1]) gy = g * x;
      break;
    case OpId::kDiv:
      if (a.needs[0]) gx = g / y;
      if (a.needs[1]) gy = -g * x / (y * y);
      break;
    case OpId::kPow:
      if (a.needs[0]) {
        // The 1 is a 0-dim tensor of the result's dtype: a number exponent is a wrapped
        // scalar, and wrapped - wrapped is computed in the default float32 (PyTorch's
        // promotion), which put float64 gradients off by 1e-7.
        const Tensor one = full({}, 1.0, TensorOptions().dtype(d).device(g.device()));
        gx = g * y * pow(x, y - one);
      }
      if (a.needs[1]) {
        // d/dy x^y = x^y log x; 0 where x == 0 and y >= 0 (as PyTorch masks it).
        Tensor safe = where(x == 0.0, 1.0, x);
        gy = g * pow(x, y) * log(safe);
      }
      break;
    // d/dx = 1; d/dy = -floor(x / y) (remainder) or -trunc(x / y) (fmod), as PyTorch.
    case OpId::kRemainder:
      if (a.needs[0]) gx = g;
      if (a.needs[1]) gy = -g * floor_divide(x, y);
      break;
    case OpId::kFmod:
      if (a.needs[0]) gx = g;
      if (a.needs[1]) gy = -g * trunc(x / y);
      break;
    // Piecewise constant: 0 (PyTorch has no derivative for floor_divide and raises).
    case OpId::kFloorDivide:
      if (a.needs[0]) gx = zeros(g.shape(), TensorOptions().dtype(g.dtype()).device(g.device()));
      if (a.needs[1]) gy = zeros(g.shape(), TensorOptions().dtype(g.dtype()).device(g.device()));
      break;
    case OpId::kMaximum: case OpId::kMinimum: {
      Tensor win = a.op == OpId::kMaximum ? x > y : x < y;
      Tensor tie = mask_of(x == y, d) * 0.5;
      gx = g * (mask_of(win, d) + tie);
      gy = g * (mask_of(logical_not(win), d) - tie);
      break;
    }
    default: fail("internal: no binary formula for %s", op_name(a.op));
  }
  return {a.needs[0] && gx.defined() ? ptr(sum_to(gx, a.input_info[0].shape)) : nullptr,
          a.needs[1] && gy.defined() ? ptr(sum_to(gy, a.input_info[1].shape)) : nullptr};
}

Grads where_grad(const FormulaArgs& a) {
  Tensor c = in(a, 0), g = grad(a);
  Tensor z = g * 0.0;
  return {nullptr, a.needs[1] ? ptr(sum_to(where(c, g, z), a.input_info[1].shape)) : nullptr,
          a.needs[2] ? ptr(sum_to(where(c, z, g), a.input_info[2].shape)) : nullptr};
}

Grads clamp_grad(const FormulaArgs& a) {
  Tensor x = in(a, 0), lo = in(a, 1), hi = in(a, 2), g = grad(a);
  Tensor pass = logical_and(x >= lo, x <= hi);
  return {ptr(sum_to(g * pass.to(g.dtype()), a.input_info[0].shape)), nullptr, nullptr};
}

// A reduced gradient broadcast back over the reduced dims.
Tensor expand_reduced(const Tensor& g, const FormulaArgs& a) {
  const Shape& xs = a.input_info[0].shape;
  Shape keep = xs;
  for (int64_t d : a.attrs.dims) keep[d] = 1;
  return g.reshape(keep).expand(xs);
}

Grads reduce_grad(const FormulaArgs& a) {
  Tensor x = in(a, 0), g = grad(a);
  switch (a.op) {
    case OpId::kSum: return {ptr(expand_reduced(g, a))};
    case OpId::kProd: {
      // d prod / d x_i = product of the others. Dividing the product by x_i is wrong where
      // x_i == 0, so zeros are counted per reduced group: none -> p / x_i; exactly one -> the
      // product of the nonzeros at the zero, 0 elsewhere; more -> 0 everywhere. Zeros are
      // replaced by 1 before dividing, so no branch computes inf or NaN.
      Attrs keep = a.attrs;
      ReduceAttrs{.dims = a.attrs.dims, .keepdim = true}.store(keep);
      const Tensor zero = x.detach() == 0.0;
      const Tensor safe = where(zero, 1.0, x);
      const Tensor p = call_op(OpId::kProd, {safe}, keep);
      const Tensor zeros = sum(zero.to(x.dtype()), Shape(a.attrs.dims.begin(), a.attrs.dims.end()), true);
      const Tensor d = where(zeros == 0.0, p / safe, where(logical_and(zeros == 1.0, zero), p, 0.0));
      return {ptr(expand_reduced(g, a) * d)};
    }
    case OpId::kAmax: case OpId::kAmin: {
      Attrs keep = a.attrs;
      ReduceAttrs{.dims = a.attrs.dims, .keepdim = true}.store(keep);
      Tensor m = call_op(a.op, {x.detach()}, keep);
      Tensor hit = (x == m).to(g.dtype());
      Tensor count = sum(hit, Shape(a.attrs.dims.begin(), a.attrs.dims.end()), true);
      return {ptr(expand_reduced(g, a) * hit / count)};
    }
    default: fail("internal: no reduction formula for %s", op_name(a.op));
  }
}

// Each operand is saved only when the other needs a gradient (as PyTorch), so shapes come
// from input_info, never from an operand that may not be there.
Grads matmul_grad(const FormulaArgs& a) {
  Tensor x = in(a, 0), y = in(a, 1), g = grad(a);
  const Shape &xs = a.input_info[0].shape, &ys = a.input_info[1].shape;
  const size_t dx = xs.size(), dy = ys.size();
  if (dx == 1 && dy == 1)
    return {a.needs[0] ? ptr(g * y) : nullptr, a.needs[1] ? ptr(g * x) : nullptr};
  if (dx == 2 && dy == 2)  // the common case: no reshapes, nothing to sum
    return {a.needs[0] ? ptr(matmul(g, y.t())) : nullptr, a.needs[1] ? ptr(matmul(x.t(), g)) : nullptr};
  if (dy == 2 && dx >= 3) {
    // A shared weight (nn::Linear on [batch..., m, k] inputs): the batch and row dims fold
    // into one GEMM over batch*m rows, so y's gradient is a single [k, batch*m] x [batch*m, n]
    // product instead of one small product per batch entry and a sum over the batch.
    const int64_t k = ys[0], n = ys[1];
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < dx; ++d) rows *= xs[d];
    return {a.needs[0] ? ptr(matmul(g, y.t())) : nullptr,
            a.needs[1] ? ptr(matmul(x.reshape({rows, k}).t(), g.reshape({rows, n}))) : nullptr};
  }
  auto as2 = [](Shape s, bool left) {
    if (s.size() == 1) s.insert(left ? s.begin() : s.end(), 1);
    return s;
  };
  const Shape x2s = as2(xs, true), y2s = as2(ys, false);
  Shape gs = g.shape();
  if (dx == 1) gs.insert(gs.end() - (dy == 1 ? 0 : 1), 1);
  if (dy == 1) gs.push_back(1);
  Tensor g2 = g.reshape(gs);
  Tensor gx, gy;
  if (a.needs[0]) gx = sum_to(matmul(g2, y.reshape(y2s).transpose(-1, -2)), x2s).reshape(xs);
  if (a.needs[1]) gy = sum_to(matmul(x.reshape(x2s).transpose(-1, -2), g2), y2s).reshape(ys);
  return {ptr(gx), ptr(gy)};
}

Grads view_grad(const FormulaArgs& a) {
  Tensor g = grad(a);
  const Shape& xs = a.input_info[0].shape;
  switch (a.op) {
    case OpId::kExpand: return {ptr(sum_to(g, xs))};  // every broadcast copy adds
    case OpId::kAsStrided: {
      // Windows may overlap: every element of the view adds its gradient to the storage
      // element it reads (index_add over the view's storage indices).
      const int64_t n = numel(xs);
      Tensor pos = arange(0.0, static_cast<double>(n), 1.0, TensorOptions().dtype(kInt64).device(g.device()));
      Tensor idx = call_op(OpId::kAsStrided, {pos}, a.attrs).reshape({-1});
      Tensor flat = index_add(zeros({n}, TensorOptions().dtype(g.dtype()).device(g.device())), 0, idx,
                              g.reshape({-1}));
      return {ptr(flat.reshape(xs))};
    }
    default: {
      // Reshape, Permute: the inverse view of g; Slice, Select, Diagonal: g scattered into
      // zeros through the table's inverse op.
      if (a.op == OpId::kPermute && xs.size() == 2 && a.attrs.dims.size() == 2 && a.attrs.dims[0] == 1)
        return {ptr(internal::transpose_grad(g))};
      ViewInverse inv = inverse_of_view(a.op, a.attrs, xs);
      if (inv.scatter) return {ptr(call_op(inv.op, {zeros_for(a, 0), g}, inv.attrs))};
      return {ptr(call_op(inv.op, {g}, inv.attrs))};
    }
  }
}

Grads scatter_grad(const FormulaArgs& a) {
  Tensor g = grad(a);
  const OpId view = *view_of_scatter(a.op);
  Tensor gb, gs;
  if (a.needs[0]) gb = call_op(a.op, {g, zeros_for(a, 1)}, a.attrs);
  if (a.needs[1]) gs = call_op(view, {g}, a.attrs).clone();
  return {ptr(gb), ptr(gs)};
}

Grads index_grad(const FormulaArgs& a) {
  Tensor g = grad(a);
  const int64_t dim = DimAttrs::of(a.attrs).dim;
  switch (a.op) {
    case OpId::kIndexSelect:
      return {ptr(index_add(zeros_for(a, 0), dim, in(a, 1).reshape({-1}),
                            g.dim() == 0 ? g.reshape({1}) : g)),
              nullptr};
    case OpId::kGather: {
      // The zero base as one element broadcast: scatter_add's copy of it is a fill (one write
      // pass), not a zeroed buffer read back (max_pool2d's backward, nll_loss's).
      const auto& info = a.input_info[0];
      Tensor z = zeros({}, TensorOptions().dtype(info.dtype).device(info.device)).expand(info.shape);
      return {ptr(scatter_add(z, dim, in(a, 1), g)), nullptr};
    }
    case OpId::kScatterAdd:
      return {a.needs[0] ? ptr(g) : nullptr, nullptr, a.needs[2] ? ptr(gather(g, dim, in(a, 1))) : nullptr};
    case OpId::kIndexAdd:
      return {a.needs[0] ? ptr(g) : nullptr, nullptr,
              a.needs[2] ? ptr(index_select(g, dim, in(a, 1))) : nullptr};
    case OpId::kIndexPut: {
      Tensor idx = in(a, 1);
      idx = where(idx < 0, idx + a.input_info[0].shape[0], idx);
      Tensor gb, gv;
      if (a.needs[0]) {
        Shape zs = a.input_info[0].shape;
        zs[0] = idx.shape()[0];
        gb = index_put(g, idx, zeros(zs, TensorOptions().dtype(g.dtype()).device(g.device())));
      }
      if (a.needs[2]) gv = sum_to(index_select(g, 0, idx), a.input_info[2].shape);
      return {ptr(gb), nullptr, ptr(gv)};
    }
    default: fail("internal: no index formula for %s", op_name(a.op));
  }
}

Grads cat_grad(const FormulaArgs& a) {
  Tensor g = grad(a);
  Grads out(a.input_info.size());
  const int64_t dim = DimAttrs::of(a.attrs).dim;
  int64_t off = 0;
  for (size_t i = 0; i < a.input_info.size(); ++i) {
    int64_t n = a.input_info[i].shape[dim];
    if (a.needs[i]) out[i] = ptr(g.narrow(dim, off, n));
    off += n;
  }
  return out;
}

Grads clone_grad(const FormulaArgs& a) { return {a.grad}; }

TensorImplPtr math_add(const TensorImplPtr& a, const TensorImplPtr& b) {
  return internal::accumulate_grads(Tensor(a), Tensor(b)).impl();
}
TensorImplPtr math_zeros(const autograd::OutputInfo& i) {
  return zeros(i.shape, TensorOptions().dtype(i.dtype).device(i.device)).impl();
}
TensorImplPtr math_detach(const TensorImplPtr& t) { return Tensor(t).detach().impl(); }
TensorImplPtr math_ones_like(const TensorImplPtr& t) { return ones_like(Tensor(t)).impl(); }
TensorImplPtr math_cast(const TensorImplPtr& t, DType d) { return Tensor(t).to(d).impl(); }

struct Register {
  Register() {
    autograd::set_grad_math({math_add, math_zeros, math_detach, math_ones_like, math_cast});
    using autograd::register_formula;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& info = op_info(static_cast<OpId>(i));
      if (info.grad != GradKind::Formula) continue;
      autograd::Formula f = nullptr;
      switch (info.category) {
        case OpCategory::Unary: f = unary; break;
        case OpCategory::Binary: f = binary; break;
        case OpCategory::Reduce: f = reduce_grad; break;
        case OpCategory::Matmul: f = matmul_grad; break;
        case OpCategory::View: f = view_grad; break;
        case OpCategory::Scatter: f = scatter_grad; break;
        case OpCategory::Index: f = index_grad; break;
        case OpCategory::Kernel: f = internal::kernel_op_formula(info.id); break;
        default: break;
      }
      if (info.id == OpId::kWhere) f = where_grad;
      if (info.id == OpId::kClamp) f = clamp_grad;
      if (info.id == OpId::kCat) f = cat_grad;
      if (info.id == OpId::kClone) f = clone_grad;
      register_formula(info.id, f);
    }
  }
} register_formulas;

}  // namespace
}  // namespace sloth
