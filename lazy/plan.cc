#include "lazy/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/op_attrs.h"

namespace sloth::lazy {

const Attrs& InstrAttrs::empty() {
  static const Attrs e;
  return e;
}

uint64_t InstrAttrs::empty_hash() {
  static const uint64_t h = empty().hash();
  return h;
}

InstrAttrs::InstrAttrs(const Attrs& a) {
  if (!(a == empty())) p_ = std::make_shared<Attrs>(a);
}

Attrs& InstrAttrs::mut() {
  p_ = std::make_shared<Attrs>(get());
  return *p_;
}

DType operand_dtype(const Instr& in, int i) {
  const OpFacts& f = op_info(in.op).facts;
  if (f.compare) return in.attrs->dtype;  // the type the rule compares in
  switch (f.operands) {
    case Operands::kBool: return DType::kBool;
    case Operands::kBoolCondition: return i == 0 ? DType::kBool : in.dtype;
    case Operands::kResult: break;
  }
  return in.dtype;
}

std::vector<int64_t> reduced_dims(const Instr& in, size_t rank) {
  if (in.op == OpId::kArgmax || in.op == OpId::kArgmin) {
    if (rank == 0) return {};
    return {ArgReduceAttrs::of(in.attrs).dim};
  }
  return std::vector<int64_t>(in.attrs->dims.begin(), in.attrs->dims.end());
}

std::string Plan::describe() const {
  std::string s = absl::StrFormat("plan %016x: %d inputs, %d scalars, %d instrs, %d kernels\n", key,
                                  num_inputs, num_scalars, instrs.size(), kernels.size());
  static const char* kinds[] = {"elementwise", "reduce", "matmul", "view", "other"};
  for (size_t k = 0; k < kernels.size(); ++k) {
    absl::StrAppendFormat(&s, "  kernel %d (%s):", k, kinds[static_cast<int>(kernels[k].kind)]);
    for (int32_t i : kernels[k].instrs) {
      const Instr& in = instrs[i];
      absl::StrAppendFormat(&s, " %%%d=%s(%s)", in.out, op_name(in.op),
                            absl::StrJoin(in.in, ",", [](std::string* o, int32_t v) {
                              absl::StrAppend(o, "%", v);
                            }));
    }
    absl::StrAppend(&s, "\n");
  }
  return s;
}

}  // namespace sloth::lazy
