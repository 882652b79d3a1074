#include "autograd/function.h"

#include <array>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/error.h"

namespace sloth::autograd {
namespace {

std::atomic<uint64_t> next_sequence_nr{1};
std::array<Formula, kNumOps>& formulas() {
  static std::array<Formula, kNumOps> f{};
  return f;
}
std::array<uint32_t, kNumOps>& saved_masks() {
  static std::array<uint32_t, kNumOps> m{};
  return m;
}
GradMath& math_slot() {
  static GradMath m{};
  return m;
}
thread_local bool grad_enabled = true;

}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

GradFn::GradFn() : sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

AutogradMeta* meta(const TensorImpl& t) { return static_cast<AutogradMeta*>(t.autograd.get()); }
AutogradMeta& ensure_meta(TensorImpl& t) {
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *static_cast<AutogradMeta*>(t.autograd.get());
}
bool requires_grad(const TensorImpl& t) {
  auto* m = meta(t);
  return m != nullptr && (m->requires_grad || m->grad_fn);
}

Edge gradient_edge(const TensorImplPtr& t) {
  auto* m = meta(*t);
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (m->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

SavedVariable::SavedVariable(const TensorImplPtr& t) : tensor(t), version(t ? t->group->version : 0) {}

TensorImplPtr SavedVariable::unpack(const char* fn_name) const {
  if (!tensor) return tensor;
  if (tensor->group->version != version)
    fail("one of the variables needed for gradient computation has been modified by an inplace "
         "operation: [%s %s], which is output 0 of %s, is at version %d; expected version %d "
         "instead. Hint: clone() the tensor before modifying it in place, or do the in-place "
         "update after backward()",
         dtype_name(tensor->dtype), shape_str(tensor->shape), fn_name, tensor->group->version,
         version);
  return tensor;
}

void register_formula(OpId op, Formula f, uint32_t saved) {
  formulas()[static_cast<int>(op)] = f;
  saved_masks()[static_cast<int>(op)] = saved;
}
uint32_t saved_inputs(OpId op) { return saved_masks()[static_cast<int>(op)]; }
Formula formula(OpId op) { return formulas()[static_cast<int>(op)]; }

void set_grad_math(GradMath m) { math_slot() = m; }
const GradMath& grad_math() { return math_slot(); }

std::string OpBackward::name() const { return std::string(op_name(op_)) + "_backward"; }

std::vector<TensorImplPtr> OpBackward::apply(std::vector<TensorImplPtr> grads) {
  std::vector<TensorImplPtr> out(next.size());
  if (grads.empty() || !grads[0]) return out;
  if (released_)
    fail("Trying to backward through the graph a second time (or to use saved values after "
         "they were freed) at %s. Saved values are freed by backward() and autograd::grad(); "
         "pass retain_graph=true to the first call if you need to go through the graph again",
         name());
  std::vector<TensorImplPtr> inputs;
  inputs.reserve(saved_.size());
  std::string n = name();
  for (const auto& s : saved_) inputs.push_back(s.unpack(n.c_str()));
  std::vector<bool> needs(next.size());
  for (size_t i = 0; i < next.size(); ++i) needs[i] = next[i].fn != nullptr;
  Formula f = formula(op_);
  if (f == nullptr) fail("%s: the op %s has no derivative formula", n, op_name(op_));
  FormulaArgs args{op_, attrs_, inputs, input_info_, grads[0], outputs[0], needs};
  out = f(args);
  out.resize(next.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!needs[i]) { out[i].reset(); continue; }
    if (out[i] && out[i]->dtype != input_info_[i].dtype)
      out[i] = grad_math().cast(out[i], input_info_[i].dtype);
    if (out[i] && out[i]->shape != input_info_[i].shape)
      fail("internal: %s produced a gradient of shape %s for input %d of shape %s", n,
           shape_str(out[i]->shape), static_cast<int64_t>(i), shape_str(input_info_[i].shape));
  }
  return out;
}

}  // namespace sloth::autograd
