// One fused elementwise kernel in the form every backend executes or prints: numbered values
// with dtypes and explicit steps (load an operand as a dtype, read a scalar, convert a value,
// apply an op). It is built once from the plan's instructions, so the numbering of values and
// the sharing of loads and conversions are decided here and not again by each backend: the CPU
// interpreter allocates registers over these steps, the CPU's run-time compiler and the CUDA
// code generator print them, and all of them call the element functions of core/ew_semantics.h
// by op id (ew_call spells such a call).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/op_table.h"
#include "core/shape.h"
#include "lazy/plan.h"

namespace sloth::lazy {

struct EwForm {
  enum class StepKind : uint8_t {
    kLoad,     // value out = operand `operand` (slot `slot`) read from memory as values[out]
    kScalar,   // value out = the scalar slot `slot`, converted to values[out]: loop-invariant
    kConvert,  // value out = in[0] converted to values[out]
    kOp,       // value out = op(in[...]) computed in `compute`, converted to values[out]
  };
  struct Step {
    StepKind kind;
    int out;                  // the value this step defines
    int32_t slot = -1;        // kLoad, kScalar: the plan slot read
    int operand = -1;         // kLoad: index into operands
    int in[3] = {-1, -1, -1}; // kConvert: in[0]; kOp: the op's operands
    OpId op{};                // kOp
    DType compute = DType::kFloat32;  // kOp: the type the op computes in (see compute_dtype)
  };
  struct Operand {            // a tensor read from memory: one per slot, whatever it is read as
    int32_t slot;
    DType dtype;              // the slot's dtype (what memory holds)
  };
  struct Output {             // a value written to memory: the plan's slot `slot`
    int32_t slot;
    int value;
  };

  Shape shape;                // the loop shape
  std::vector<DType> values;  // per value: its dtype
  std::vector<Step> steps;    // in order; every value is defined by exactly one step
  std::vector<Operand> operands;
  std::vector<Output> outputs;
  int reduced = -1;           // the value a fused reduction consumes (-1: none)
  std::string error;          // non-empty: the instructions have no elementwise form
};

// Builds the form of `instrs` (indices into plan.instrs, in order) writing the slots of
// `materialize`. With `reduce`, the form is the prologue of that reduction: the loop runs over
// its input's shape and `reduced` is its input's value (read from memory when there are no
// instructions).
EwForm build_ew_form(const Plan& plan, const std::vector<int32_t>& instrs,
                     const std::vector<int32_t>& materialize, const Instr* reduce = nullptr);

// Builds the forms of a thread's kernels (build_ew_form), reusing the last form it built when
// a kernel differs from that form's kernel only in the slots it names: same ops, dtypes and
// operand pattern, operands of the same dtypes (scalars where scalars), the same slots
// materialized.
// The form is then the last one with its slots renamed (and this kernel's loop shape); the
// forms are equal to build_ew_form's. An automatic flush cuts a chain into ~100 such kernels
// per plan, and rebuilding each form was ~340 instructions per instruction of the plan. Only
// a kernel whose sizes and first and last ops match the last kernel's is compared, so a run
// of equal kernels reuses from its third kernel on.
class EwFormMemo {
 public:
  EwFormMemo();
  ~EwFormMemo();
  // The form of `instrs` writing `materialize` (as build_ew_form); *reused: the last form
  // built here, renamed. Kernels with a fused reduction are always built.
  EwForm build(const Plan& plan, const std::vector<int32_t>& instrs,
               const std::vector<int32_t>& materialize, const Instr* reduce, bool* reused);

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// The type an elementwise op computes in: its operands' type (where's branches, not its
// condition).
DType compute_dtype(const Instr& in);

// The call of core/ew_semantics.h that computes a kOp step, over operand expressions `args`,
// with C types named by `type_name`; its value has the compute type (bool for comparisons).
// Empty when the op has no element function.
std::string ew_call(const EwForm::Step& step, std::span<const std::string> args,
                    const char* (*type_name)(DType));

}  // namespace sloth::lazy
