// gradcheck (first order) and gradgradcheck (second order) in float64 over every
// differentiable op of the table, on the op's sample inputs.
#include "core/op_attrs.h"
#include "gtest/gtest.h"
#include "sloth/dispatch.h"
#include "sloth/sloth.h"
#include "tests/support/op_samples.h"
#include "tests/support/tensors.h"

namespace sloth {
namespace {

bool differentiable(OpId op) {
  const OpInfo& i = op_info(op);
  return i.grad != GradKind::None && i.category != OpCategory::Leaf;
}

std::vector<OpId> ops() {
  std::vector<OpId> r;
  for (int i = 0; i < kNumOps; ++i)
    if (differentiable(static_cast<OpId>(i))) r.push_back(static_cast<OpId>(i));
  return r;
}

// Inputs that take part in differentiation: floating, and not a value the op treats as data
// without a derivative (clamp bounds, fill values).
bool wants_grad(OpId op, size_t i, const RefTensor& r) {
  if (!is_floating(r.dtype)) return false;
  if ((op == OpId::kClamp || op == OpId::kClamp_) && i > 0) return false;
  if (op == OpId::kFill_ && i == 1) return false;
  return true;
}

Tensor run(OpId op, const std::vector<Tensor>& xs, const Attrs& attrs) {
  if (op == OpId::kSplit || op == OpId::kChunk) {
    auto parts = call_op_list(op, xs[0], attrs);
    Tensor acc = zeros({}, TensorOptions().dtype(kFloat64));
    for (size_t k = 0; k < parts.size(); ++k) acc = acc + (parts[k] * static_cast<double>(k + 1)).sum();
    return acc;
  }
  if (op_info(op).category == OpCategory::Inplace) {
    std::vector<Tensor> in = xs;
    in[0] = xs[0] * 1.0;  // a non-leaf to write into
    call_op(op, in, attrs);
    return in[0];
  }
  return call_op(op, xs, attrs);
}

class Gradcheck : public ::testing::TestWithParam<OpId> {};

TEST_P(Gradcheck, FirstAndSecondOrder) {
  const OpId op = GetParam();
  int checked = 0;
  for (const OpSample& s : op_samples(op)) {
    if (const auto dr = DropoutAttrs::of(s.attrs); op == OpId::kDropout && dr.train && dr.p > 0 && dr.p < 1)
      continue;  // random
    SCOPED_TRACE(std::string(op_name(op)) + " sample " + s.name);
    std::vector<Tensor> xs;
    bool any = false;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      RefTensor r = s.inputs[i];
      if (is_floating(r.dtype)) r.dtype = kFloat64;
      Tensor t = testing::to_tensor(r, i < s.transposed.size() && s.transposed[i]).contiguous();
      if (wants_grad(op, i, r)) {
        t = t.detach().requires_grad_();
        any = true;
      }
      xs.push_back(t);
    }
    if (!any) continue;
    for (const auto& x : xs)
      if (x.numel() == 0) any = false;
    if (!any) continue;
    auto f = [&](const std::vector<Tensor>& in) { return run(op, in, s.attrs); };
    Tensor y = f(xs);
    if (!y.requires_grad()) continue;
    // A float32 result (to(kFloat32)) limits the finite differences to float32 precision.
    const bool f32 = y.dtype() == kFloat32;
    autograd::GradcheckOptions o1 = f32 ? autograd::GradcheckOptions{1e-3, 1e-3, 1e-2} : autograd::GradcheckOptions{};
    autograd::GradcheckOptions o2 = f32 ? o1 : autograd::GradcheckOptions{1e-5, 1e-4, 1e-3};
    EXPECT_TRUE(autograd::gradcheck(f, xs, o1)) << "first order";
    EXPECT_TRUE(autograd::gradgradcheck(f, xs, o2)) << "second order";
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no sample exercised the derivative";
}

INSTANTIATE_TEST_SUITE_P(DifferentiableOps, Gradcheck, ::testing::ValuesIn(ops()),
                         [](const ::testing::TestParamInfo<OpId>& p) { return std::string(op_name(p.param)); });

}  // namespace
}  // namespace sloth
