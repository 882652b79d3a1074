#include "lazy/steps.h"

#include <algorithm>

namespace sloth::lazy {

StepKind step_kind(OpId op) {
  switch (op_info(op).category) {
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
      return StepKind::kElementwise;
    case OpCategory::Reduce: return StepKind::kReduce;
    case OpCategory::Matmul: return StepKind::kMatmul;
    case OpCategory::View: return StepKind::kView;
    case OpCategory::Scatter: return StepKind::kScatter;
    case OpCategory::Factory: return StepKind::kFactory;
    case OpCategory::Kernel: return StepKind::kKernel;
    default: return StepKind::kIndex;
  }
}

StepPlan split_steps(const Plan& plan, FusedReduceRule fused_reduce) {
  const size_t nk = plan.kernels.size(), ns = plan.slots.size();
  // Instructions reading each slot, as one flat array (CSR): no per-slot vector, so a plan
  // of 1e5 instructions costs a few allocations, not 1e5.
  std::vector<int32_t> reader_at(ns + 1, 0), readers;
  for (const Instr& in : plan.instrs)
    for (int32_t s : in.in) ++reader_at[s + 1];
  for (size_t s = 0; s < ns; ++s) reader_at[s + 1] += reader_at[s];
  readers.resize(reader_at[ns]);
  {
    std::vector<int32_t> fill(reader_at.begin(), reader_at.end() - 1);
    for (size_t i = 0; i < plan.instrs.size(); ++i)
      for (int32_t s : plan.instrs[i].in) readers[fill[s]++] = static_cast<int32_t>(i);
  }
  std::vector<char> plan_out(ns, 0);
  for (int32_t o : plan.outputs) plan_out[o] = 1;
  // Membership marks stamped per kernel / per run instead of sets rebuilt each time.
  std::vector<int32_t> kout_mark(ns, -1), produced_mark(ns, -1);
  std::vector<int32_t> in_run_mark(plan.instrs.size(), -1);
  int32_t run_stamp = 0;
  StepPlan sp;
  sp.kernels.resize(nk);
  sp.release.resize(nk);
  std::vector<int> last_use(ns, -1);
  for (size_t k = 0; k < nk; ++k) {
    const Kernel& kern = plan.kernels[k];
    for (int32_t o : kern.outputs) kout_mark[o] = static_cast<int32_t>(k);
    // A run of elementwise instructions (`skip`: a reader that does not count as outside,
    // the reduction a prologue feeds) reads what it does not produce and writes what a plan
    // output, a kernel output or an instruction outside the run needs.
    auto add_run = [&](StepKind kind, std::vector<int32_t> run, int32_t skip) {
      PlanStep st;
      st.kind = kind;
      // Sized once: a run of 32 siblings would otherwise regrow both lists ~6 times.
      st.reads.reserve(run.size() * 2);
      st.materialize.reserve(run.size());
      const int32_t stamp = run_stamp++;
      for (int32_t i : run) in_run_mark[i] = stamp;
      for (int32_t i : run) {
        for (int32_t s : plan.instrs[i].in)
          if (produced_mark[s] != stamp) st.reads.push_back(s);
        produced_mark[plan.instrs[i].out] = stamp;
      }
      for (int32_t i : run) {
        const int32_t s = plan.instrs[i].out;
        bool outside = kout_mark[s] == static_cast<int32_t>(k) || plan_out[s];
        for (int32_t j = reader_at[s]; j < reader_at[s + 1] && !outside; ++j) {
          const int32_t r = readers[j];
          outside = r != skip && in_run_mark[r] != stamp;
        }
        if (outside) st.materialize.push_back(s);
      }
      st.instrs = std::move(run);
      st.instr = skip;
      sp.kernels[k].push_back(std::move(st));
    };
    std::vector<int32_t> group;
    auto flush = [&] {
      if (!group.empty()) add_run(StepKind::kElementwise, std::move(group), -1);
      group.clear();
    };
    size_t first = 0;
    if (int anchor = fused_reduce ? fused_reduce(plan, kern) : 0; anchor > 0) {
      add_run(StepKind::kFusedReduce,
              std::vector<int32_t>(kern.instrs.begin(), kern.instrs.begin() + anchor),
              kern.instrs[anchor]);
      first = anchor + 1;
    }
    for (size_t ii = first; ii < kern.instrs.size(); ++ii) {
      const int32_t i = kern.instrs[ii];
      const Instr& in = plan.instrs[i];
      const StepKind sk = step_kind(in.op);
      if (sk == StepKind::kElementwise) {
        // The run of same-shape elementwise instructions starting here, found first so its
        // vector is allocated once at its size (it is moved into its step).
        size_t end = ii + 1;
        while (end < kern.instrs.size() &&
               step_kind(plan.instrs[kern.instrs[end]].op) == StepKind::kElementwise &&
               plan.instrs[kern.instrs[end]].shape == in.shape)
          ++end;
        group.assign(kern.instrs.begin() + ii, kern.instrs.begin() + end);
        flush();
        ii = end - 1;
        continue;
      }
      flush();
      PlanStep st;
      st.kind = sk;
      st.instr = i;
      st.reads.assign(in.in.begin(), in.in.end());
      sp.kernels[k].push_back(std::move(st));
    }
    flush();
    for (int32_t i : kern.instrs) {
      for (int32_t s : plan.instrs[i].in) last_use[s] = std::max(last_use[s], static_cast<int>(k));
      const int32_t o = plan.instrs[i].out;
      last_use[o] = std::max(last_use[o], static_cast<int>(k));
    }
  }
  // Release each slot after the kernel that last reads it. The plan's free_after says the
  // same for well-formed plans; deriving it here keeps a slot alive if the two disagree.
  for (size_t s = 0; s < plan.slots.size(); ++s)
    if (last_use[s] >= 0 && !plan_out[s])
      sp.release[last_use[s]].push_back(static_cast<int32_t>(s));
  return sp;
}

}  // namespace sloth::lazy
