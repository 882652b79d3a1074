#include "backends/cpu/ew_codegen.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sloth::cpu::jit {

// ew_ops.h's text, embedded at build time (BUILD: ew_ops_source).
extern const char kEwOpsSource[];

namespace {

// OpId as the compiled unit sees it: the same enumerators in the same order as op_table.h.
constexpr char kOpIdEnum[] =
    "namespace sloth { enum class OpId : unsigned short {\n"
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) "  k" #Id ",\n"
#include "core/ops.def"
#undef OP
    "}; }\n";

constexpr const char* kOpIdName[] = {
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) "k" #Id,
#include "core/ops.def"
#undef OP
};

const char* ctype(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
  }
  return "void";
}

bool is_compare(OpId op) { return op_info(op).facts.compare; }

}  // namespace

std::string tile_kernel_source(std::span<const TileValue> vals, std::span<const TileStep> steps,
                               const std::string& symbol) {
  using Role = TileValue::Role;
  auto operand = [&](int v) -> std::string {
    switch (vals[v].role) {
      case Role::kMemory: return absl::StrFormat("m%d[i]", v);
      case Role::kConst: return absl::StrFormat("c%d", v);
      case Role::kLocal: return absl::StrFormat("v%d", v);
    }
    return "";
  };
  std::string head, body;
  for (size_t v = 0; v < vals.size(); ++v) {
    const char* t = ctype(vals[v].dtype);
    if (vals[v].role == Role::kMemory)
      absl::StrAppendFormat(&head, "  const %s* m%d = static_cast<const %s*>(p[%d]);\n", t, v, t, v);
    else if (vals[v].role == Role::kConst)
      absl::StrAppendFormat(&head, "  const %s c%d = *static_cast<const %s*>(p[%d]);\n", t, v, t, v);
    else if (vals[v].store)
      absl::StrAppendFormat(&head, "  %s* s%d = static_cast<%s*>(p[%d]);\n", t, v, t, v);
  }
  for (const TileStep& s : steps) {
    const char* out_t = ctype(vals[s.out].dtype);
    const char* ct = ctype(s.compute);
    std::string e;
    if (s.convert) {
      e = absl::StrFormat("static_cast<%s>(%s)", out_t, operand(s.in[0]));
    } else {
      const int op_index = static_cast<int>(s.op);
      const std::string op = absl::StrCat("OpId::", kOpIdName[op_index]);
      switch (op_info(s.op).category) {
        case OpCategory::Unary:
          e = absl::StrFormat("unary<%s, %s>(%s)", op, ct, operand(s.in[0]));
          break;
        case OpCategory::Binary:
          e = absl::StrFormat("%s<%s, %s>(%s, %s)", is_compare(s.op) ? "compare" : "binary", op,
                              ct, operand(s.in[0]), operand(s.in[1]));
          break;
        case OpCategory::Ternary:
          if (s.op == OpId::kWhere)
            e = absl::StrFormat("(%s ? %s : %s)", operand(s.in[0]), operand(s.in[1]),
                                operand(s.in[2]));
          else if (s.op == OpId::kClamp)
            e = absl::StrFormat("min_<%s>(max_<%s>(%s, %s), %s)", ct, ct, operand(s.in[0]),
                                operand(s.in[1]), operand(s.in[2]));
          else
            return "";
          break;
        default:
          return "";
      }
    }
    absl::StrAppendFormat(&body, "    const %s v%d = static_cast<%s>(%s);\n", out_t, s.out, out_t, e);
    if (vals[s.out].store) absl::StrAppendFormat(&body, "    s%d[i] = v%d;\n", s.out, s.out);
  }
  // ivdep: an output may share its buffer with an operand read at the same index (in-place
  // donation); no element is read after another element's write, so vectorizing is safe.
  return absl::StrCat("// sloth: a fused elementwise tile kernel, generated at run time.\n",
                      "#define SLOTH_JIT_TU 1\n#include <cstdint>\n", kOpIdEnum, kEwOpsSource,
                      "\nusing namespace sloth::cpu::ew;\nusing sloth::OpId;\n",
                      "extern \"C\" void ", symbol, "(void* const* p, int64_t n) {\n", head,
                      "#pragma GCC ivdep\n  for (int64_t i = 0; i < n; ++i) {\n", body, "  }\n}\n");
}

}  // namespace sloth::cpu::jit
