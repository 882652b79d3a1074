// Kernel-category ops (core/ops.def) on the CPU: each op's kernel lives in its own file and
// registers itself by op id at static-init time, so the backend's dispatch never names an op.
//
//   absl::Status run_unfold(Env& env, const Instr& in) { ... env.alloc_to(in.out, ...) ... }
//   SLOTH_CPU_OP_KERNEL(kUnfold, run_unfold);
#pragma once

#include "absl/status/status.h"
#include "backends/cpu/kernels.h"
#include "core/op_table.h"
#include "lazy/op_kernel_registry.h"

namespace sloth::cpu {

// Computes instruction `in` (a Kernel-category op): reads its operands from env, writes its
// result to slot in.out.
using OpKernel = absl::Status (*)(Env& env, const Instr& in);

// Returns true so that registration can initialize a namespace-scope constant.
inline bool register_op_kernel(OpId op, OpKernel kernel) {
  return lazy::OpKernelRegistry<Env>::add(op, kernel);
}
// The registered kernel of `in.op`, or an internal error naming the op.
inline absl::Status run_op_kernel(Env& env, const Instr& in) {
  return lazy::OpKernelRegistry<Env>::run("cpu backend", env, in);
}

#define SLOTH_CPU_OP_KERNEL(op_id, fn) \
  [[maybe_unused]] static const bool sloth_cpu_op_kernel_##op_id = \
      ::sloth::cpu::register_op_kernel(::sloth::OpId::op_id, fn)

}  // namespace sloth::cpu
