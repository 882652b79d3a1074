#include "sloth/saved_tensors.h"

#include <array>

#include "autograd/function.h"
#include "core/op_attrs.h"
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
    const auto& s = x.impl()->strides();
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

namespace {

// The table's facts (core/ops.def `.saves`) for one op and one set of needing inputs.
SavePlan table_plan(OpId op, uint32_t needs) {
  SavePlan p;
  auto value = [](Save s) { return s == Save::Value || s == Save::Both; };
  auto check = [](Save s) { return s == Save::Check || s == Save::Both; };
  const SavedSet& saves = op_info(op).facts.saves;
  for (int i = 0; i < 3; ++i) {
    const SavedArg& a = saves.args[i];
    if (a.if_needs >= 0 && !has(needs, a.if_needs)) continue;
    if (value(a.save)) p.value |= bit(i);
    if (check(a.save)) p.check |= bit(i);
  }
  p.result_value = value(saves.result);
  p.result_check = check(saves.result);
  return p;
}

// table_plan for every op and every `needs` of operands 0..2 (the only ones a ⟨b⟩ condition
// names: SavedSet has three args), made once: recording with grad asks it per op.
struct PlanTable {
  SavePlanRow plans[kNumOps];
  PlanTable() {
    for (int op = 0; op < kNumOps; ++op)
      for (uint32_t needs = 0; needs < 8; ++needs)
        plans[op][needs] = table_plan(static_cast<OpId>(op), needs);
  }
};

}  // namespace

const SavePlanRow* made_save_plans() {
  static const PlanTable t;
  save_plans.store(t.plans, std::memory_order_release);
  return t.plans;
}

SavePlan adjusted_save_plan(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                            uint32_t needs) {
  // The table's facts...
  SavePlan p = table_save_plan(op, needs);
  // ...and what depends on more than the op.
  switch (op) {
    case OpId::kPow:
      // The table has pow(Tensor, Tensor), which saves self, exponent and result; with a
      // scalar exponent (pow.Tensor_Scalar) only self is saved, the formula still reads both.
      if (in[1].impl()->wrapped_number) {
        p.check &= ~bit(1);
        p.result_check = false;
      }
      break;
    case OpId::kMatmul: p.check &= ~matmul_copied(in); break;
    case OpId::kMean:  // PyTorch's mean(x) saves nothing, mean(x, dims) saves x
      if (MeanAttrs::of(attrs).no_dim_list) p.check &= ~bit(0);
      break;
    case OpId::kLayerNorm:  // native_layer_norm saves input, weight and bias: all operands
      p.check |= in.size() >= 32 ? ~0u : bit(static_cast<int>(in.size())) - 1;
      break;
    // ---- attention and sequence ops ----
    case OpId::kSdpa:  // the formula recomputes the probabilities: q, k, v and the mask
      p.value |= bit(static_cast<int>(in.size())) - 1;
      p.check |= bit(static_cast<int>(in.size())) - 1;
      break;
    default: break;
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
    fn.extras_mut().extra_checks.push_back(std::move(c));
  }
  if (p.result_check) {
    autograd::SavedCheck c;
    c.saved.save(result.impl(), true);
    c.own_output = true;
    fn.extras_mut().extra_checks.push_back(std::move(c));
  }
}

}  // namespace sloth::internal
