// Walks the whole op table (invariant I8): every op has a rule, sample inputs, a reference
// kernel, a way to run (CPU kernel, view, functionalization or decomposition) and a
// derivative (formula, decomposition, or "not differentiable"); every op's result on every
// sample matches its double-precision reference kernel. Also checks the alias contract (I2):
// after execution a Fresh result owns fresh storage, a view shares its base's storage at the
// right offset and strides, and an in-place op returns its operand with version + 1.
#include <set>

#include "autograd/function.h"
#include "testing/reference/reference.h"
#include "gtest/gtest.h"
#include "lazy/tensor_impl.h"
#include "sloth/dispatch.h"
#include "sloth/sloth.h"
#include "tests/support/op_samples.h"
#include "tests/support/tensors.h"

namespace sloth {
namespace {

using testing::compare;
using testing::to_ref;
using testing::to_tensor;

bool is_leaf_op(OpId op) { return op == OpId::kData || op == OpId::kScalar; }

std::vector<OpId> all_ops() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (!is_leaf_op(static_cast<OpId>(i))) ops.push_back(static_cast<OpId>(i));
  return ops;
}

const Storage* storage_of(const Tensor& t) {
  internal::sync_tensor(t);
  auto v = t.impl()->value();
  return v->materialized() ? v->data->storage.get() : nullptr;
}

// Ops that legitimately return an alias of an input some of the time, with the reason.
const std::set<OpId>& alias_exemptions() {
  static const std::set<OpId> s = {
      OpId::kContiguous,  // contiguous() of a contiguous tensor returns the tensor itself
      OpId::kDropout,     // dropout in eval mode (or p == 0) returns its input, as in PyTorch
  };
  return s;
}

TEST(OpTable, EveryOpHasEverythingBesideIt) {
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    EXPECT_EQ(info.id, op);
    EXPECT_NE(info.rule, nullptr);
    EXPECT_GE(op_samples(op).size(), 2u) << "sample inputs";
    switch (info.grad) {
      case GradKind::Formula:
        EXPECT_NE(autograd::formula(op), nullptr) << "derivative formula";
        break;
      case GradKind::Decomposed:
        EXPECT_TRUE(info.category == OpCategory::Composite || info.category == OpCategory::View ||
                    info.category == OpCategory::Inplace)
            << "only composites, public views and in-place ops are differentiated through "
               "their decomposition";
        break;
      case GradKind::None:
        break;
    }
    if (info.category == OpCategory::Composite) {
      EXPECT_NE(internal::decomposition(op), nullptr) << "decomposition";
    }
    if (info.alias == AliasKind::InplaceOf) {
      EXPECT_EQ(info.category, OpCategory::Inplace);
    }
    if (info.alias == AliasKind::ViewOf) {
      EXPECT_EQ(info.category, OpCategory::View);
    }
  }
}

class OpSamples : public ::testing::TestWithParam<OpId> {};

TEST_P(OpSamples, MatchReferenceAndAliasContract) {
  const OpId op = GetParam();
  const OpInfo& info = op_info(op);
  int checked = 0;
  for (const OpSample& s : op_samples(op)) {
    SCOPED_TRACE(std::string(info.name) + " sample " + s.name);
    std::vector<Tensor> in;
    for (size_t i = 0; i < s.inputs.size(); ++i)
      in.push_back(to_tensor(s.inputs[i], i < s.transposed.size() && s.transposed[i]));
    if (op == OpId::kSplit || op == OpId::kChunk) {
      auto expected = ref_eval_list(op, s.inputs, s.attrs);
      ASSERT_TRUE(expected.ok()) << expected.status();
      std::vector<Tensor> got = call_op_list(op, in[0], s.attrs);
      ASSERT_EQ(got.size(), expected->size());
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(compare((*expected)[k], to_ref(got[k])), "") << "piece " << k;
        EXPECT_EQ(storage_of(got[k]), storage_of(in[0])) << "split pieces are views";
      }
      ++checked;
      continue;
    }
    auto expected = ref_eval(op, s.inputs, s.attrs);
    if (!expected.ok()) {
      ASSERT_NE(std::string(expected.status().message()).find("nondeterministic"), std::string::npos)
          << expected.status();
      continue;
    }
    std::vector<int64_t> versions;
    for (const auto& t : in) versions.push_back(t.version());
    Tensor out = call_op(op, in, s.attrs);
    const RefTensor got = to_ref(out);
    EXPECT_EQ(compare(*expected, got, op == OpId::kLinspace ? 1e-4 : 2e-5), "");
    ++checked;

    // The alias contract, on real buffers after the sync.
    const Storage* out_storage = storage_of(out);
    switch (info.alias) {
      case AliasKind::Fresh:
        if (alias_exemptions().count(op)) break;
        for (size_t i = 0; i < in.size(); ++i)
          EXPECT_NE(out_storage, storage_of(in[i])) << "Fresh result shares storage with input " << i;
        EXPECT_EQ(out.version(), 0);
        for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(in[i].version(), versions[i]);
        break;
      case AliasKind::ViewOf: {
        // reshape/flatten alias when the layout allows it and copy when it must (PyTorch).
        const bool may_copy = op == OpId::kReshape || op == OpId::kFlatten;
        if (!may_copy || in[0].is_contiguous()) {
          EXPECT_EQ(out_storage, storage_of(in[0])) << "a view shares its base's storage";
          auto data = *out.impl()->value()->data;
          if (out.numel() > 1) {
            EXPECT_EQ(data.layout.offset, out.storage_offset());
            for (size_t d = 0; d < out.shape().size(); ++d)
              if (out.shape()[d] > 1) {
                EXPECT_EQ(data.layout.strides[d], out.strides()[d]) << "dim " << d;
              }
          }
        }
        break;
      }
      case AliasKind::InplaceOf:
        EXPECT_EQ(out.impl(), in[0].impl()) << "an in-place op returns its operand";
        EXPECT_EQ(in[0].version(), versions[0] + 1);
        for (size_t i = 1; i < in.size(); ++i) EXPECT_EQ(in[i].version(), versions[i]);
        break;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpSamples, ::testing::ValuesIn(all_ops()),
                         [](const ::testing::TestParamInfo<OpId>& p) {
                           return std::string(op_name(p.param));
                         });

}  // namespace
}  // namespace sloth
