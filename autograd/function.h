// The autograd graph: grad_fn nodes linked by edges to the grad_fns of their inputs.
// Backward formulas produce lazy tensors, so the backward pass is IR like the forward pass,
// batches with it into one graph, and is differentiable again (create_graph).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "core/attrs.h"
#include "core/op_table.h"
#include "core/pooled.h"
#include "core/ref.h"
#include "lazy/tensor_impl.h"

namespace sloth::autograd {

using lazy::TensorImpl;
using lazy::TensorImplPtr;

class GradFn;
using GradFnPtr = Ref<GradFn>;

struct Edge {
  GradFnPtr fn;     // null: the input needs no gradient
  int input_nr = 0;   // which output of fn this input is
};

// What backward needs to make a zero gradient for an output nobody differentiated.
struct OutputInfo {
  Shape shape;
  DType dtype;
  Device device;
};

using Hook = std::function<TensorImplPtr(const TensorImplPtr&)>;

class GradFn : public RefCounted {
 public:
  // One gradient per output (null = zero) -> one gradient per edge (null = none).
  virtual std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) = 0;
  virtual std::string name() const = 0;
  // Drops saved values after a backward without retain_graph.
  virtual void release_saved() {}
  virtual bool released() const { return false; }

  absl::InlinedVector<Edge, 3> next;
  absl::InlinedVector<OutputInfo, 1> outputs;
  // Tensor hooks registered on the outputs of this node (by output_nr); they run before
  // apply and may replace the gradient.
  std::vector<std::pair<int, Hook>> pre_hooks;
  // Non-leaf tensors that asked retain_grad(): their .grad is set from the incoming gradient.
  std::vector<std::pair<int, lazy::TensorImpl*>> retained;
  uint64_t sequence_nr = 0;

 protected:
  GradFn();
};

// Per-tensor autograd state, hung on lazy::TensorImpl::autograd.
struct AutogradMeta final : lazy::AutogradMetaBase, Pooled<AutogradMeta> {
  bool requires_grad = false;
  GradFnPtr grad_fn;    // null for leaves
  int output_nr = 0;
  TensorImplPtr grad;     // leaves (and retain_grad non-leaves)
  std::vector<Hook> leaf_hooks;  // hooks of a leaf, run before accumulation
  bool retains_grad = false;
  GradFn* accumulator = nullptr;  // leaves: their AccumulateGrad while one is alive
  int64_t view_version = -1;  // views: group version their grad_fn was made for
  bool frozen_view = false;   // made without grad (no_grad, non-differentiable): never regenerated
};

AutogradMeta* meta(const TensorImpl& t);     // null if the tensor never had autograd state
AutogradMeta& ensure_meta(TensorImpl& t);
bool requires_grad(const TensorImpl& t);
// The edge through which a gradient for `t` flows (its grad_fn, or its AccumulateGrad).
Edge gradient_edge(const TensorImplPtr& t);

// A saved input: the tensor plus the version it had, so modifications are caught.
struct SavedVariable {
  TensorImplPtr tensor;
  int64_t version = 0;
  SavedVariable() = default;
  explicit SavedVariable(const TensorImplPtr& t);
  TensorImplPtr unpack(const char* fn_name) const;  // throws if modified in place since
};

// Backward of an op of the table: calls the op's derivative formula (registered by the
// public face, by op id).
struct FormulaArgs {
  OpId op;
  const Attrs& attrs;
  const std::vector<TensorImplPtr>& inputs;  // unpacked saved inputs (null where not saved)
  absl::Span<const OutputInfo> input_info;
  const TensorImplPtr& grad;                 // gradient of the (single) output
  const OutputInfo& output;
  const std::vector<bool>& needs;            // which inputs need a gradient
};
using Formula = std::vector<TensorImplPtr> (*)(const FormulaArgs&);
// `saved`: bit i set when the formula reads the value of input i (others are not saved, so
// overwriting them in place later is fine, as in PyTorch).
void register_formula(OpId op, Formula f, uint32_t saved = ~0u);
Formula formula(OpId op);
uint32_t saved_inputs(OpId op);

class OpBackward final : public GradFn, public Pooled<OpBackward> {
 public:
  OpBackward(OpId op, Attrs attrs) : op_(op), attrs_(std::move(attrs)) {}
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override;
  std::string name() const override;
  void release_saved() override { saved_.clear(); released_ = true; }
  bool released() const override { return released_; }

  absl::InlinedVector<SavedVariable, 3> saved_;  // one per input; empty where no value is needed
  absl::InlinedVector<OutputInfo, 3> input_info_;

 private:
  OpId op_;
  Attrs attrs_;
  bool released_ = false;
};

// The math the engine needs from the face (it never includes the face).
struct GradMath {
  TensorImplPtr (*add)(const TensorImplPtr&, const TensorImplPtr&);
  TensorImplPtr (*zeros)(const OutputInfo&);
  TensorImplPtr (*detach)(const TensorImplPtr&);
  TensorImplPtr (*ones_like)(const TensorImplPtr&);
  TensorImplPtr (*cast)(const TensorImplPtr&, DType);
};
void set_grad_math(GradMath m);
const GradMath& grad_math();

}  // namespace sloth::autograd
