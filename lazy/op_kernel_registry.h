// A backend's kernels of the Kernel-category ops (core/ops.def), by op id: each op's kernel
// registers itself at static-init time from its own file, so a backend's dispatch never
// names an op. `Env` is the backend's run state.
#pragma once

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/op_table.h"
#include "lazy/plan.h"

namespace sloth::lazy {

template <class Env>
class OpKernelRegistry {
 public:
  using Kernel = absl::Status (*)(Env& env, const Instr& in);

  static bool add(OpId op, Kernel kernel) {
    table()[static_cast<int>(op)] = kernel;
    return true;
  }
  // The registered kernel of `in.op`, or an internal error naming the backend and the op.
  static absl::Status run(const char* backend, Env& env, const Instr& in) {
    Kernel k = table()[static_cast<int>(in.op)];
    if (k == nullptr)
      return absl::InternalError(absl::StrFormat(
          "%s: %s has no kernel (Kernel ops register one by op id)", backend, op_name(in.op)));
    return k(env, in);
  }

 private:
  static std::array<Kernel, kNumOps>& table() {
    static std::array<Kernel, kNumOps> t{};
    return t;
  }
};

}  // namespace sloth::lazy
