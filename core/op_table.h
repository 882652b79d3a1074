// The op table, generated from core/ops.def: ids, names, categories, alias kinds, shape and
// dtype rules. Other layers keep per-op registries indexed by OpId (kernels, reference
// kernels, derivatives, decompositions, samples), and a test checks they are complete.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/attrs.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace sloth {

enum class OpId : uint16_t {
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) k##Id,
#include "core/ops.def"
#undef OP
};
inline constexpr int kNumOps = 0
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) +1
#include "core/ops.def"
#undef OP
    ;

enum class OpCategory : uint8_t {
  Leaf, Factory, Unary, Binary, Ternary, Reduce, Matmul, View, Scatter, Index, Shape,
  Kernel,  // computed by one dedicated kernel per backend, registered by op id (op_kernel.h)
  Composite, Inplace
};
enum class AliasKind : uint8_t { Fresh, ViewOf, InplaceOf };
enum class GradKind : uint8_t { Formula, Decomposed, None };
// The signature kind of an op's public function and method (core/ops.def, sloth/op_api.h).
enum class ApiKind : uint8_t { Fn, DimFn, ListDim, ReduceFn, ArgFn, Custom };

// What an op's backward node keeps of a tensor (PyTorch 1.13's saved variables,
// ../shared/notes/SAVED_TENSORS.md). Value: sloth's formula reads it. Check: PyTorch saves it,
// so an in-place write to it after the op makes backward fail. Composite ops list checks
// only (their parts keep the values).
enum class Save : uint8_t { None, Value, Check, Both };
struct SavedArg {
  Save save = Save::None;
  int8_t if_needs = -1;  // >= 0: saved only when that input requires grad (mul: self<other>)
};
struct SavedSet {
  SavedArg args[3] = {};  // operands 0..2
  Save result = Save::None;
};

// Per-op facts every layer reads from the table instead of keeping its own list.
// The dtype an elementwise op reads its operands in (a fused kernel converts on load).
enum class Operands : uint8_t {
  kResult,         // the result's dtype (promotion happened in the rule)
  kBool,           // every operand as bool (logical ops)
  kBoolCondition,  // operand 0 as bool, the others in the result's dtype (where)
};

struct OpFacts {
  bool commutative = false;  // op(a, b) == op(b, a): CSE matches either operand order
  bool compare = false;      // elementwise with a bool result, computed in the operands' type
                             // (the rule's attrs dtype); overrides `operands`
  Operands operands = Operands::kResult;
  std::optional<OpId> functional;  // Inplace ops: the out-of-place op written back to operand 0
  std::optional<OpId> inverse;     // View ops: the Scatter op writing through their window;
                                   // Scatter ops: that view
  SavedSet saves;  // what backward saves; the dynamic cases are code (sloth/saved_tensors.cc)
};

// What a rule sees of an operand.
struct TensorMeta {
  const Shape* shape;
  DType dtype;
  bool wrapped_number = false;  // a C++ double turned into a 0-dim operand (x * 2.0)
};
// What a rule decides about the result.
struct OutputMeta {
  Shape shape;
  DType dtype = DType::kFloat32;
};

// Checks the operands and attrs (normalizing them: negative dims wrapped, -1 sizes resolved)
// and infers the result. Errors name the op, the shapes/dtypes and what would be valid.
using ShapeRule = absl::Status (*)(OpId, absl::Span<const TensorMeta>, Attrs&, OutputMeta*);

struct OpInfo {
  OpId id;
  std::string_view name;
  OpCategory category;
  int arity;  // -1: variadic
  AliasKind alias;
  ShapeRule rule;
  GradKind grad;
  ApiKind api;
  OpFacts facts;
};

const OpInfo& op_info(OpId id);

// The category and facts of the table at compile time, for code that picks per-op templates
// with `if constexpr` (backends/cpu/ew_loops.h): same values as op_info(id).
inline constexpr OpCategory kOpCategory[] = {
#define OP(Id, name, category, arity, alias, rule, grad, api, ...) OpCategory::category,
#include "core/ops.def"
#undef OP
};
inline constexpr OpFacts kOpFacts[] = {
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) OpFacts{__VA_ARGS__},
#include "core/ops.def"
#undef OP
};
constexpr OpCategory op_category(OpId id) { return kOpCategory[static_cast<int>(id)]; }
constexpr const OpFacts& op_facts(OpId id) { return kOpFacts[static_cast<int>(id)]; }
inline std::string_view op_name(OpId id) { return op_info(id).name; }
inline bool is_elementwise(OpId id) {
  auto c = op_info(id).category;
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
}
// Runs the op's rule; the error message is ready to show to a user.
absl::Status infer(OpId id, absl::Span<const TensorMeta> in, Attrs& attrs, OutputMeta* out);

// PyTorch's result_type over operands: dimensioned tensors, then 0-dim tensors, then wrapped
// numbers, each only lifting the category of the previous tier.
DType result_type(absl::Span<const TensorMeta> in);

}  // namespace sloth
