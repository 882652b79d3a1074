// Lazy tensors and functionalization.
//
// A base tensor and all its views share one AliasGroup, which holds the base's current IR
// value and the version counter. A view keeps the chain of primitive view ops that leads from
// the base to it. Reading a view whose cached value is older than the group's version replays
// the chain on the base's current value; writing a view computes the new value out of place
// and scatters it into the base through the chain's inverses (slice_scatter, select_scatter,
// diagonal_scatter, as_strided_scatter, reshape/permute back). The IR stays pure: no node
// ever aliases or mutates another.
#pragma once

#include <atomic>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "core/device.h"
#include "core/view_layout.h"
#include "lazy/node.h"

namespace sloth::lazy {

// The autograd layer hangs its per-tensor state here; lazy/ never looks inside.
class AutogradMetaBase {
 public:
  virtual ~AutogradMetaBase() = default;
};

struct ViewStep {
  OpId op;      // a primitive view op: Reshape, Permute, Expand, Slice, Select, Diagonal, AsStrided
  Attrs attrs;  // normalized
  Shape in_shape;
};

// 64 bytes: with 1e5 live results, every line a recorded op writes is a miss, and each result
// makes one group. (Not alignas(64): aligned allocation measured ~10% slower at 1e5 live,
// though it touches fewer lines in callgrind.)
class AliasGroup final : public RefCounted {
 public:
  // A group holding `value`; `live` groups are listed for mark_step() (wrapped numbers are not).
  static Ref<AliasGroup> make(NodePtr value, Device device, bool live = true);
  ~AliasGroup() override;

  // An unlisted group (a wrapped number's) is reachable only through references, so its last
  // holder may drop it without a locked decrement; a listed one is not (the registry turns
  // its raw pointers into references: see Ref::~Ref).
  static bool sole_release_ok(const AliasGroup* g) { return !g->listed; }

  NodePtr value;         // the base's current value
  Device device;
  int64_t version = 0;   // bumps on every write through any alias

  // Intrusive list of live groups: mark_step() flushes every pending one.
  AliasGroup* prev = nullptr;
  AliasGroup* next = nullptr;
  int32_t jit_holds = 0;  // references held by sloth::jit records (sloth/jit.cc)
  bool listed = false;
  bool borrowed = false;  // shares caller memory (from_blob): lazy/borrowed_memory.h

 protected:
  void release() override;  // recycled through a per-thread pool

 private:
  AliasGroup() = default;
  void link();
  void unlink();
};
static_assert(sizeof(AliasGroup) == 64, "AliasGroup is one cache line");

class TensorImpl final : public RefCounted {
 public:
  // A new base tensor (its own group) holding `value`.
  static Ref<TensorImpl> make(NodePtr value, Device device = Device::cpu());
  // A wrapped number: `x * 2.0` turns 2.0 into a 0-dim operand (a Scalar leaf, i.e. data).
  static Ref<TensorImpl> wrapped_scalar(double v);
  // A view of `self` by one primitive view step (attrs normalized), with PyTorch's strides.
  static Ref<TensorImpl> view_of(const Ref<TensorImpl>& self, OpId op, const Attrs& attrs,
                                 const Layout& logical);
  // Same group and chain, no autograd history (detach()).
  static Ref<TensorImpl> alias_of(const Ref<TensorImpl>& self);

  // The current value: replays the view chain when the group changed since the last read.
  // After a sync the result is a data leaf over the base's storage (zero-copy).
  NodePtr value();
  // Functionalized write: `v` (same shape/dtype as this tensor) becomes this tensor's value;
  // the base's new value is scattered through the chain's inverses; the version bumps.
  void write(NodePtr v);
  // The node whose execution materializes this tensor's data (the group's base value).
  NodePtr base_value() const { return group->value; }

  // Both read the view fields only for a tensor that has some (see view_state_): asking a
  // base tensor touches only its first line.
  bool is_view() const { return view_state_ && view_base != nullptr; }
  bool has_chain() const { return view_state_ && !chain.empty(); }
  bool pending() const { return !group->value->materialized(); }

  // Tensors are reachable only through references (LeafCell's raw pointer is cleared when
  // the tensor dies), so the last holder drops one without a locked decrement (Ref::~Ref).
  static bool sole_release_ok(const TensorImpl*) { return true; }

  // PyTorch's logical strides. A base tensor is contiguous and keeps none until asked (the
  // first call computes them): a recorded result then never touches a strides buffer.
  const Strides& strides() const {
    if (strides_state_.load(std::memory_order_acquire) == kStridesReady) return strides_;
    return fill_contiguous_strides();
  }

  // Field order is for locality: making and dropping a base tensor touches only the first
  // 64 bytes; what only views set (view_base, the offset,
  // strides, the cached value, the chain) follows, behind `view_state_`.
  Ref<AliasGroup> group;
  Shape shape;
  std::unique_ptr<AutogradMetaBase> autograd;
  DType dtype = DType::kFloat32;
  bool wrapped_number = false;

 private:
  static constexpr uint8_t kStridesReady = 2;
  const Strides& fill_contiguous_strides() const;
  // Set when any field below was given a non-default value (views, aliases): release()
  // resets them only then, so dropping a base tensor never touches their lines.
  bool view_state_ = false;
  // 0: strides_ not computed (a base tensor), 1: being computed, 2: ready.
  mutable std::atomic<uint8_t> strides_state_{0};

 public:
  Ref<TensorImpl> view_base;  // the tensor this is a view of (PyTorch's ._base), or null
  int64_t storage_offset = 0;

 private:
  mutable Strides strides_;
  // The memo of a view's value at cached_version_. It is counted in the node's cache_refs
  // (see Node::cache_refs): a sync does not make a node an output just because a cache holds
  // it, and value() never returns a pending cache once the base holds data.
  void set_cache(NodePtr v, int64_t version);
  NodePtr cached_;
  int64_t cached_version_ = -1;

 public:
  absl::InlinedVector<ViewStep, 2> chain;  // empty for a base tensor

 protected:
  void release() override;  // recycled through a per-thread pool (vectors keep capacity)

 private:
  static TensorImpl* acquire();
};
using TensorImplPtr = Ref<TensorImpl>;

// Makes a node for `op` on `inputs`, running the op's rule (which must pass: callers check
// user input before they get here).
NodePtr make_node(OpId op, absl::Span<const NodePtr> inputs, Attrs attrs);

// Every live group whose value is pending, for mark_step().
std::vector<Ref<AliasGroup>> pending_groups(Device device);
// Every live group of a device, pending or not (sloth::jit snapshots them before a step).
std::vector<Ref<AliasGroup>> live_groups(Device device);

}  // namespace sloth::lazy
