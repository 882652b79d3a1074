// The shared operand checks of the shape rules (core/rule_helpers.h).
#include "core/rule_helpers.h"

#include "absl/strings/str_format.h"

namespace sloth::rules {

absl::Status check_arity(OpId op, Metas in) {
  int a = op_info(op).arity;
  if (a >= 0 && static_cast<int>(in.size()) != a)
    return invalid("%s: expects %d tensor operands, got %d", op_name(op), a, in.size());
  return absl::OkStatus();
}

absl::Status need_floating(OpId op, const TensorMeta& m, const char* what) {
  if (!is_floating(m.dtype))
    return invalid("%s: %s must be a floating-point tensor (float32 or float64), got %s; convert "
                   "it with .to(kFloat32)",
                   op_name(op), what, dtype_name(m.dtype));
  return absl::OkStatus();
}

absl::Status need_index(OpId op, const TensorMeta& m, const char* what) {
  // ---- uint8 ----
  // PyTorch takes no uint8 indices (index_select/gather reject them; x[u8] is a deprecated
  // mask), so uint8 is rejected here too rather than read as positions.
  if (m.dtype == DType::kUInt8)
    return invalid("%s: %s must be an int64 or int32 tensor, got uint8; convert positions with "
                   ".to(kLong), or use a bool mask (x.masked_select(m.to(kBool)))",
                   op_name(op), what);
  if (!is_integral(m.dtype))
    return invalid("%s: %s must be an int64 or int32 tensor, got %s", op_name(op), what,
                   dtype_name(m.dtype));
  return absl::OkStatus();
}

absl::Status unary(OpId op, Metas in, OutputMeta* out, DType dtype) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  out->shape = *in[0].shape;
  out->dtype = dtype;
  return absl::OkStatus();
}

}  // namespace sloth::rules
