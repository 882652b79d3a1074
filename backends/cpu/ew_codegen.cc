#include "backends/cpu/ew_codegen.h"

#include <cstring>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ew_semantics_text.h"

namespace sloth::cpu::jit {
namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kUInt8: return "uint8_t";
  }
  return "void";
}

}  // namespace

std::string tile_kernel_source(const lazy::EwForm& form, const std::string& symbol) {
  using Kind = lazy::EwForm::StepKind;
  enum class Role : uint8_t { kLocal, kMemory, kConst };
  const size_t nv = form.values.size();
  std::vector<Role> role(nv, Role::kLocal);
  std::vector<bool> store(nv, false);
  for (const lazy::EwForm::Step& s : form.steps)
    if (s.kind == Kind::kLoad) role[s.out] = Role::kMemory;
    else if (s.kind == Kind::kScalar) role[s.out] = Role::kConst;
  for (const lazy::EwForm::Output& o : form.outputs) store[o.value] = true;
  if (form.reduced >= 0) store[form.reduced] = true;
  auto operand = [&](int v) -> std::string {
    switch (role[v]) {
      case Role::kMemory: return absl::StrFormat("m%d[i]", v);
      case Role::kConst: return absl::StrFormat("c%d", v);
      case Role::kLocal: return absl::StrFormat("v%d", v);
    }
    return "";
  };
  std::string head, body;
  for (size_t v = 0; v < nv; ++v) {
    const char* t = ctype(form.values[v]);
    if (role[v] == Role::kMemory)
      absl::StrAppendFormat(&head, "  const %s* m%d = static_cast<const %s*>(p[%d]);\n", t, v, t, v);
    else if (role[v] == Role::kConst)
      absl::StrAppendFormat(&head, "  const %s c%d = *static_cast<const %s*>(p[%d]);\n", t, v, t, v);
    else if (store[v])
      absl::StrAppendFormat(&head, "  %s* s%d = static_cast<%s*>(p[%d]);\n", t, v, t, v);
  }
  for (const lazy::EwForm::Step& s : form.steps) {
    if (s.kind == Kind::kLoad || s.kind == Kind::kScalar) continue;
    const char* out_t = ctype(form.values[s.out]);
    std::string e;
    if (s.kind == Kind::kConvert) {
      e = absl::StrFormat("sloth::ew::cvt<%s>(%s)", out_t, operand(s.in[0]));
    } else {
      std::string args[3];
      for (int i = 0; i < 3; ++i)
        if (s.in[i] >= 0) args[i] = operand(s.in[i]);
      e = lazy::ew_call(s, args, &ctype);
      if (e.empty()) return "";
    }
    absl::StrAppendFormat(&body, "    const %s v%d = static_cast<%s>(%s);\n", out_t, s.out, out_t, e);
    if (store[s.out]) absl::StrAppendFormat(&body, "    s%d[i] = v%d;\n", s.out, s.out);
  }
  // ivdep: an output may share its buffer with an operand read at the same index (in-place
  // donation); no element is read after another element's write, so vectorizing is safe.
  return absl::StrCat("// sloth: a fused elementwise tile kernel, generated at run time.\n",
                      "#include <cstdint>\n", ew_semantics_source(),
                      "\nusing namespace sloth::ew;\nusing sloth::OpId;\n",
                      "extern \"C\" void ", symbol, "(void* const* p, int64_t n) {\n", head,
                      "#pragma GCC ivdep\n  for (int64_t i = 0; i < n; ++i) {\n", body, "  }\n}\n");
}

std::string tile_kernel_key(const lazy::EwForm& form) {
  std::string k;
  tile_kernel_key(form, &k);
  return k;
}

void tile_kernel_key(const lazy::EwForm& form, std::string* out) {
  // 32-bit words written straight into a buffer sized once (a plan of 1e5 instructions builds
  // thousands of keys): a step is five words, its kind, op and compute dtype packed in one.
  // Value numbers and counts fit in 32 bits (a form has at most a few hundred values).
  const size_t words = 3 + form.values.size() + 5 * form.steps.size() + 1 + form.outputs.size() + 1;
  std::string& k = *out;
  k.assign(words * sizeof(uint32_t), '\0');
  char* w = k.data();
  auto put = [&](uint32_t v) {
    std::memcpy(w, &v, sizeof v);
    w += sizeof v;
  };
  put(static_cast<uint32_t>(form.values.size()));
  for (DType t : form.values) put(static_cast<uint32_t>(t));
  put(static_cast<uint32_t>(form.steps.size()));
  for (const lazy::EwForm::Step& s : form.steps) {
    put(static_cast<uint32_t>(s.kind) | static_cast<uint32_t>(s.compute) << 8 |
        static_cast<uint32_t>(s.op) << 16);
    put(static_cast<uint32_t>(s.out));
    for (int i : s.in) put(static_cast<uint32_t>(i));
  }
  put(static_cast<uint32_t>(form.outputs.size()));
  for (const lazy::EwForm::Output& o : form.outputs) put(static_cast<uint32_t>(o.value));
  put(static_cast<uint32_t>(form.reduced));
  put(0);  // words counts one spare
}

}  // namespace sloth::cpu::jit
