#include "backends/cpu/fused_reduce_rule.h"

#include <algorithm>
#include <vector>

#include "core/op_table.h"

namespace sloth::cpu {

using lazy::Instr;
using lazy::Plan;

int fusable_reduce(const Plan& plan, const lazy::Kernel& kern) {
  if (kern.kind != lazy::KernelKind::kReduce) return 0;
  int anchor = -1;
  for (size_t j = 0; j < kern.instrs.size(); ++j)
    if (op_info(plan.instrs[kern.instrs[j]].op).category == OpCategory::Reduce) {
      anchor = static_cast<int>(j);
      break;
    }
  if (anchor <= 0) return 0;
  const Instr& r = plan.instrs[kern.instrs[anchor]];
  if (r.op != OpId::kSum && r.op != OpId::kProd && r.op != OpId::kAmax && r.op != OpId::kAmin)
    return 0;
  const Dims& xs = plan.slots[r.in[0]].shape;
  bool produced = false;
  for (int j = 0; j < anchor; ++j) {
    const Instr& p = plan.instrs[kern.instrs[j]];
    if (!is_elementwise(p.op) || p.shape != xs) return 0;
    produced |= p.out == r.in[0];
  }
  if (!produced) return 0;
  const int64_t nd = static_cast<int64_t>(xs.size());
  std::vector<int64_t> dims(r.attrs->dims.begin(), r.attrs->dims.end());
  if (dims.empty()) return anchor;  // everything
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  for (size_t j = 0; j < dims.size(); ++j)
    if (dims[j] != nd - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(j)) return 0;
  return anchor;
}

}  // namespace sloth::cpu
