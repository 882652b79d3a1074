#include "backends/cuda/cuda_plan.h"

#include <algorithm>
#include <set>

#include "core/op_table.h"

namespace sloth::cuda {

using lazy::Instr;
using lazy::Plan;

namespace {

// Which kernel family runs an op.
StepKind kind_of(OpId op) {
  switch (op_info(op).category) {
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
      return StepKind::kElementwise;
    case OpCategory::Reduce: return StepKind::kReduce;
    case OpCategory::Matmul: return StepKind::kMatmul;
    case OpCategory::View: return StepKind::kView;
    case OpCategory::Scatter: return StepKind::kScatter;
    case OpCategory::Factory: return StepKind::kFactory;
    default: return StepKind::kIndex;
  }
}

}  // namespace

void build_steps(const Plan& plan, std::vector<std::vector<Step>>* steps,
                 std::vector<std::vector<int32_t>>* release) {
  const size_t nk = plan.kernels.size();
  std::vector<std::vector<int32_t>> readers(plan.slots.size());
  for (size_t i = 0; i < plan.instrs.size(); ++i)
    for (int32_t s : plan.instrs[i].in) readers[s].push_back(static_cast<int32_t>(i));
  std::set<int32_t> plan_out(plan.outputs.begin(), plan.outputs.end());
  steps->resize(nk);
  release->resize(nk);
  std::vector<int> last_use(plan.slots.size(), -1);
  for (size_t k = 0; k < nk; ++k) {
    const lazy::Kernel& kern = plan.kernels[k];
    std::set<int32_t> kout(kern.outputs.begin(), kern.outputs.end());
    std::vector<int32_t> group;
    auto flush = [&] {
      if (group.empty()) return;
      std::set<int32_t> in_group(group.begin(), group.end()), produced;
      std::vector<int32_t> materialize, reads;
      for (int32_t i : group) {
        for (int32_t s : plan.instrs[i].in)
          if (!produced.count(s)) reads.push_back(s);
        produced.insert(plan.instrs[i].out);
      }
      for (int32_t i : group) {
        int32_t s = plan.instrs[i].out;
        bool outside = kout.count(s) || plan_out.count(s);
        for (int32_t r : readers[s]) outside = outside || !in_group.count(r);
        if (outside) materialize.push_back(s);
      }
      Step st{StepKind::kElementwise};
      st.ew = std::make_unique<ElementwiseStep>();
      st.ew->k = generate_elementwise(plan, group, materialize);
      st.reads = std::move(reads);
      (*steps)[k].push_back(std::move(st));
      group.clear();
    };
    for (int32_t i : kern.instrs) {
      const Instr& in = plan.instrs[i];
      StepKind sk = kind_of(in.op);
      if (sk == StepKind::kElementwise) {
        if (!group.empty() && plan.instrs[group.back()].shape != in.shape) flush();
        group.push_back(i);
        continue;
      }
      flush();
      Step st{sk};
      st.instr = i;
      st.reads.assign(in.in.begin(), in.in.end());
      (*steps)[k].push_back(std::move(st));
    }
    flush();
    for (int32_t i : kern.instrs) {
      for (int32_t s : plan.instrs[i].in) last_use[s] = std::max(last_use[s], static_cast<int>(k));
      int32_t o = plan.instrs[i].out;
      last_use[o] = std::max(last_use[o], static_cast<int>(k));
    }
  }
  for (size_t s = 0; s < plan.slots.size(); ++s)
    if (last_use[s] >= 0 && !plan_out.count(static_cast<int32_t>(s)))
      (*release)[last_use[s]].push_back(static_cast<int32_t>(s));
}

}  // namespace sloth::cuda
