#include "core/ew_semantics_text.h"

namespace sloth {

// ew_semantics.h's text, embedded at build time (BUILD: ew_semantics_text_cc).
extern const char kEwSemanticsText[];

namespace {

constexpr char kOpIdEnum[] =
    "namespace sloth { enum class OpId : unsigned short {\n"
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) "  k" #Id ",\n"
#include "core/ops.def"
#undef OP
    "}; }\n";

constexpr const char* kOpNames[] = {
#define OP(Id, name, cat, arity, alias, rule, grad, api, ...) "OpId::k" #Id,
#include "core/ops.def"
#undef OP
};

}  // namespace

const std::string& ew_semantics_source() {
  static const auto& s = *new std::string(std::string(kOpIdEnum) +
                                          "#define SLOTH_EW_EMBEDDED 1\n" + kEwSemanticsText);
  return s;
}

const char* ew_op_name(int op_index) { return kOpNames[op_index]; }

}  // namespace sloth
