// What a CpuExecutable finds once per plan (row groups, steps computed from scalars only) or
// once per layout generation (its frozen form, frozen_run.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_format.h"
#include "backends/cpu/cpu_executable.h"
#include "core/settings.h"

namespace sloth::cpu {

using lazy::SlotKind;
using lazy::StepKind;

namespace {

bool log_fusion() { return settings().log_on("fusion"); }

}  // namespace

FrozenRun* CpuExecutable::build_frozen(Env& env) {
  frozen_.reset();
  if (frozen_fail_gen_ == layout_gen_ || !groups_.empty()) return nullptr;
  std::vector<int32_t> pos(plan_.instrs.size(), 0);
  {
    int32_t p = 0;
    for (const lazy::Kernel& k : plan_.kernels)
      for (int32_t i : k.instrs) pos[i] = p++;
  }
  std::vector<FrozenRun::StepRef> refs;
  frozen_ops_.clear();
  for (size_t j = 0; j < ops_.size(); ++j) {
    const Op& op = ops_[j];
    if (op.kind != Op::kStep) continue;
    const Step& st = steps_[op.k][op.i];
    frozen_ops_.push_back(static_cast<int32_t>(j));
    FrozenRun::StepRef r;
    r.reads = &st.io->reads;
    r.kind = st.kind;
    r.kernel = static_cast<int32_t>(op.k);
    r.instr = st.instr >= 0 ? &plan_.instrs[st.instr] : nullptr;
    r.program = st.program.get();
    r.end_pos = st.instr >= 0 ? pos[st.instr] : 0;
    for (int32_t i : st.io->instrs) r.end_pos = std::max(r.end_pos, pos[i]);
    r.true_view = st.kind == StepKind::kView && st.view_cached;
    if (r.true_view)
      r.view_delta = (st.view_out.offset - st.view_in.offset) *
                     static_cast<int64_t>(dtype_size(st.view_in_dtype));
    if (st.const_index >= 0) {
      r.const_outs = &const_steps_[st.const_index].outs;
      r.const_vals = &const_steps_[st.const_index].vals;
    }
    refs.push_back(r);
  }
  std::string why;
  frozen_ = FrozenRun::build(env, layout_gen_, refs, releases_, last_read_, &why);
  if (settings().log_on("frozen"))
    std::fprintf(stderr, "[sloth frozen] plan of %zu kernels: %s\n", plan_.kernels.size(),
                 frozen_ ? absl::StrFormat("frozen, %d bytes of intermediates",
                                           frozen_->arena_bytes()).c_str()
                         : ("not frozen: " + why).c_str());
  if (frozen_) frozen_gen_ = layout_gen_;
  else frozen_fail_gen_ = layout_gen_;
  return frozen_.get();
}

void CpuExecutable::find_row_groups() {
  std::vector<std::pair<size_t, size_t>> flat;
  for (size_t k = 0; k < steps_.size(); ++k)
    for (size_t i = 0; i < steps_[k].size(); ++i) flat.emplace_back(k, i);
  std::vector<int> group_of(flat.size(), -1);
  // A group loops over rows * inner <= its largest step's elements, so a plan whose steps
  // all loop over fewer than kRowGroupMinElems has none: it is not searched (the search
  // builds a program for every standalone reduction, ~4% of planning a model-sized graph
  // of small tensors).
  int64_t largest = 0;
  for (const auto& [k, i] : flat) {
    const Step& st = steps_[k][i];
    if (st.program) largest = std::max(largest, numel(st.program->loop_shape()));
    else if (st.kind == StepKind::kReduce)
      largest = std::max(largest, numel(plan_.slots[plan_.instrs[st.instr].in[0]].shape));
  }
  const bool enabled = settings().row_groups && largest >= kRowGroupMinElems;
  if (enabled) {
    // Standalone reductions as programs; they replace the reduce kernel only if grouped.
    std::map<const Step*, std::unique_ptr<ElementwiseProgram>> as_program;
    auto program_of = [&](const Step& st) -> const ElementwiseProgram* {
      if (st.program) return st.program.get();
      auto it = as_program.find(&st);
      return it == as_program.end() ? nullptr : it->second.get();
    };
    // The rows a step loops over, or -1 when it cannot run row by row.
    auto rows_of = [&](Step& st) -> int64_t {
      if (st.kind == StepKind::kReduce && !as_program.count(&st)) {
        const Instr& in = plan_.instrs[st.instr];
        const lazy::Slot& x = plan_.slots[in.in[0]];
        if ((in.op != OpId::kSum && in.op != OpId::kProd && in.op != OpId::kAmax &&
             in.op != OpId::kAmin) ||
            x.kind == SlotKind::kScalar || x.shape.size() < 2)
          return -1;
        // The reduced dims must be the trailing ones (one contiguous stretch per output):
        // checked before a program is built for it.
        const int64_t nd = static_cast<int64_t>(x.shape.size());
        std::vector<int64_t> dims(in.attrs->dims.begin(), in.attrs->dims.end());
        std::sort(dims.begin(), dims.end());
        for (size_t j = 0; j < dims.size(); ++j)
          if (dims[j] != nd - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(j)) return -1;
        ProgramOptions opt;
        opt.reduce = &in;
        as_program[&st] = compile_elementwise(plan_, {}, {}, opt);
      }
      const ElementwiseProgram* prog = program_of(st);
      if (!prog || !prog->row_blockable()) return -1;
      return prog->loop_shape()[0];
    };
    // Slot -> the `start` of the candidate group whose steps wrote it (a stamp, so the
    // membership test is O(1) and nothing is cleared between candidates).
    // Allocated at the first candidate (a plan with none does not size a table over its
    // slots); 32-bit stamps: a plan has fewer than 2^31 steps.
    std::vector<int32_t> produced_by;
    auto written = [&](const Step& st, size_t stamp) {
      if (produced_by.empty()) produced_by.assign(plan_.slots.size(), -1);
      for (int32_t i : st.io->instrs) produced_by[plan_.instrs[i].out] = static_cast<int32_t>(stamp);
      if (st.instr >= 0) produced_by[plan_.instrs[st.instr].out] = static_cast<int32_t>(stamp);
    };
    size_t start = 0;
    while (start < flat.size()) {
      Step& first = steps_[flat[start].first][flat[start].second];
      const int64_t rows = rows_of(first);
      if (rows < 2) {
        ++start;
        continue;
      }
      written(first, start);
      size_t end = start + 1;
      bool linked = false;
      for (; end < flat.size(); ++end) {
        Step& st = steps_[flat[end].first][flat[end].second];
        if (rows_of(st) != rows) break;
        const Shape& loop = program_of(st)->loop_shape();
        bool ok = true;
        for (int32_t r : st.io->reads) {
          if (produced_by[r] != static_cast<int32_t>(start)) continue;
          const Dims& rs = plan_.slots[r].shape;
          ok = ok && rs.size() == loop.size() && rs[0] == rows;
          linked = true;
        }
        if (!ok) break;
        written(st, start);
      }
      int64_t inner = 1;  // elements per row of the largest loop space
      for (size_t j = start; j < end; ++j)
        inner = std::max(inner, numel(program_of(steps_[flat[j].first][flat[j].second])->loop_shape()) / rows);
      if (end - start >= 2 && linked && rows * inner >= kRowGroupMinElems) {
        RowGroup g;
        g.rows = rows;
        for (size_t j = start; j < end; ++j) {
          g.steps.push_back(flat[j]);
          group_of[j] = static_cast<int>(groups_.size());
          Step& st = steps_[flat[j].first][flat[j].second];
          if (!st.program) st.program = std::move(as_program[&st]);
        }
        g.block_rows = std::max<int64_t>(1, kRowBlockElems / inner);
        if (log_fusion())
          std::fprintf(stderr,
                       "[sloth fusion] row group: %zu steps of kernels %zu..%zu over %lld rows, "
                       "%lld rows per block\n",
                       g.steps.size(), g.steps.front().first, g.steps.back().first,
                       static_cast<long long>(rows), static_cast<long long>(g.block_rows));
        groups_.push_back(std::move(g));
      }
      start = end;
    }
  }
  // The run order: steps, groups (at their first step), and kernel ends (releases).
  int last_group = -1;
  size_t j = 0;
  for (size_t k = 0; k < steps_.size(); ++k) {
    for (size_t i = 0; i < steps_[k].size(); ++i, ++j) {
      if (group_of[j] < 0) {
        ops_.push_back({Op::kStep, k, i});
      } else if (group_of[j] != last_group) {
        last_group = group_of[j];
        ops_.push_back({Op::kGroup, k, i, group_of[j]});
      }
    }
    ops_.push_back({Op::kEndKernel, k, 0});
  }
}

void CpuExecutable::find_constant_steps() {
  std::vector<char> is_const(plan_.slots.size(), 0), plan_out(plan_.slots.size(), 0);
  for (int32_t o : plan_.outputs) plan_out[o] = 1;
  // Scratch lists reused from step to step: a wide program has one step per 32 outputs,
  // none of them constant, and should not allocate for each.
  std::vector<int32_t> ins, outs, scal;
  for (const Op& op : ops_) {
    if (op.kind != Op::kStep) continue;
    Step& st = steps_[op.k][op.i];
    if (st.kind == StepKind::kKernel) continue;
    if (st.io->instrs.empty() && st.instr < 0) continue;
    // Rejected first from the step's reads (what it reads and does not make, from
    // split_steps): a graph input, or a value no constant step made, is read by one of its
    // instructions and is none of their results, so the walk below would reject it too.
    // Most steps end here without visiting their instructions (a plan of 1e5 is ~10 MB).
    bool rejected = false;
    for (int32_t s : st.io->reads) {
      const SlotKind kind = plan_.slot_kind(s);
      rejected |= kind == SlotKind::kInput || (kind == SlotKind::kValue && !is_const[s]);
    }
    if (rejected) continue;
    ins.assign(st.io->instrs.begin(), st.io->instrs.end());
    if (st.instr >= 0) ins.push_back(st.instr);
    // A step reading a graph input is never constant: rejected before the lists below.
    bool reads_input = false;
    for (int32_t i : ins)
      for (int32_t s : plan_.instrs[i].in) reads_input |= plan_.slot_kind(s) == SlotKind::kInput;
    if (reads_input) continue;
    outs.clear();
    scal.clear();
    for (int32_t i : ins) outs.push_back(plan_.instrs[i].out);
    bool ok = true;
    for (int32_t i : ins)
      for (int32_t s : plan_.instrs[i].in) {
        const lazy::Slot& sl = plan_.slots[s];
        if (sl.kind == SlotKind::kScalar) {
          ok = ok && sl.index >= 0;
          scal.push_back(sl.index);
        } else if (sl.kind == SlotKind::kInput ||
                   (!is_const[s] && std::find(outs.begin(), outs.end(), s) == outs.end())) {
          ok = false;
        }
      }
    for (int32_t o : outs) {
      const lazy::Slot& sl = plan_.slots[o];
      ok = ok && !plan_out[o] &&
           static_cast<size_t>(numel(sl.shape)) * dtype_size(sl.dtype) <= BufferPool::kMaxBuffer;
    }
    if (!ok) continue;
    for (int32_t o : outs) is_const[o] = 1;
    st.const_index = static_cast<int32_t>(const_steps_.size());
    const_steps_.push_back(ConstStep{outs, std::vector<DeviceData>(outs.size())});
    for (int32_t x : scal)
      if (std::find(const_scalars_.begin(), const_scalars_.end(), x) == const_scalars_.end())
        const_scalars_.push_back(x);
  }
  const_scalar_vals_.assign(const_scalars_.size(), 0.0);
}

}  // namespace sloth::cpu
