#include "backends/cpu/op_kernels.h"

#include <array>

#include "absl/strings/str_format.h"

namespace sloth::cpu {
namespace {

std::array<OpKernel, kNumOps>& registry() {
  static std::array<OpKernel, kNumOps> r{};
  return r;
}

}  // namespace

bool register_op_kernel(OpId op, OpKernel kernel) {
  registry()[static_cast<int>(op)] = kernel;
  return true;
}

absl::Status run_op_kernel(Env& env, const Instr& in) {
  OpKernel k = registry()[static_cast<int>(in.op)];
  if (k == nullptr)
    return absl::InternalError(
        absl::StrFormat("cpu backend: %s has no kernel (Kernel ops register one by op id)",
                        op_name(in.op)));
  return k(env, in);
}

}  // namespace sloth::cpu
