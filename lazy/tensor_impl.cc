#include "lazy/tensor_impl.h"

#include <atomic>
#include <cmath>

#include "core/error.h"
#include "core/prefetch.h"
#include "core/slab_pool.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"
#include "lazy/borrowed_memory.h"

namespace sloth::lazy {
namespace {

// The live-group list. Tracing is expected on one thread at a time, but tensors may be made
// or dropped on others (a data loader), so the list is guarded by a tiny spin lock.
std::atomic_flag registry_lock = ATOMIC_FLAG_INIT;
AliasGroup* registry_head = nullptr;

struct RegistryLock {
  RegistryLock() { while (registry_lock.test_and_set(std::memory_order_acquire)) {} }
  ~RegistryLock() { registry_lock.clear(std::memory_order_release); }
};

// Writes `src` back through one view step. An expand that broadcasts is handled by write()
// before any step is inverted, so here its inverse is a reshape.
NodePtr inverse(const ViewStep& step, const NodePtr& base, const NodePtr& src) {
  ViewInverse inv = inverse_of_view(step.op, step.attrs, step.in_shape);
  if (inv.scatter) return make_node(inv.op, {base, src}, inv.attrs);
  return make_node(inv.op, {src}, inv.attrs);
}

// Groups and impls come from per-thread slabs (core/slab_pool.h): neighbouring ops get
// neighbouring objects whatever was freed before, and a recycled one keeps its buffers.
constexpr size_t kGroupStride = (sizeof(AliasGroup) + 63) & ~size_t{63};
constexpr size_t kImplStride = (sizeof(TensorImpl) + 63) & ~size_t{63};
const SlabPool::Type kGroupSlab{kGroupStride, [](void* p) { static_cast<AliasGroup*>(p)->~AliasGroup(); }};
const SlabPool::Type kImplSlab{kImplStride, [](void* p) { static_cast<TensorImpl*>(p)->~TensorImpl(); }};
thread_local SlabPool* group_slabs = nullptr;
thread_local SlabPool* impl_slabs = nullptr;

}  // namespace

void AliasGroup::link() {
  RegistryLock lock;
  prev = nullptr;
  next = registry_head;
  if (registry_head) registry_head->prev = this;
  registry_head = this;
  listed = true;
}

void AliasGroup::unlink() {
  RegistryLock lock;
  if (prev) prev->next = next;
  else if (registry_head == this) registry_head = next;
  if (next) next->prev = prev;
  prev = next = nullptr;
  listed = false;
}

Ref<AliasGroup> AliasGroup::make(NodePtr v, Device d, bool live) {
  bool fresh;
  void* p = SlabPool::take<kGroupStride>(kGroupSlab, group_slabs, &fresh);
  // The next op's groups (a result's and a wrapped number's) are the next slots: see
  // core/prefetch.h.
  prefetch_for_write(static_cast<char*>(p) + 2 * kGroupStride, 2 * kGroupStride);
  AliasGroup* g = fresh ? new (p) AliasGroup() : static_cast<AliasGroup*>(p);
  g->value = std::move(v);
  g->device = d;
  g->version = 0;
  Ref<AliasGroup> r = Ref<AliasGroup>::adopt_new(g);  // before link(): then others may see it
  if (live) g->link();
  return r;
}

AliasGroup::~AliasGroup() {
  if (listed) unlink();
}

void AliasGroup::release() {
  if (borrowed) [[unlikely]] borrowed_group_released(*this);
  if (listed) unlink();
  value.reset();
  SlabPool::give<kGroupStride>(kGroupSlab, group_slabs, this);
}

TensorImpl* TensorImpl::acquire() {
  bool fresh;
  void* p = SlabPool::take<kImplStride>(kImplSlab, impl_slabs, &fresh);
  // The next ops' tensors (a result and a wrapped number's handle) are the next slots: their
  // hot line three takes ahead. See core/prefetch.h.
  prefetch_for_write(static_cast<char*>(p) + 3 * kImplStride, 64);
  return fresh ? new (p) TensorImpl() : static_cast<TensorImpl*>(p);
}

void TensorImpl::release() {
  group.reset();
  autograd.reset();
  wrapped_number = false;
  if (strides_state_.load(std::memory_order_relaxed) != 0)
    strides_state_.store(0, std::memory_order_relaxed);
  if (view_state_) {
    chain.clear();
    view_base.reset();
    set_cache(nullptr, -1);
    storage_offset = 0;
    view_state_ = false;
  }
  SlabPool::give<kImplStride>(kImplSlab, impl_slabs, this);
}

namespace {
void set_contiguous(const Shape& shape, Strides& strides) {
  strides.resize(shape.size());
  contiguous_strides_into(shape, absl::MakeSpan(strides));
}
}  // namespace

const Strides& TensorImpl::fill_contiguous_strides() const {
  // Two threads may ask at once: the first computes, the other waits for it (a few ns).
  uint8_t expected = 0;
  if (strides_state_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
    set_contiguous(shape, strides_);
    strides_state_.store(kStridesReady, std::memory_order_release);
  } else {
    while (strides_state_.load(std::memory_order_acquire) != kStridesReady) {
    }
  }
  return strides_;
}

std::vector<Ref<AliasGroup>> pending_groups(Device device) {
  std::vector<Ref<AliasGroup>> out;
  RegistryLock lock;
  for (AliasGroup* g = registry_head; g != nullptr; g = g->next) {
    if (g->device == device && g->value && !g->value->materialized() &&
        g->value->op != OpId::kScalar)
      if (Ref<AliasGroup> r = Ref<AliasGroup>::try_acquire(g)) out.push_back(std::move(r));
  }
  return out;
}

std::vector<Ref<AliasGroup>> live_groups(Device device) {
  std::vector<Ref<AliasGroup>> out;
  RegistryLock lock;
  for (AliasGroup* g = registry_head; g != nullptr; g = g->next)
    if (g->device == device && g->value)
      if (Ref<AliasGroup> r = Ref<AliasGroup>::try_acquire(g)) out.push_back(std::move(r));
  return out;
}

NodePtr make_node(OpId op, absl::Span<const NodePtr> inputs, Attrs attrs) {
  // The rules read Shapes; node shapes are inline Dims. Per-thread scratch: no malloc in
  // steady state (views replay and scatter through here).
  thread_local std::vector<Shape> shapes;
  if (shapes.size() < inputs.size()) shapes.resize(inputs.size());
  absl::InlinedVector<TensorMeta, 4> metas;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& n = *inputs[i];
    shapes[i].assign(n.shape.begin(), n.shape.end());
    metas.push_back({&shapes[i], n.dtype, n.op == OpId::kScalar});
  }
  OutputMeta out;
  absl::Status st = infer(op, metas, attrs, &out);
  if (!st.ok()) fail("internal: %s", st.message());
  return Node::make(op, out.shape, out.dtype, attrs, inputs);
}

namespace {
// dst = src for a recycled tensor's shape, whose buffer usually has the room: the common
// ranks copied inline instead of through a memmove call (an op records one shape).
inline void copy_shape(Shape& dst, IntSpan src) {
  const size_t n = src.size();
  if (dst.size() != n) dst.resize(n);
  int64_t* d = dst.data();
  switch (n) {
    case 4: d[3] = src[3]; [[fallthrough]];
    case 3: d[2] = src[2]; [[fallthrough]];
    case 2: d[1] = src[1]; [[fallthrough]];
    case 1: d[0] = src[0]; [[fallthrough]];
    case 0: break;
    default: std::copy(src.begin(), src.end(), d);
  }
}
}  // namespace

Ref<TensorImpl> TensorImpl::make(NodePtr value, Device device) {
  Ref<TensorImpl> t = Ref<TensorImpl>::adopt_new(acquire());
  copy_shape(t->shape, value->shape);
  t->dtype = value->dtype;
  t->group = AliasGroup::make(std::move(value), device);
  return t;
}

Ref<TensorImpl> TensorImpl::wrapped_scalar(double v) {
  bool integral = std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.0e15;
  Ref<TensorImpl> t = Ref<TensorImpl>::adopt_new(acquire());
  t->shape.clear();
  t->dtype = integral ? DType::kInt64 : DType::kFloat64;
  t->wrapped_number = true;
  // The node is always float64, so a step-dependent number (a learning rate that reaches 1.0)
  // never changes the graph; only promotion sees the integral-ness, through t->dtype.
  t->group = AliasGroup::make(Node::scalar_leaf(v, DType::kFloat64), Device::cpu(), /*live=*/false);
  return t;
}

Ref<TensorImpl> TensorImpl::view_of(const Ref<TensorImpl>& self, OpId op, const Attrs& attrs,
                                    const Layout& logical) {
  Ref<TensorImpl> t = Ref<TensorImpl>::adopt_new(acquire());
  t->group = self->group;
  if (op == OpId::kAsStrided) {
    // as_strided is relative to the storage, not to self: its chain starts at the base.
    Shape base_shape = self->chain.empty() ? self->shape : self->chain.front().in_shape;
    t->chain.push_back({op, attrs, std::move(base_shape)});
  } else {
    t->chain = self->chain;
    t->chain.push_back({op, attrs, self->shape});
  }
  t->view_base = self->view_base ? self->view_base : self;
  t->shape = logical.shape;
  t->strides_ = logical.strides;
  t->strides_state_.store(kStridesReady, std::memory_order_relaxed);
  t->storage_offset = logical.offset;
  t->dtype = self->dtype;
  t->view_state_ = true;
  return t;
}

Ref<TensorImpl> TensorImpl::alias_of(const Ref<TensorImpl>& self) {
  Ref<TensorImpl> t = Ref<TensorImpl>::adopt_new(acquire());
  t->group = self->group;
  t->shape = self->shape;
  t->dtype = self->dtype;
  t->wrapped_number = self->wrapped_number;
  // An alias of a base tensor is a base-like tensor (contiguous, strides computed on demand).
  if (self->view_state_) {
    t->chain = self->chain;
    t->strides_ = self->strides();
    t->strides_state_.store(kStridesReady, std::memory_order_relaxed);
    t->storage_offset = self->storage_offset;
    t->view_state_ = true;
  }
  return t;
}

NodePtr TensorImpl::value() {
  if (!has_chain()) return group->value;
  const NodePtr& base = group->value;
  if (cached_ && cached_version_ == group->version &&
      (cached_->materialized() || !base->materialized()))
    return cached_;
  NodePtr v = base;
  bool done = false;
  if (base->materialized()) {
    // Zero-copy: the view is the base's storage read through the chain's layouts.
    Layout l = base->data->layout;
    bool ok = true;
    for (const auto& s : chain) {
      auto nl = apply_view(s.op, s.attrs, l);
      if (!nl) { ok = false; break; }
      l = std::move(*nl);
    }
    if (ok) {
      v = Node::data_leaf(DeviceData{base->data->storage, std::move(l), base->dtype});
      done = true;
    }
  }
  if (!done)
    for (const auto& s : chain) v = make_node(s.op, {v}, s.attrs);
  set_cache(v, group->version);
  return v;
}

void TensorImpl::write(NodePtr v) {
  if (group->borrowed) [[unlikely]] note_borrowed_write(*group);
  if (!has_chain()) {
    group->value = std::move(v);
    ++group->version;
    return;
  }
  // A chain with a broadcasting expand has no step-by-step inverse, but a write through it is
  // legal when the final view's elements are distinct (checked by the caller): the view's own
  // layout over the (contiguous) base storage then says where each element goes.
  bool broadcasts = false;
  for (const auto& s : chain)
    if (s.op == OpId::kExpand && numel(s.in_shape) != numel(s.attrs.dims))
      broadcasts = true;
  if (broadcasts) {
    const Attrs a = AsStridedAttrs{
        .size = attr_dims(shape), .stride = attr_dims(strides()), .offset = storage_offset};
    group->value = make_node(OpId::kAsStridedScatter, {group->value, v}, a);
    ++group->version;
    set_cache(std::move(v), group->version);
    return;
  }
  absl::InlinedVector<NodePtr, 4> bases;
  bases.push_back(group->value);
  for (size_t i = 0; i + 1 < chain.size(); ++i)
    bases.push_back(make_node(chain[i].op, {bases.back()}, chain[i].attrs));
  NodePtr nv = v;
  for (size_t i = chain.size(); i-- > 0;) nv = inverse(chain[i], bases[i], nv);
  group->value = std::move(nv);
  ++group->version;
  set_cache(std::move(v), group->version);
}

void TensorImpl::set_cache(NodePtr v, int64_t version) {
  if (cached_) --cached_->cache_refs;
  cached_ = std::move(v);
  if (cached_) ++cached_->cache_refs;
  cached_version_ = version;
}

}  // namespace sloth::lazy
