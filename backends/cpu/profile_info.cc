#include "backends/cpu/profile_info.h"

#include <string>

#include "absl/strings/str_join.h"
#include "core/dtype.h"
#include "core/op_table.h"
#include "core/shape.h"

namespace sloth::cpu {
namespace {

int64_t slot_bytes(const lazy::Plan& plan, int32_t s) {
  const lazy::Slot& sl = plan.slots[s];
  if (sl.kind == lazy::SlotKind::kScalar) return 0;
  return numel(sl.shape) * static_cast<int64_t>(dtype_size(sl.dtype));
}

// FLOPs of one instruction: a GEMM's 2mnk, an elementwise op's one per output element, a
// reduction's one per input element; data movement (views, copies, gathers) none.
double instr_flops(const lazy::Plan& plan, const lazy::Instr& in) {
  const OpCategory cat = op_info(in.op).category;
  if (cat == OpCategory::Matmul) {
    const Dims& a = plan.slots[in.in[0]].shape;
    return 2.0 * static_cast<double>(numel(in.shape)) * static_cast<double>(a.empty() ? 1 : a.back());
  }
  if (is_elementwise(in.op)) return static_cast<double>(numel(in.shape));
  if (cat == OpCategory::Reduce) return static_cast<double>(numel(plan.slots[in.in[0]].shape));
  return 0;
}

}  // namespace

std::shared_ptr<const lazy::profiling::KernelInfo> describe_step(
    const lazy::Plan& plan, lazy::StepKind kind, int32_t instr, const std::vector<int32_t>& instrs,
    const std::vector<int32_t>& reads, const absl::flat_hash_set<int32_t>& materialized) {
  auto info = std::make_shared<lazy::profiling::KernelInfo>();
  std::vector<int32_t> all = instrs;
  if (instr >= 0) all.push_back(instr);
  std::vector<std::string> names, shapes;
  for (int32_t i : all) {
    const lazy::Instr& in = plan.instrs[i];
    names.emplace_back(op_name(in.op));
    info->flops += instr_flops(plan, in);
  }
  info->name = names.size() == 1 ? names[0] : "fused[" + absl::StrJoin(names, ",") + "]";
  for (int32_t r : reads) info->bytes += slot_bytes(plan, r);
  const bool view = kind == lazy::StepKind::kView;  // zero-copy when the layout allows
  for (size_t j = 0; j < all.size(); ++j) {
    const lazy::Instr& in = plan.instrs[all[j]];
    // The last instruction's output is always written; fused intermediates only when read
    // elsewhere.
    if (j + 1 != all.size() && !materialized.contains(in.out)) continue;
    if (!view) info->bytes += slot_bytes(plan, in.out);
    shapes.push_back(shape_str(plan.slots[in.out].shape));
    if (info->dtype.empty()) info->dtype = dtype_name(plan.slots[in.out].dtype);
  }
  if (view) info->bytes = 0;
  info->shapes = absl::StrJoin(shapes, " ");
  return info;
}

std::shared_ptr<const lazy::profiling::KernelInfo> describe_group(
    const std::vector<std::shared_ptr<const lazy::profiling::KernelInfo>>& steps) {
  auto info = std::make_shared<lazy::profiling::KernelInfo>();
  std::vector<std::string> names, shapes;
  for (const auto& s : steps) {
    names.push_back(s->name);
    shapes.push_back(s->shapes);
    info->bytes += s->bytes;
    info->flops += s->flops;
    if (info->dtype.empty()) info->dtype = s->dtype;
  }
  info->name = "rows{" + absl::StrJoin(names, "; ") + "}";
  info->shapes = absl::StrJoin(shapes, " ");
  return info;
}

}  // namespace sloth::cpu
