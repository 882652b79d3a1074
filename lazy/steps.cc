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
  // How many times each slot is read (operand occurrences over all instructions): a run's
  // result is needed outside it when the run (and the reduction it feeds) does not account
  // for all of them. One walk over the instructions, no reader lists.
  // Counted by compute_kernel_outputs where it ran (Plan::read_counts).
  std::vector<int32_t> counted;
  if (plan.read_counts.size() != ns) {
    counted.assign(ns, 0);
    for (const Instr& in : plan.instrs)
      for (int32_t s : in.in) ++counted[s];
  }
  const std::vector<int32_t>& reads_of = plan.read_counts.size() == ns ? plan.read_counts : counted;
  std::vector<char> plan_out(ns, 0);
  for (int32_t o : plan.outputs) plan_out[o] = 1;
  // Membership marks stamped per kernel / per run instead of sets rebuilt each time.
  std::vector<int32_t> kout_mark(ns, -1), produced_mark(ns, -1);
  // Per slot: the reads of it by the current run (stamped: valid where run_mark is the run's).
  std::vector<int32_t> run_mark(ns, -1), run_reads(ns, 0);
  int32_t run_stamp = 0;
  StepPlan sp;
  sp.kernels.resize(nk);
  sp.release.resize(nk);
  std::vector<int> last_use(ns, -1);
  sp.last_read.assign(ns, -1);
  int32_t pos = 0;
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
      auto count_read = [&](int32_t s) {
        if (run_mark[s] != stamp) {
          run_mark[s] = stamp;
          run_reads[s] = 0;
        }
        ++run_reads[s];
      };
      for (int32_t i : run) {
        for (int32_t s : plan.instrs[i].in) {
          if (produced_mark[s] != stamp) st.reads.push_back(s);
          count_read(s);
        }
        produced_mark[plan.instrs[i].out] = stamp;
      }
      if (skip >= 0)
        for (int32_t s : plan.instrs[skip].in) count_read(s);
      for (int32_t i : run) {
        const int32_t s = plan.instrs[i].out;
        // Read by an instruction outside the run (other than `skip`): its reads are not all
        // the run's.
        const bool outside = kout_mark[s] == static_cast<int32_t>(k) || plan_out[s] ||
                             reads_of[s] > (run_mark[s] == stamp ? run_reads[s] : 0);
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
               plan.same_shape(plan.instrs[kern.instrs[end]], in))
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
      for (int32_t s : plan.instrs[i].in) {
        last_use[s] = std::max(last_use[s], static_cast<int>(k));
        sp.last_read[s] = pos;  // positions only grow: the last write is the largest
      }
      ++pos;
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
