#include "sloth/saved_tensors.h"

#include "autograd/function.h"
#include "sloth/view_autograd.h"

namespace sloth::internal {
namespace {

constexpr uint32_t bit(int i) { return 1u << i; }
bool has(uint32_t mask, int i) { return (mask >> i & 1) != 0; }

// PyTorch's matmul saves views of its operands, so a write to an operand raises, except for
// an operand it had to copy (folding a >=3-D right operand under a 1-D/2-D left one is a
// transposed reshape; a batch operand expanded and then reshaped; a non-contiguous operand
// folded into a matrix). Those copies are private: writes to the original are fine.
uint32_t matmul_copied(absl::Span<const Tensor> in) {
  const Tensor &x = in[0], &y = in[1];
  const int64_t dx = x.dim(), dy = y.dim();
  if (dx <= 2 && dy >= 3) return bit(1);
  if (dx >= 3 && dy <= 2) {
    if (x.is_contiguous()) return 0;
    // A (b, n, m) whose last two dims are transposed goes to bmm without a copy (should_fold).
    const auto& s = x.impl()->strides;
    const auto& sh = x.shape();
    if (dx == 3 && dy == 2 && s[2] != 1 && s[0] == sh[1] * sh[2]) return 0;
    return bit(0);
  }
  if (dx >= 3 && dy >= 3) {
    uint32_t copied = 0;
    const int64_t nb = std::max(dx, dy) - 2;
    for (int k = 0; k < 2; ++k) {
      const Tensor& t = in[k];
      const int64_t tb = t.dim() - 2;
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t ti = j - (nb - tb);
        const int64_t own = ti >= 0 ? t.shape()[ti] : 1;
        const Tensor& o = in[1 - k];
        const int64_t oi = j - (nb - (o.dim() - 2));
        const int64_t other = oi >= 0 ? o.shape()[oi] : 1;
        if (own == 1 && other != 1) copied |= bit(k);
      }
    }
    return copied;
  }
  return 0;
}

}  // namespace

SavePlan save_plan(OpId op, const Attrs& attrs, absl::Span<const Tensor> in, uint32_t needs) {
  (void)attrs;
  SavePlan p;
  auto both = [&](uint32_t m) { p.value |= m; p.check |= m; };
  switch (op) {
    case OpId::kAbs: case OpId::kLog: case OpId::kLog1p: case OpId::kSin: case OpId::kCos:
    case OpId::kGelu: case OpId::kSilu: case OpId::kErf: case OpId::kSquare:
      both(bit(0));
      break;
    case OpId::kExp: case OpId::kSqrt: case OpId::kRsqrt: case OpId::kTanh: case OpId::kSigmoid:
    case OpId::kRelu: case OpId::kReciprocal:
      p.result_value = p.result_check = true;
      break;
    case OpId::kMul:
      if (has(needs, 1)) both(bit(0));
      if (has(needs, 0)) both(bit(1));
      break;
    case OpId::kDiv:
      both(bit(1));
      if (has(needs, 1)) both(bit(0));
      break;
    case OpId::kPow:
      both(bit(0));
      p.value |= bit(1);
      // pow(Tensor, Tensor) also saves the exponent and the result; pow(Tensor, Scalar) not.
      if (!in[1].impl()->wrapped_number) {
        p.check |= bit(1);
        p.result_check = true;
      }
      break;
    case OpId::kMaximum: case OpId::kMinimum: both(bit(0) | bit(1)); break;
    case OpId::kWhere: both(bit(0)); break;
    case OpId::kClamp: both(bit(0) | bit(1) | bit(2)); break;
    case OpId::kProd: case OpId::kAmax: case OpId::kAmin:
      both(bit(0));
      p.result_check = true;
      break;
    case OpId::kMatmul: {
      if (has(needs, 1)) both(bit(0));
      if (has(needs, 0)) both(bit(1));
      p.check &= ~matmul_copied(in);
      break;
    }
    case OpId::kIndexSelect: case OpId::kIndexPut: both(bit(1)); break;
    case OpId::kGather:
      both(bit(1));
      p.check |= bit(0);
      break;
    case OpId::kScatterAdd:
      if (has(needs, 2)) both(bit(1));
      break;
    case OpId::kIndexAdd:
      if (has(needs, 2)) {
        both(bit(1));
        p.check |= bit(2);
      }
      break;
    // Composites: PyTorch's node for the whole op (checks only; the parts keep the values).
    case OpId::kMean: if (attrs.i3 == 0) p.check |= bit(0); break;  // mean(x) saves nothing
    case OpId::kVar: p.check |= bit(0); break;
    case OpId::kStd: case OpId::kLogsumexp: p.check |= bit(0); p.result_check = true; break;
    case OpId::kSoftmax: case OpId::kLogSoftmax: p.result_check = true; break;
    case OpId::kNllLoss: case OpId::kMseLoss: case OpId::kBceWithLogits:
      p.check |= bit(0) | bit(1);
      break;
    case OpId::kCrossEntropy: p.check |= bit(1); break;
    case OpId::kLayerNorm: p.check |= in.size() >= 32 ? ~0u : bit(static_cast<int>(in.size())) - 1; break;
    case OpId::kEmbedding: p.check |= bit(0) | bit(1); break;
    case OpId::kMaskedFill: p.check |= bit(1); break;
    default: break;  // sizes and scalars only (neg, add, sum, views, cat, clone, ...)
  }
  return p;
}

void add_composite_checks(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                          const Tensor& result, uint64_t first_seq) {
  if (!result.defined()) return;
  // A result that is a view of a value made inside (embedding's reshape) gets its grad_fn
  // regenerated after a write to its group: the checks go on its base's node, which stays.
  const lazy::TensorImpl& holder = result.impl()->is_view() ? *result.impl()->view_base : *result.impl();
  auto* m = autograd::meta(holder);
  if (m == nullptr || !m->grad_fn || m->grad_fn->sequence_nr < first_seq) return;
  if (auto* rm = autograd::meta(*result.impl()); rm && rm->grad_fn && rm->grad_fn->sequence_nr >= first_seq)
    if (auto* ob = dynamic_cast<autograd::OpBackward*>(rm->grad_fn.get())) ob->set_name_op(op);
  autograd::GradFn& fn = *m->grad_fn;
  if (auto* ob = dynamic_cast<autograd::OpBackward*>(&fn)) ob->set_name_op(op);
  const SavePlan p = save_plan(op, attrs, in, 0);
  for (size_t i = 0; i < in.size() && i < 32; ++i) {
    if (!has(p.check, static_cast<int>(i)) || in[i].impl()->wrapped_number) continue;
    autograd::SavedCheck c;
    c.saved.save(in[i].impl(), true);
    c.producer = gradient_edge_of(in[i]);
    fn.extra_checks.push_back(std::move(c));
  }
  if (p.result_check) {
    autograd::SavedCheck c;
    c.saved.save(result.impl(), true);
    c.own_output = true;
    fn.extra_checks.push_back(std::move(c));
  }
}

}  // namespace sloth::internal
