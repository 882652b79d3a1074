#include "backends/cuda/cuda_plan.h"

#include "core/op_table.h"

namespace sloth::cuda {

using lazy::Instr;
using lazy::Plan;

void build_steps(const Plan& plan, std::vector<std::vector<Step>>* steps,
                 std::vector<std::vector<int32_t>>* release) {
  // No fused reductions here yet: a prologue runs as its own elementwise kernel.
  lazy::StepPlan sp = lazy::split_steps(plan);
  steps->clear();
  steps->resize(sp.kernels.size());
  *release = std::move(sp.release);
  for (size_t k = 0; k < sp.kernels.size(); ++k)
    for (lazy::PlanStep& ps : sp.kernels[k]) {
      Step st{ps.kind};
      st.instr = ps.instr;
      if (ps.kind == StepKind::kElementwise) {
        st.ew = std::make_unique<ElementwiseStep>();
        st.ew->k = generate_elementwise(plan, ps.instrs, ps.materialize);
      }
      st.reads = std::move(ps.reads);
      (*steps)[k].push_back(std::move(st));
    }
}

}  // namespace sloth::cuda
