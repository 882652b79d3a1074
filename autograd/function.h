// The autograd graph: grad_fn nodes linked by edges to the grad_fns of their inputs.
// Backward formulas produce lazy tensors, so the backward pass is IR like the forward pass,
// batches with it into one graph, and is differentiable again (create_graph).
#pragma once

#include <algorithm>
#include <functional>
#include <initializer_list>
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

// A shape kept inline (no heap block for up to 5 dims): every backward node holds one per
// input and output, and a heap shape each was most of the mallocs of recording with autograd.
// Reads like a Shape, converts to one where a Shape is needed, and compares with one.
class InfoShape : public absl::InlinedVector<int64_t, 5> {
 public:
  using Base = absl::InlinedVector<int64_t, 5>;
  InfoShape() = default;
  InfoShape(const Shape& s) : Base(s.begin(), s.end()) {}  // NOLINT: implicit, as Shape
  InfoShape(std::initializer_list<int64_t> l) : Base(l) {}
  operator Shape() const { return Shape(begin(), end()); }  // NOLINT: implicit
  friend bool operator==(const InfoShape& a, const Shape& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const InfoShape& a, const InfoShape& b) {
    return static_cast<const Base&>(a) == static_cast<const Base&>(b);
  }
};

// What backward needs to make a zero gradient for an output nobody differentiated.
struct OutputInfo {
  InfoShape shape;
  DType dtype;
  Device device;
};

using Hook = std::function<TensorImplPtr(const TensorImplPtr&)>;

// A tensor a backward node keeps (PyTorch's SavedVariable). It holds the value as of the
// save: IR value nodes are immutable, so a later in-place write (which gives the alias group a
// new value) cannot change what the formula computes with. It also holds the alias group and
// the version the group had then; `checked` entries are the ones PyTorch saves, and backward
// fails when their group's version moved (any alias counts: views, detach(), the tensor).
// Holding the group (not the TensorImpl) keeps a saved output from owning its own grad_fn
// (output -> meta -> grad_fn -> saved output would be a cycle), and keeps the group live so a
// sync materializes the value instead of leaving it to be recomputed at backward.
struct SavedVariable {
  lazy::NodePtr value;          // null: nothing saved
  Ref<lazy::AliasGroup> group;  // null for a wrapped number
  // A saved tensor without history (a leaf) is PyTorch's saved original: unpacked, it is that
  // tensor as it is now, so a requires_grad_() made after the save counts in double backward.
  // Held through a cell the tensor clears when it dies: holding the tensor itself would make
  // a cycle once an in-place write gives it a grad_fn that reaches this node.
  Ref<struct LeafCell> leaf;

  // The group's version at the save.
  int64_t version() const { return static_cast<int64_t>(bits_ >> 2); }
  void set_version(int64_t v) { bits_ = static_cast<uint64_t>(v) << 2 | (bits_ & 3); }
  // PyTorch saves it too: its version is checked at backward.
  bool checked() const { return (bits_ & 1) != 0; }
  // A wrapped number (x * 2.0): unpacked as one again.
  bool wrapped() const { return (bits_ & 2) != 0; }

  void save(const TensorImplPtr& t, bool check);
  // A C++ number that has no tensor (call_op_number): its Scalar leaf, kept as a wrapped
  // number is (never checked, no group).
  void save_number(lazy::NodePtr number) {
    value = std::move(number);
    bits_ = 2;
  }
  bool defined() const { return value != nullptr; }
  // A fresh tensor with the saved value whose gradient flows through `edge` (the saved
  // tensor's history at save time; a result is re-attached to its own node on unpack).
  TensorImplPtr unpack(const Edge& edge) const;
  // Throws PyTorch's "modified by an inplace operation" error when the version moved.
  // `producer`: the saved tensor's grad_fn (null for leaves and tensors without history).
  void check(const GradFn* producer, int output_nr) const;

 private:
  // version << 2 | wrapped << 1 | checked, in one word: a node keeps one SavedVariable per
  // input inline, and 32 bytes (not 40) let the node recorded per op fit four cache lines.
  // (Versions count in-place writes: 2^61 of them are out of reach.)
  uint64_t bits_ = 0;
};

// A tensor saved for the version check only, with who produced it (the error names it). A
// composite op (log_softmax, layer_norm, ...) puts PyTorch's saved set on its result's node.
struct SavedCheck {
  SavedVariable saved;
  Edge producer;           // null fn with own_output: the node holding this check
  bool own_output = false;
};

// What few backward nodes carry (tensor hooks, retain_grad, a composite op's saved set): kept
// out of line so the node recorded per op stays small (with 1e5 live results, the bytes each
// op's node touches are its recording cost).
struct GradFnExtras {
  // Tensor hooks registered on the outputs of this node (by output_nr); they run before
  // apply and may replace the gradient.
  std::vector<std::pair<int, Hook>> pre_hooks;
  // Non-leaf tensors that asked retain_grad(): their .grad is set from the incoming gradient.
  std::vector<std::pair<int, lazy::TensorImpl*>> retained;
  std::vector<SavedCheck> extra_checks;
};

class GradFn : public RefCounted {
 public:
  // One gradient per output (null = zero) -> one gradient per edge (null = none).
  virtual std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) = 0;
  virtual std::string name() const = 0;
  // Drops saved values after a backward without retain_graph.
  virtual void release_saved() {}
  virtual bool released() const { return false; }
  // Throws when a tensor this node saved was modified in place since (run by the engine for
  // every node of a backward before any node runs, so a failing backward changes nothing).
  virtual void check_versions() const;
  virtual bool is_accumulator() const { return false; }

  absl::InlinedVector<Edge, 3> next;
  absl::InlinedVector<OutputInfo, 1> outputs;
  uint64_t sequence_nr = 0;
  // Null for almost every node; extras_mut() makes it.
  std::unique_ptr<GradFnExtras> extras;
  GradFnExtras& extras_mut() {
    if (!extras) extras = std::make_unique<GradFnExtras>();
    return *extras;
  }

 protected:
  GradFn();
  // Iterative: freeing the last reference to a chain of 1e5 backward nodes must not recurse
  // through the edges (a destructor per node on the stack overflows it).
  void release() override;
};

// A weak handle to a tensor for SavedVariable::leaf: `tensor` is null once it is gone.
struct LeafCell final : RefCounted {
  lazy::TensorImpl* tensor = nullptr;
};

// What few tensors' autograd state carries (leaf hooks, the cell of a saved leaf): out of
// line, so the state every recorded result gets fits one cache line.
struct AutogradMetaExtras {
  std::vector<Hook> leaf_hooks;  // hooks of a leaf, run before accumulation
  // ---- distributed ---- hooks of a leaf, run after each accumulation into .grad, with the
  // leaf (PyTorch's register_post_accumulate_grad_hook; DistributedDataParallel's buckets).
  std::vector<std::function<void(const TensorImplPtr&)>> post_accumulate_hooks;
  Ref<LeafCell> cell;         // handed to SavedVariables that saved this tensor as a leaf
  ~AutogradMetaExtras() {
    if (cell) cell->tensor = nullptr;
  }
};

// Per-tensor autograd state, hung on lazy::TensorImpl::autograd. 64 bytes (one line from the
// 64-byte-aligned pool): every result recorded with grad gets one.
struct AutogradMeta final : lazy::AutogradMetaBase, Pooled<AutogradMeta> {
  GradFnPtr grad_fn;    // null for leaves
  TensorImplPtr grad;     // leaves (and retain_grad non-leaves)
  GradFn* accumulator = nullptr;  // leaves: their AccumulateGrad while one is alive
  int64_t view_version = -1;  // views: group version their grad_fn was made for
  std::unique_ptr<AutogradMetaExtras> extras;  // null for almost every tensor
  int output_nr = 0;
  // An output of split/chunk (or a view of one) made with grad: PyTorch's MULTI_OUTPUT_NODE
  // views may not be written in place, nor used once their base was written. Which output of
  // split/chunk; -1: not such a view.
  int multi_output = -1;
  bool requires_grad = false;
  bool retains_grad = false;
  bool frozen_view = false;   // made without grad (no_grad, non-differentiable): never regenerated
  bool non_differentiable = false;  // a custom function's mark_non_differentiable output
  AutogradMetaExtras& extras_mut() {
    if (!extras) extras = std::make_unique<AutogradMetaExtras>();
    return *extras;
  }
};

AutogradMeta* meta(const TensorImpl& t);     // null if the tensor never had autograd state
AutogradMeta& ensure_meta(TensorImpl& t);
// Inline: recording with grad asks it per operand.
inline bool requires_grad(const TensorImpl& t) {
  auto* m = static_cast<const AutogradMeta*>(t.autograd.get());
  return m != nullptr && (m->requires_grad || m->grad_fn);
}
// The edge through which a gradient for `t` flows (its grad_fn, or its AccumulateGrad).
Edge gradient_edge(const TensorImplPtr& t);
// The sequence number the next node will get (nodes made after it compare >=).
uint64_t peek_sequence_nr();

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
  const TensorImplPtr& result;               // the unpacked saved result (null where not saved)
};
using Formula = std::vector<TensorImplPtr> (*)(const FormulaArgs&);
void register_formula(OpId op, Formula f);
Formula formula(OpId op);

// PyTorch's node name for an op: "log_softmax" -> "LogSoftmaxBackward0".
std::string backward_name(OpId op);

// A backward node of an op of the table. With 1e5 live results the cache lines the node
// recorded per op writes are its recording cost, so it is 256 bytes (four lines) and keeps
// what most nodes lack out of line:
// - each input's OutputInfo (shape, dtype, device as recorded) is a tag byte where backward
//   can tell it again: an input with an edge whose producer's output info is the input's own
//   (checked when recorded; a node's `outputs` never change once it is made, and the edge
//   keeps the producer alive) reads it there, and a 0-dim cpu input (a wrapped number) is its
//   dtype, and one with the output's info (`y + b`, b without grad) reads `outputs[0]`. Only
//   the others (a broadcast operand without grad, a producer whose info differs) are stored,
//   in the cold block (two inline OutputInfos were 136 bytes);
// - the saved result (exp, tanh, sigmoid, ... keep it) is in the cold block too.
class OpBackward final : public GradFn, public Pooled<OpBackward> {
 public:
  // attrs are kept only when the op has some (most recorded ops have none: no 168-byte copy).
  OpBackward(OpId op, const Attrs& attrs) : op_(op), name_op_(op) {
    if (!attrs.is_default()) attrs_ = std::make_unique<NodeAttrs>(attrs);
  }
  // An op with default attrs (a binary operator with a number).
  explicit OpBackward(OpId op) : op_(op), name_op_(op) {}
  std::vector<TensorImplPtr> apply(std::vector<TensorImplPtr> grads) override;
  std::string name() const override { return backward_name(name_op_); }
  void release_saved() override;
  bool released() const override { return released_; }
  void check_versions() const override;
  // A composite op whose result this node made names it (LogSoftmaxBackward0, not SubBackward0).
  void set_name_op(OpId op) { name_op_ = op; }

  // Input `i`'s info (inputs are added in order, each right after its edge in `next`):
  // next[i]'s producer output (the caller checked they agree) ...
  void add_input_info_from_edge(size_t i) { set_info_tag(i, kInfoFromEdge); }
  // ... the info this node's output will have (finish the node with it) ...
  void add_input_info_as_output(size_t i) { set_info_tag(i, kInfoAsOutput); }
  // ... a 0-dim cpu tensor of `dtype` (a wrapped number) ...
  void add_input_info_scalar(size_t i, DType dtype) {
    set_info_tag(i, static_cast<uint8_t>(kInfoScalar + static_cast<uint8_t>(dtype)));
  }
  // ... or kept as given (filled in by the caller).
  OutputInfo& add_input_info_stored(size_t i) {
    set_info_tag(i, kInfoStored);
    return cold_mut().infos.emplace_back();
  }
  // The inputs' infos as recorded, one per edge.
  void input_infos(absl::InlinedVector<OutputInfo, 2>& out) const;

  // The saved result: null where nothing is saved.
  SavedVariable* saved_result() { return cold_ ? &cold_->result : nullptr; }
  const SavedVariable* saved_result() const { return cold_ ? &cold_->result : nullptr; }
  SavedVariable& saved_result_mut() { return cold_mut().result; }

  // Inline room for two inputs (most ops have one or two; more spill to the heap).
  absl::InlinedVector<SavedVariable, 2> saved_;  // one per input; empty where no value is needed

 private:
  enum : uint8_t { kInfoFromEdge = 0, kInfoStored = 1, kInfoAsOutput = 2, kInfoScalar = 3 /* + DType */ };
  static constexpr size_t kInlineTags = 3;
  // What few nodes need (a saved result, stored input infos, tags past kInlineTags), from a
  // per-thread pool. The result and the tags come first: a node that only saves its result
  // writes the block's first line.
  struct Cold final : Pooled<Cold, size_t{1} << 12> {
    SavedVariable result;                     // the output, where the formula or PyTorch keeps it
    std::vector<uint8_t> more_tags;           // info tags of inputs kInlineTags, ...
    absl::InlinedVector<OutputInfo, 2> infos;  // the stored infos, in input order
  };
  Cold& cold_mut() {
    if (!cold_) cold_.reset(new Cold());
    return *cold_;
  }
  void set_info_tag(size_t i, uint8_t tag) {
    if (i < kInlineTags) {
      info_tags_[i] = tag;
    } else {
      cold_mut().more_tags.push_back(tag);  // in order: input i is more_tags[i - kInlineTags]
    }
  }
  uint8_t info_tag(size_t i) const {
    return i < kInlineTags ? info_tags_[i] : cold_->more_tags[i - kInlineTags];
  }

  OpId op_;
  OpId name_op_;
  bool released_ = false;
  uint8_t info_tags_[kInlineTags];  // input i's info tag (kInfo*), for i < kInlineTags
  // A node's own copy of non-default attrs (views, reductions, casts: a good part of a training
  // step's nodes), from a per-thread pool instead of a malloc and free per node.
  struct NodeAttrs final : Attrs, Pooled<NodeAttrs, size_t{1} << 12> {
    explicit NodeAttrs(const Attrs& a) : Attrs(a) {}
  };
  std::unique_ptr<NodeAttrs> attrs_;  // null: default attrs
  std::unique_ptr<Cold> cold_;        // null: no saved result, no stored info, <= 3 inputs
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
