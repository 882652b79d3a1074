// What each op's backward node saves, per PyTorch 1.13 (../shared/notes/SAVED_TENSORS.md):
// the values its formula reads, and the subset PyTorch saves, whose in-place modification
// after the op makes backward fail. The facts are the `.saves` column of core/ops.def, for
// primitives (kept by their OpBackward) and composites (PyTorch's node for the whole op: the
// checks go on the node of its result); save_plan() adds the cases that depend on more than
// the op (a scalar exponent, matmul's copied operands, mean(), layer_norm's operand count).
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/types/span.h"
#include "core/attrs.h"
#include "core/op_table.h"
#include "sloth/tensor.h"

namespace sloth::internal {

struct SavePlan {
  uint32_t value = 0;          // bit i: the formula reads input i
  uint32_t check = 0;          // bit i: PyTorch saves input i (version-checked at backward)
  bool result_value = false;   // the formula reads the result
  bool result_check = false;   // PyTorch saves the result
};

// The table's plans, [op][needs & 7] (see table_save_plan): null until made_save_plans()
// first runs. Read inline per op recorded with grad (a function-local static cost a call and
// its guard, ~40 instructions per op).
using SavePlanRow = SavePlan[8];
inline std::atomic<const SavePlanRow*> save_plans{nullptr};
const SavePlanRow* made_save_plans();
// The table's plan for `op` when inputs `needs & 7` require grad (made once, on first use).
inline const SavePlan& table_save_plan(OpId op, uint32_t needs) {
  const SavePlanRow* t = save_plans.load(std::memory_order_acquire);
  if (t == nullptr) t = made_save_plans();
  return t[static_cast<int>(op)][needs & 7];
}
// save_plan for the ops whose plan depends on more than the table (see below).
SavePlan adjusted_save_plan(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                            uint32_t needs);
// save_plan reads the operands' tensors (shapes, strides, count) or attrs for `op`.
inline bool save_plan_reads_operands(OpId op) {
  return op == OpId::kMatmul || op == OpId::kMean || op == OpId::kLayerNorm || op == OpId::kSdpa;
}
// The plan of pow (by which operand requires grad) and of the ops above is not the table row.
inline bool save_plan_adjusts(OpId op) { return op == OpId::kPow || save_plan_reads_operands(op); }

// `needs` bit i: input i requires grad (PyTorch's ⟨b⟩ conditions depend on it). Inline: the
// common op reads its table row in place (a returned copy of the 12-byte plan, assembled from
// byte stores and reloaded as words, stalled store forwarding: ~7% of recording with grad).
inline SavePlan save_plan(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                          uint32_t needs) {
  if (save_plan_adjusts(op)) return adjusted_save_plan(op, attrs, in, needs);
  return table_save_plan(op, needs);
}
// save_plan for a binary op with default attrs whose operand `number_pos` is a C++ number that
// has no tensor (call_op_number). Not for the ops save_plan_reads_operands() names.
inline SavePlan save_plan_with_number(OpId op, uint32_t needs, int number_pos) {
  SavePlan p = table_save_plan(op, needs);
  // pow.Tensor_Scalar saves only self (see adjusted_save_plan).
  if (op == OpId::kPow && number_pos == 1) {
    p.check &= ~2u;
    p.result_check = false;
  }
  return p;
}

// After a composite op ran: puts PyTorch's saved set for it (inputs and result, checks only)
// on the node of `result`, when that node was made by this call (sequence_nr >= first_seq),
// and names the node after the composite.
void add_composite_checks(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                          const Tensor& result, uint64_t first_seq);

}  // namespace sloth::internal
