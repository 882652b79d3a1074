// Walks the whole op table (invariant I8): every op has a rule, sample inputs, a reference
// kernel, a way to run (CPU kernel, view, functionalization or decomposition) and a
// derivative (formula, decomposition, or "not differentiable"); every op's result on every
// sample matches its double-precision reference kernel. Also checks the alias contract (I2):
// after execution a Fresh result owns fresh storage, a view shares its base's storage at the
// right offset and strides, and an in-place op returns its operand with version + 1.
#include <set>

#include "autograd/function.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"
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

// ---- the per-op facts of the table are consistent ---------------------------------------------

TEST(OpFacts, InplaceOpsNameAFunctionalOpOfTheSameArity) {
  // copy_, fill_ and zero_ have no plain out-of-place op (they are written as clone/full).
  const std::set<OpId> special = {OpId::kCopy_, OpId::kFill_, OpId::kZero_};
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    if (info.category != OpCategory::Inplace) {
      EXPECT_FALSE(info.facts.functional.has_value()) << "only in-place ops have a functional op";
      continue;
    }
    if (!info.facts.functional) {
      EXPECT_TRUE(special.count(op)) << "an in-place op without .functional";
      continue;
    }
    const OpInfo& fn = op_info(*info.facts.functional);
    EXPECT_NE(fn.category, OpCategory::Inplace);
    EXPECT_EQ(fn.alias, AliasKind::Fresh);
    EXPECT_EQ(fn.arity, info.arity);
    EXPECT_EQ(std::string(fn.name) + "_", std::string(info.name));
  }
}

TEST(OpFacts, ViewAndScatterInversesAreSymmetric) {
  int pairs = 0;
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    if (info.category == OpCategory::Scatter) EXPECT_TRUE(info.facts.inverse.has_value());
    if (!info.facts.inverse) continue;
    const OpInfo& inv = op_info(*info.facts.inverse);
    ASSERT_TRUE(inv.facts.inverse.has_value());
    EXPECT_EQ(*inv.facts.inverse, op);
    if (info.category == OpCategory::View) {
      EXPECT_EQ(inv.category, OpCategory::Scatter);
      EXPECT_EQ(info.arity, 1);
      EXPECT_EQ(inv.arity, 2);  // (base, src)
      EXPECT_EQ(view_of_scatter(*info.facts.inverse), op);
      ++pairs;
    } else {
      EXPECT_EQ(info.category, OpCategory::Scatter);
      EXPECT_EQ(inv.category, OpCategory::View);
    }
  }
  EXPECT_EQ(pairs, 4);  // slice, select, diagonal, as_strided
}

TEST(OpFacts, InverseOfAViewStep) {
  // Computed inverses: the inverse permutation, the reshape back.
  ViewInverse p = inverse_of_view(OpId::kPermute, Attrs{.dims = {2, 0, 1}}, {4, 5, 6});
  EXPECT_EQ(p.op, OpId::kPermute);
  EXPECT_FALSE(p.scatter);
  EXPECT_EQ(p.attrs.dims, (AttrDims{1, 2, 0}));
  ViewInverse r = inverse_of_view(OpId::kReshape, Attrs{.dims = {6}}, {2, 3});
  EXPECT_EQ(r.op, OpId::kReshape);
  EXPECT_EQ(r.attrs.dims, (AttrDims{2, 3}));
  // Table inverses keep the view's attrs.
  const Attrs sl = SliceAttrs{.dim = 1, .start = 0, .end = 4, .step = 2};
  ViewInverse s = inverse_of_view(OpId::kSlice, sl, {3, 4});
  EXPECT_EQ(s.op, OpId::kSliceScatter);
  EXPECT_TRUE(s.scatter);
  EXPECT_EQ(s.attrs, sl);
}

TEST(OpFacts, CommutativeAndCompareOpsAreBinary) {
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    if (info.facts.commutative || info.facts.compare) {
      EXPECT_EQ(info.category, OpCategory::Binary);
      EXPECT_EQ(info.arity, 2);
    }
    if (!info.facts.compare) continue;
    const Shape s{2, 3};
    const TensorMeta in[] = {{&s, DType::kFloat32}, {&s, DType::kInt64}};
    Attrs a;
    OutputMeta out;
    ASSERT_TRUE(infer(op, in, a, &out).ok());
    EXPECT_EQ(out.dtype, DType::kBool);
    EXPECT_EQ(info.grad, GradKind::None);
  }
}

TEST(OpFacts, SavedTensorsNameRealOperands) {
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    const SavedSet& s = info.facts.saves;
    const bool saves_any = s.result != Save::None || s.args[0].save != Save::None ||
                           s.args[1].save != Save::None || s.args[2].save != Save::None;
    if (info.grad == GradKind::None) EXPECT_FALSE(saves_any) << "not differentiable";
    for (int i = 0; i < 3; ++i) {
      const SavedArg& a = s.args[i];
      if (info.arity >= 0 && i >= info.arity) EXPECT_EQ(a.save, Save::None) << "operand " << i;
      if (a.if_needs >= 0) {
        EXPECT_NE(a.save, Save::None);
        EXPECT_TRUE(info.arity < 0 || a.if_needs < info.arity) << int{a.if_needs};
      }
      // Composites keep no values of their own: their parts do.
      if (info.category == OpCategory::Composite) {
        EXPECT_TRUE(a.save == Save::None || a.save == Save::Check) << "operand " << i;
      }
    }
    if (info.category == OpCategory::Composite) {
      EXPECT_TRUE(s.result == Save::None || s.result == Save::Check);
    }
  }
}

TEST(OpFacts, GeneratedApiRowsHaveTheirKindsShape) {
  // Each Api kind's generator (sloth/op_api.h) assumes a category and arity; a row breaking
  // that would not compile for Fn/DimFn, and for the others would call its op wrongly.
  for (OpId op : all_ops()) {
    const OpInfo& info = op_info(op);
    SCOPED_TRACE(std::string(info.name));
    switch (info.api) {
      case ApiKind::Fn:
        EXPECT_TRUE((info.category == OpCategory::Unary && info.arity == 1) ||
                    (info.category == OpCategory::Binary && info.arity == 2));
        break;
      case ApiKind::DimFn:
        // The generator passes DimAttrs{dim}; that the op reads that view is its row's comment,
        // not a fact this loop can see (the values test below covers today's DimFn ops).
        EXPECT_TRUE(info.arity >= 1 && info.arity <= 3);
        break;
      case ApiKind::ListDim:
        EXPECT_EQ(info.arity, -1);
        break;
      case ApiKind::ReduceFn:
      case ApiKind::ArgFn:
        EXPECT_EQ(info.category, OpCategory::Reduce);
        EXPECT_EQ(info.arity, 1);
        break;
      case ApiKind::Custom:
        break;
    }
  }
}

TEST(OpFacts, GeneratedFunctionsAndMethodsAreTheOpOnTheirOperands) {
  // Fn: elementwise.
  Tensor x = tensor({0.5, -1.0}), y = tensor({1.0, -2.0});
  EXPECT_EQ(sigmoid(x).to_vector<float>(), x.sigmoid().to_vector<float>());
  EXPECT_EQ(erf(x).to_vector<float>(), x.erf().to_vector<float>());
  EXPECT_EQ(maximum(x, y).to_vector<float>(), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(x.maximum(y).to_vector<float>(), (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(x.lt(y).to_vector<bool>(), (std::vector<bool>{true, false}));

  // ReduceFn: dims default to all, keepdim to false.
  Tensor m = tensor({1, 5, 2, 3, 4, 6}, {2, 3});  // [[1 5 2] [3 4 6]]
  EXPECT_EQ(amax(m).to_vector<float>(), (std::vector<float>{6}));
  EXPECT_EQ(amax(m).dim(), 0);
  EXPECT_EQ(m.amax({1}).to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(amin(m, {0}).to_vector<float>(), (std::vector<float>{1, 4, 2}));
  EXPECT_EQ(m.amin({0}, /*keepdim=*/true).shape(), (Shape{1, 3}));
  EXPECT_EQ(prod(m).to_vector<float>(), (std::vector<float>{720}));
  EXPECT_EQ(m.prod({1}).to_vector<float>(), (std::vector<float>{10, 72}));
  EXPECT_EQ(m.prod().to_vector<float>(), (std::vector<float>{720}));

  // ArgFn: a dim, keepdim defaulting to false.
  EXPECT_EQ(argmax(m, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(m.argmin(0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(m.argmax(1, /*keepdim=*/true).shape(), (Shape{2, 1}));
  EXPECT_EQ(argmin(m, -1, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));

  // DimFn, one operand: softmax over a dim.
  Tensor l = tensor({0, 0, 0, 0}, {2, 2});
  EXPECT_EQ(softmax(l, 1).to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(l.log_softmax(0).to_vector<float>(), log_softmax(l, 0).to_vector<float>());

  // DimFn, two operands: (self, dim, index).
  Tensor i = from_vector<int64_t>({2, 0}, {2});
  EXPECT_EQ(index_select(m, 1, i).to_vector<float>(), (std::vector<float>{2, 1, 6, 3}));
  EXPECT_EQ(m.index_select(0, i.slice(0, 1, 2)).to_vector<float>(), (std::vector<float>{1, 5, 2}));
  Tensor gi = from_vector<int64_t>({1, 1, 0, 2}, {2, 2});
  EXPECT_EQ(gather(m, 1, gi).to_vector<float>(), (std::vector<float>{5, 5, 3, 6}));
  EXPECT_EQ(m.gather(1, gi).to_vector<float>(), (std::vector<float>{5, 5, 3, 6}));

  // DimFn, three operands: (base, dim, index, src).
  Tensor base = zeros({2, 3});
  Tensor src = tensor({1, 2, 3, 4}, {2, 2});
  // scatter_add along dim 1: out[r][gi[r][c]] += src[r][c].
  EXPECT_EQ(scatter_add(base, 1, gi, src).to_vector<float>(),
            (std::vector<float>{0, 3, 0, 3, 0, 4}));
  EXPECT_EQ(base.scatter_add(1, gi, src).to_vector<float>(),
            (std::vector<float>{0, 3, 0, 3, 0, 4}));
  // index_add along dim 1: out[:, i[k]] += src[:, k].
  EXPECT_EQ(index_add(base, 1, i, src).to_vector<float>(),
            (std::vector<float>{2, 0, 1, 4, 0, 3}));
  EXPECT_EQ(base.index_add(1, i, src).to_vector<float>(),
            (std::vector<float>{2, 0, 1, 4, 0, 3}));
  EXPECT_EQ(base.sum().item(), 0.0);  // out of place

  // ListDim: a list and a dim defaulting to 0.
  Tensor a = tensor({1, 2}), b = tensor({3, 4});
  EXPECT_EQ(cat({a, b}).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(stack({a, b}).shape(), (Shape{2, 2}));
  EXPECT_EQ(stack({a, b}, 1).to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(cat({a.unsqueeze(0), b.unsqueeze(0)}, 1).shape(), (Shape{1, 4}));
}

// ---- typed attrs views ----------------------------------------------------------------------------

TEST(OpAttrs, ViewsRoundTripThroughAttrs) {
  const SliceAttrs s{.dim = 1, .start = -3, .end = 7, .step = 2};
  const SliceAttrs back = SliceAttrs::of(s);
  EXPECT_EQ(back.dim, 1);
  EXPECT_EQ(back.start, -3);
  EXPECT_EQ(back.end, 7);
  EXPECT_EQ(back.step, 2);
  const auto d = DropoutAttrs::of(DropoutAttrs{.p = 0.25, .train = true});
  EXPECT_EQ(d.p, 0.25);
  EXPECT_TRUE(d.train);
  const auto as = AsStridedAttrs::of(AsStridedAttrs{.size = {2, 2}, .stride = {1, 4}, .offset = 3});
  EXPECT_EQ(as.size, (AttrDims{2, 2}));
  EXPECT_EQ(as.stride, (AttrDims{1, 4}));
  EXPECT_EQ(as.offset, 3);
  // store() writes its own fields only: a reduction's dims stay when keepdim is set.
  Attrs a = ReduceAttrs{.dims = {0, 2}};
  ArgReduceAttrs{.dim = 1, .keepdim = true}.store(a);
  EXPECT_EQ(a.dims, (AttrDims{0, 2}));
  EXPECT_TRUE(ReduceAttrs::of(a).keepdim);
  // Every reduction view keeps keepdim where ReduceAttrs reads it (the shared rule).
  EXPECT_TRUE(ReduceAttrs::of(MeanAttrs{.keepdim = true}).keepdim);
  EXPECT_TRUE(ReduceAttrs::of(VarAttrs{.keepdim = true}).keepdim);
  EXPECT_EQ(ReduceAttrs::of(VarAttrs{.dims = {1}}).dims, (AttrDims{1}));
}

TEST(OpAttrs, HashAndEqualityAreTheStorages) {
  // Two views that put the same values in the same slots are the same attrs (one plan).
  const Attrs a = DimAttrs{.dim = 2}, b = OneHotAttrs{.num_classes = 2};
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  const Attrs c = DimAttrs{.dim = 3};
  EXPECT_NE(a, c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(Attrs{}.hash(), Attrs(DimAttrs{}).hash());
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
