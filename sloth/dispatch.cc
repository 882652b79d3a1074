#include "sloth/dispatch.h"

#include <algorithm>
#include <array>

#include "absl/base/attributes.h"
#include "absl/container/inlined_vector.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/op_attrs.h"
#include "core/view_layout.h"
#include "lazy/metrics.h"
#include "lazy/scheduler.h"
#include "lazy/tensor_impl.h"
#include "sloth/ops.h"
#include "sloth/saved_tensors.h"
#include "sloth/view_autograd.h"

namespace sloth {

using lazy::NodePtr;
using lazy::TensorImpl;
using lazy::TensorImplPtr;

namespace internal {
namespace {
std::array<Decomposition, kNumOps>& decompositions() {
  static std::array<Decomposition, kNumOps> d{};
  return d;
}
}  // namespace
void register_decomposition(OpId op, Decomposition d) { decompositions()[static_cast<int>(op)] = d; }
Decomposition decomposition(OpId op) { return decompositions()[static_cast<int>(op)]; }

void sync_tensor(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  if (impl.pending()) {
    NodePtr root = impl.base_value();
    lazy::sync_nodes({&root, 1}, impl.group->device);
  }
}
}  // namespace internal

namespace {

Device device_of(OpId op, absl::Span<const Tensor> in) {
  Device d = Device::cpu();
  bool found = false;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].impl()->wrapped_number) continue;
    Device di = in[i].impl()->group->device;
    if (found && !(di == d))
      fail("%s: expected all tensors on the same device, but operand %d is on %s and an earlier "
           "one on %s; move them with .to(Device)",
           op_name(op), static_cast<int64_t>(i), di.str(), d.str());
    d = di;
    found = true;
  }
  return d;
}

bool any_requires_grad(absl::Span<const Tensor> in) {
  bool any = false;
  for (const auto& t : in) any |= internal::tracks_grad(t);
  return any;
}

// dst = src for a freshly made (empty) OutputInfo shape: pushed inline (room for 5 dims)
// instead of absl's out-of-line generic assign (~55 instructions each, three per binary op).
inline void fill_info_shape(autograd::InfoShape& dst, const Shape& src) {
  for (int64_t d : src) dst.push_back(d);
}

// Input `i`'s info kept as given, in the node's cold block (an operand that needs no gradient;
// out of line: the common inputs take the tags below).
ABSL_ATTRIBUTE_NOINLINE void add_stored_input_info(autograd::OpBackward& fn, size_t i,
                                                   const Shape& shape, DType dtype,
                                                   Device device) {
  autograd::OutputInfo& info = fn.add_input_info_stored(i);  // filled in place: no copies
  fill_info_shape(info.shape, shape);
  info.dtype = dtype;
  info.device = device;
}

// Are dims a[0, n) `b` (compared inline: a memcmp call for a dim or two costs more than the
// loop)?
inline bool same_dims(const int64_t* a, size_t n, const Shape& b) {
  if (n != b.size()) return false;
  for (size_t k = 0; k < n; ++k)
    if (a[k] != b[k]) return false;
  return true;
}

// The info of input `fn.next.back()` (the edge just added): a tag where backward can tell it
// again (a 0-dim cpu operand by its dtype; an operand whose edge's producer recorded this very
// info reads it there; one with the info of the result `ri`, as `y + b` with b not requiring
// grad, reads the node's output info), else stored. Inlined (gcc kept it out of line: a call
// with five arguments and six saved registers per operand).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void add_input_info(autograd::OpBackward& fn,
                                                        const Shape& shape, DType dtype,
                                                        Device device, const TensorImpl& ri) {
  const size_t i = fn.next.size() - 1;
  if (shape.empty() && device == Device::cpu()) {
    fn.add_input_info_scalar(i, dtype);
    return;
  }
  const autograd::Edge& e = fn.next[i];
  if (e.fn && static_cast<size_t>(e.input_nr) < e.fn->outputs.size()) {
    const autograd::OutputInfo& p = e.fn->outputs[e.input_nr];
    if (p.dtype == dtype && p.device == device &&
        same_dims(p.shape.data(), p.shape.size(), shape)) {
      fn.add_input_info_from_edge(i);
      return;
    }
  }
  if (ri.dtype == dtype && ri.group->device == device &&
      same_dims(shape.data(), shape.size(), ri.shape)) {
    fn.add_input_info_as_output(i);
    return;
  }
  add_stored_input_info(fn, i, shape, dtype, device);
}

// n empty saved slots in a fresh node: emplaced one by one (absl's generic resize is an
// out-of-line call of ~70 instructions for two).
inline void add_saved_slots(autograd::OpBackward& fn, size_t n) {
  if (n > 2) fn.saved_.reserve(n);
  for (size_t i = 0; i < n; ++i) fn.saved_.emplace_back();
}

// The last step of attaching a backward node: the output's info, and `ri`'s history.
// `owner` is held as the meta's pointer type from the start, so handing it over is a move (a
// converting copy would be a locked increment and decrement, each waiting for the node's
// fresh stores).
inline void finish_grad_fn(autograd::OpBackward& fn, autograd::GradFnPtr owner, TensorImpl& ri) {
  autograd::OutputInfo& out = fn.outputs.emplace_back();
  fill_info_shape(out.shape, ri.shape);
  out.dtype = ri.dtype;
  out.device = ri.group->device;
  auto& m = autograd::ensure_meta(ri);
  m.grad_fn = std::move(owner);
  m.output_nr = 0;
  m.requires_grad = true;
}

// attach_grad_fn past its first check (below).
void attach_grad_fn_tracked(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                            Tensor& result) {
  if (!autograd::is_grad_enabled() || op_info(op).grad != GradKind::Formula) return;
  TensorImpl& ri = *result.impl();
  if (!is_floating(ri.dtype)) return;
  // Does any operand track grad? A view is asked through tracks_grad, which also regenerates
  // its stale history (so the edges below see it); a base tensor tracks grad exactly when it
  // requires it, read inline. Every view is refreshed, as PyTorch's per-input checks do.
  bool any = false;
  for (const auto& t : in) {
    const TensorImpl& ti = *t.impl();
    any |= ti.is_view() ? internal::tracks_grad(t) : autograd::requires_grad(ti);
  }
  if (!any) return;
  autograd::OpBackward* fn = new autograd::OpBackward(op, attrs);
  autograd::GradFnPtr owner = autograd::GradFnPtr::adopt_new(fn);
  if (in.size() > 3) fn->next.reserve(in.size());  // it holds three inline
  uint32_t needs = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorImpl& ti = *in[i].impl();
    // A wrapped number (x * 2.0) never requires grad: no meta to look at. Views were
    // refreshed above: their edge is read directly.
    const bool differentiable =
        !ti.wrapped_number && is_floating(ti.dtype) && autograd::requires_grad(ti);
    if (differentiable) {
      fn->next.push_back(autograd::gradient_edge(in[i].impl()));
      if (i < 32) needs |= 1u << i;
    } else {
      fn->next.emplace_back();
    }
    add_input_info(*fn, ti.shape, ti.dtype, ti.group->device, ri);
  }
  const internal::SavePlan plan = internal::save_plan(op, attrs, in, needs);
  // Most nodes (add, sum, views, ...) save no input: their saved_ stays empty.
  if (plan.value | plan.check) add_saved_slots(*fn, in.size());
  for (size_t i = 0; i < in.size() && i < 32; ++i)
    if ((plan.value | plan.check) >> i & 1) fn->saved_[i].save(in[i].impl(), plan.check >> i & 1);
  if (plan.result_value || plan.result_check) {
    fn->saved_result_mut().save(result.impl(), plan.result_check);
  }
  finish_grad_fn(*fn, std::move(owner), ri);
}

// attach_grad_fn for call_op_number's `t op v` (or `v op t`, the tensor at `tensor_pos`),
// whose number entered the IR as the Scalar leaf `number` without a tensor of its own: the
// same node as for call_op(op, {t, wrap_scalar(v)}) (a wrapped number's input info, its value
// saved unchecked where the formula reads it), without making and dropping that tensor.
// `t` is a base tensor (no view: nothing to refresh).
// `number` is handed over when the node saves it (no locked increment and decrement pair).
void attach_grad_fn_number(OpId op, const Tensor& t, const Scalar& v, NodePtr& number,
                           int tensor_pos, Tensor& result) {
  if (op_info(op).grad != GradKind::Formula) return;
  TensorImpl& ri = *result.impl();
  const TensorImpl& ti = *t.impl();
  if (!is_floating(ri.dtype) || !autograd::requires_grad(ti)) return;
  autograd::OpBackward* fn = new autograd::OpBackward(op);
  autograd::GradFnPtr owner = autograd::GradFnPtr::adopt_new(fn);
  const int number_pos = 1 - tensor_pos;
  const bool differentiable = !ti.wrapped_number && is_floating(ti.dtype);
  uint32_t needs = 0;
  for (int i = 0; i < 2; ++i) {
    if (i == tensor_pos) {
      if (differentiable) {
        fn->next.push_back(autograd::gradient_edge(t.impl()));
        needs |= 1u << i;
      } else {
        fn->next.emplace_back();
      }
      add_input_info(*fn, ti.shape, ti.dtype, ti.group->device, ri);
    } else {
      fn->next.emplace_back();
      fn->add_input_info_scalar(static_cast<size_t>(i), v.type());  // as wrap_scalar's: 0-dim
    }
  }
  const internal::SavePlan plan = internal::save_plan_with_number(op, needs, number_pos);
  const uint32_t saved = plan.value | plan.check;
  if (saved) {
    add_saved_slots(*fn, 2);
    if (saved >> tensor_pos & 1) fn->saved_[tensor_pos].save(t.impl(), plan.check >> tensor_pos & 1);
    if (saved >> number_pos & 1) fn->saved_[number_pos].save_number(std::move(number));
  }
  if (plan.result_value || plan.result_check) {
    fn->saved_result_mut().save(result.impl(), plan.result_check);
  }
  finish_grad_fn(*fn, std::move(owner), ri);
}

// Attaches `op`'s backward to `result` when an operand requires grad. The node saves what
// PyTorch's node saves (sloth/saved_tensors.cc), each with its alias group's version.
inline void attach_grad_fn(OpId op, const Attrs& attrs, absl::Span<const Tensor> in,
                           Tensor& result) {
  // No operand has autograd state or is a view: none tracks grad (internal::tracks_grad), and
  // the common no-grad op leaves here after two loads per operand, without a call.
  bool plain = true;
  for (const auto& t : in) plain &= t.impl()->autograd == nullptr && !t.impl()->is_view();
  if (!plain) attach_grad_fn_tracked(op, attrs, in, result);
}

Tensor record(OpId op, absl::Span<const Tensor> in, const Attrs& attrs, const OutputMeta& out,
              Device device) {
  // A base tensor's value is its group's node: pass it without a reference of our own (a
  // locked increment and decrement each); only views replay their chain into a new node.
  // Up to four operands in arrays on the stack (no vector bookkeeping per op).
  constexpr size_t kInline = 4;
  lazy::Node* inline_values[kInline];
  std::vector<lazy::Node*> more_values;
  lazy::Node** values = inline_values;
  if (in.size() > kInline) {
    more_values.resize(in.size());
    values = more_values.data();
  }
  absl::InlinedVector<NodePtr, 2> replayed;
  for (size_t i = 0; i < in.size(); ++i) {
    TensorImpl& ti = *in[i].impl();
    if (!ti.has_chain()) {
      values[i] = ti.group->value.get();
    } else {
      replayed.push_back(ti.value());
      values[i] = replayed.back().get();
    }
  }
  NodePtr n = lazy::Node::make(op, out.shape, out.dtype, attrs,
                               absl::Span<lazy::Node* const>(values, in.size()));
  Tensor result(TensorImpl::make(std::move(n), device));
  attach_grad_fn(op, attrs, in, result);
  return result;
}

Tensor make_view(OpId op, const Tensor& x, const Attrs& attrs) {
  const TensorImplPtr& xi = x.impl();
  auto prim = lower_view(op, xi->shape, attrs);
  Layout logical{xi->shape, xi->strides(), xi->storage_offset};
  std::optional<Layout> l;
  if (prim.op == OpId::kAsStrided) {
    const auto v = AsStridedAttrs::of(prim.attrs);
    l = Layout{Shape(v.size.begin(), v.size.end()), Strides(v.stride.begin(), v.stride.end()),
               v.offset};
  } else {
    l = apply_view(prim.op, prim.attrs, logical);
  }
  if (!l) {
    if (op == OpId::kView)
      fail("view: the input %s with strides %s cannot be viewed as %s without a copy (its memory "
           "is not laid out for it); use reshape(), which copies when it must, or call "
           "contiguous() first",
           shape_str(xi->shape), shape_str(xi->strides()), shape_str(prim.attrs.dims));
    // reshape of a non-viewable layout copies, as in PyTorch.
    Tensor c = call_op(OpId::kClone, {x});
    return make_view(op, c, attrs);
  }
  Tensor v(TensorImpl::view_of(xi, prim.op, prim.attrs, *l));
  if (internal::tracks_grad(x) && is_floating(xi->dtype)) {
    if (autograd::is_grad_enabled()) {
      attach_grad_fn(prim.op, prim.attrs, {x}, v);
      auto& vm = autograd::ensure_meta(*v.impl());
      vm.view_version = xi->group->version;
      // A view of a split/chunk output is one too (PyTorch propagates the creation meta).
      if (auto* xm = autograd::meta(*xi); xm != nullptr) vm.multi_output = xm->multi_output;
    } else {
      // A view made under no_grad keeps no history and never gets one regenerated; like
      // PyTorch it still reports requires_grad (as a leaf), and writing it with grad on fails.
      // (Its requires_grad is its base's, reported by tracks_grad: PyTorch asks the root base.)
      autograd::ensure_meta(*v.impl()).frozen_view = true;
    }
  } else if (is_floating(xi->dtype)) {
    // No history now, but PyTorch's view remembers how it was made: under no_grad (a later
    // write that involves grad is refused), from a split/chunk output, and the base's version
    // (its history is regenerated only after a write that comes later).
    auto* xm = autograd::meta(*xi);
    if (!autograd::is_grad_enabled()) {
      autograd::ensure_meta(*v.impl()).frozen_view = true;
    } else if (xi->group->version != 0 || (xm && (xm->multi_output >= 0 || xm->frozen_view))) {
      auto& vm = autograd::ensure_meta(*v.impl());
      vm.view_version = xi->group->version;
      if (xm) {
        vm.multi_output = xm->multi_output;
        vm.frozen_view = xm->frozen_view;
      }
    }
  }
  return v;
}

// Why a write through `t` would store two elements into one memory location, or "" if it
// would not: an expanded dim, or an as_strided layout whose elements overlap.
std::string internal_overlap(const TensorImpl& t) {
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] > 1 && t.strides()[i] == 0) return "it is an expanded view";
  // An expand earlier in the chain is fine when later views keep one element of each broadcast
  // run (x.expand(2, 3)[0]): the final layout decides, as in PyTorch.
  // Fast proof of no overlap: with the dims sorted by stride, each stride exceeds the span
  // of all smaller ones. Every view but as_strided passes it.
  absl::InlinedVector<std::pair<int64_t, int64_t>, 8> dims;  // (|stride|, size), sizes > 1
  int64_t n = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    n *= t.shape[i];
    if (t.shape[i] > 1) dims.emplace_back(t.strides()[i] < 0 ? -t.strides()[i] : t.strides()[i], t.shape[i]);
  }
  if (n == 0) return "";
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;
  bool proven = true;
  for (const auto& [stride, size] : dims) {
    if (stride <= span) { proven = false; break; }
    span += (size - 1) * stride;
  }
  if (proven) return "";
  // Interleaved layouts can still be disjoint: enumerate the offsets when that is cheap.
  if (n > (int64_t{1} << 22)) return "its as_strided layout may overlap (too large to check)";
  std::vector<int64_t> off(1, 0);
  off.reserve(n);
  for (const auto& [stride, size] : dims) {
    const size_t m = off.size();
    for (int64_t k = 1; k < size; ++k)
      for (size_t j = 0; j < m; ++j) off.push_back(off[j] + k * stride);
  }
  std::sort(off.begin(), off.end());
  if (std::adjacent_find(off.begin(), off.end()) != off.end())
    return "its as_strided layout has overlapping elements";
  return "";
}

// Dense: the elements fill [offset, offset + numel) exactly, in some order of the dims.
bool non_overlapping_and_dense(const TensorImpl& t) {
  absl::InlinedVector<std::pair<int64_t, int64_t>, 8> dims;  // (stride, size), sizes > 1
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] > 1) dims.emplace_back(t.strides()[i], t.shape[i]);
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// PyTorch's check of an in-place op's inputs against its output (get_overlap_status): two
// dense tensors over one storage whose element ranges intersect, unless they are the very same
// elements in the same layout. Layouts it cannot decide cheaply (non-dense) pass, as in ATen.
bool partially_overlap(const TensorImpl& out, const TensorImpl& in) {
  if (&out == &in || in.wrapped_number || out.group.get() != in.group.get()) return false;
  const int64_t n_out = numel(out.shape), n_in = numel(in.shape);
  if (n_out == 0 || n_in == 0) return false;
  if (!non_overlapping_and_dense(out) || !non_overlapping_and_dense(in)) return false;
  const int64_t a0 = out.storage_offset, a1 = a0 + n_out, b0 = in.storage_offset, b1 = b0 + n_in;
  if (a0 == b0 && a1 == b1) return out.strides() != in.strides();
  return a0 < b1 && b0 < a1;
}

Tensor snapshot(const Tensor& self) {
  Tensor snap(TensorImpl::make(self.impl()->value(), self.device()));
  autograd::Edge e = internal::gradient_edge_of(self);
  if (e.fn && autograd::is_grad_enabled()) {
    auto& m = autograd::ensure_meta(*snap.impl());
    m.grad_fn = e.fn;
    m.output_nr = e.input_nr;
    m.requires_grad = true;
  }
  return snap;
}

// The out-of-place value an in-place op writes, as a fresh tensor of self's shape and dtype.
Tensor inplace_result(OpId op, absl::Span<const Tensor> in) {
  const Tensor& self = in[0];
  Tensor r;
  switch (op) {
    case OpId::kCopy_: {
      r = in[1];
      if (r.dtype() != self.dtype()) r = r.to(self.dtype());
      if (r.shape() != self.shape()) r = r.expand(self.shape());
      r = call_op(OpId::kClone, {r});  // a fresh value: groups never share a node
      break;
    }
    case OpId::kFill_: {
      Attrs a;
      a.dims.assign(self.shape().begin(), self.shape().end());
      a.dtype = self.dtype();
      r = call_op(OpId::kFull, {in[1]}, a);
      break;
    }
    case OpId::kZero_: {
      Attrs a;
      a.dims.assign(self.shape().begin(), self.shape().end());
      a.dtype = self.dtype();
      r = call_op(OpId::kFull, {wrap_scalar(0)}, a);
      break;
    }
    case OpId::kIndexPut_: {  // the values are stored as self's dtype before indexing
      Tensor v = in[2].dtype() == self.dtype() ? in[2] : in[2].to(self.dtype());
      r = call_op(OpId::kIndexPut, {self, in[1], v});
      break;
    }
    default: {
      // add_, mul_, clamp_, relu_, ...: the table's out-of-place op on the same operands.
      const std::optional<OpId> fn = op_info(op).facts.functional;
      if (!fn) fail("internal: %s is not an in-place op", op_name(op));
      r = call_op(*fn, in);
    }
  }
  if (r.dtype() != self.dtype()) r = r.to(self.dtype());
  return r;
}

Tensor do_inplace(OpId op, absl::Span<const Tensor> in) {
  const Tensor& self = in[0];
  TensorImpl& si = *self.impl();
  const bool grad_mode = autograd::is_grad_enabled();
  if (grad_mode) {
    const TensorImpl* leaf = si.is_view() ? si.view_base.get() : &si;
    auto* m = autograd::meta(*leaf);
    if (m && m->requires_grad && !m->grad_fn)
      fail("%s: a %sleaf tensor that requires grad (%s %s) is being used in an in-place "
           "operation; wrap the update in NoGradGuard (as optimizers do), or clone() it first",
           op_name(op), si.is_view() ? "view of a " : "", dtype_name(leaf->dtype),
           shape_str(leaf->shape));
  }
  if (grad_mode && si.is_view()) {
    auto* m = autograd::meta(si);
    bool involves_grad = false;
    if (m && m->frozen_view) {
      involves_grad = internal::tracks_grad(self, false);
      for (size_t i = 1; i < in.size(); ++i) involves_grad |= internal::tracks_grad(in[i], false);
    }
    if (involves_grad)
      fail("%s: a view was created in no_grad mode and is being modified in place with grad "
           "mode enabled; autograd cannot track it. Make the view with grad enabled, or do the "
           "write under NoGradGuard, or clone() the view first",
           op_name(op));
  }
  if (grad_mode && si.is_view()) {
    bool involves_grad = internal::tracks_grad(self, false);
    for (size_t i = 1; i < in.size(); ++i) involves_grad |= internal::tracks_grad(in[i], false);
    if (involves_grad) internal::check_multi_output_write(self, std::string(op_name(op)).c_str());
  }
  // fill_ and zero_ store one value everywhere, so PyTorch lets them write expanded views.
  const bool same_value_everywhere = op == OpId::kFill_ || op == OpId::kZero_;
  if (std::string why = same_value_everywhere ? "" : internal_overlap(si); !why.empty())
    fail("%s: unsupported operation: more than one element of the written-to tensor (shape %s, "
         "strides %s) refers to a single memory location (%s); clone() it before writing",
         op_name(op), shape_str(si.shape), shape_str(si.strides()), why);
  for (size_t i = 1; i < in.size(); ++i)
    if (partially_overlap(si, *in[i].impl()))
      fail("%s: unsupported operation: some elements of the input tensor (operand %d: shape %s, "
           "strides %s, offset %d) and the written-to tensor (shape %s, strides %s, offset %d) "
           "refer to a single memory location; clone() the input before the in-place operation",
           op_name(op), static_cast<int64_t>(i), shape_str(in[i].shape()),
           shape_str(in[i].impl()->strides()), in[i].impl()->storage_offset, shape_str(si.shape),
           shape_str(si.strides()), si.storage_offset);
  // The out-of-place op reads a snapshot of self: same value node and history, but its own
  // alias group, so values saved for backward keep their version when self is overwritten
  // (PyTorch saves `original_self` for the same reason).
  absl::InlinedVector<Tensor, 3> operands(in.begin(), in.end());
  operands[0] = snapshot(self);
  Tensor r = inplace_result(op, operands);
  const bool track = grad_mode && (autograd::requires_grad(*r.impl()) || autograd::requires_grad(si) ||
                                   (si.is_view() && autograd::requires_grad(*si.view_base)));
  if (track && si.is_view()) {
    internal::rebase_view_history(self, r);  // CopySlices on the base, before the write
  }
  // copy_, fill_ and zero_ discard self's old value: their node (CopyBackwards, ...) still
  // links to self's old history with a zero gradient, so self stays a non-leaf and upstream
  // leaves get a defined zero gradient, as in PyTorch.
  autograd::Edge old_self;
  auto* rm = autograd::meta(*r.impl());
  const bool overwrite = track && !si.is_view() &&
                         (op == OpId::kCopy_ || op == OpId::kFill_ || op == OpId::kZero_ ||
                          !(rm && rm->grad_fn));
  if (overwrite) old_self = internal::gradient_edge_of(self);
  si.write(r.impl()->value());
  if (track) {
    // A node that saved its result (relu_) saved the tensor it wrote: check that one.
    if (rm && rm->grad_fn)
      if (auto* ob = dynamic_cast<autograd::OpBackward*>(rm->grad_fn.get());
          ob != nullptr && ob->saved_result() && ob->saved_result()->group == r.impl()->group) {
        ob->saved_result()->group = si.group;
        ob->saved_result()->set_version(si.group->version);
      }
    if (si.is_view()) {
      internal::refresh_view_grad_fn(self);
    } else if (overwrite) {
      auto& m = autograd::ensure_meta(si);
      autograd::Edge value = rm && rm->grad_fn ? internal::gradient_edge_of(r) : autograd::Edge{};
      m.grad_fn = internal::overwrite_backward(op, old_self, std::move(value),
                                               {si.shape, si.dtype, si.group->device});
      m.output_nr = 0;
      m.requires_grad = true;
    } else {
      auto& m = autograd::ensure_meta(si);
      m.grad_fn = rm->grad_fn;
      m.output_nr = rm->output_nr;
      m.requires_grad = true;
    }
  }
  return self;
}

// split/chunk outputs made with grad are PyTorch's MULTI_OUTPUT_NODE views.
void mark_multi_output(std::vector<Tensor>& parts) {
  if (!autograd::is_grad_enabled()) return;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!is_floating(parts[i].dtype())) continue;
    auto& m = autograd::ensure_meta(*parts[i].impl());
    if (m.frozen_view) continue;
    m.multi_output = static_cast<int>(i);
    if (m.view_version < 0) m.view_version = parts[i].impl()->group->version;
  }
}

}  // namespace

namespace {
// What infer() decides for the op being called, reused per thread: its shape keeps its
// capacity, so inference allocates nothing. Nothing between infer() and the recording of the
// node re-enters call_op.
thread_local OutputMeta infer_out;
// The shape of a number operand: 0-dim.
const Shape kNumberShape;
}  // namespace

Tensor call_op(OpId op, absl::Span<const Tensor> in, Attrs attrs) {
  const OpInfo& info = op_info(op);
  // Filled field by field in place (a pushed temporary was reloaded as one 16-byte word from
  // its three narrower stores: a store-forwarding stall per operand). Up to four on the stack.
  constexpr size_t kInline = 4;
  TensorMeta inline_metas[kInline];
  std::vector<TensorMeta> more_metas;
  TensorMeta* metas = inline_metas;
  if (in.size() > kInline) {
    more_metas.resize(in.size());
    metas = more_metas.data();
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].defined())
      fail("%s: operand %d is an undefined tensor", info.name, static_cast<int64_t>(i));
    const TensorImpl& t = *in[i].impl();
    metas[i].shape = &t.shape;
    metas[i].dtype = t.dtype;
    metas[i].wrapped_number = t.wrapped_number;
  }
  OutputMeta& out = infer_out;
  throw_if_error(infer(op, absl::Span<const TensorMeta>(metas, in.size()), attrs, &out));
  Device device = device_of(op, in);
  ++lazy::counters().ops_traced;
  Tensor result;
  switch (info.category) {
    case OpCategory::Composite: {
      auto d = internal::decomposition(op);
      if (d == nullptr) fail("internal: %s has no decomposition", info.name);
      const bool grad = autograd::is_grad_enabled() && any_requires_grad(in);
      const uint64_t first_seq = grad ? autograd::peek_sequence_nr() : 0;
      result = d(in, attrs);
      if (grad) internal::add_composite_checks(op, attrs, in, result, first_seq);
      break;
    }
    case OpCategory::View:
      if (op == OpId::kSplit || op == OpId::kChunk)
        fail("%s returns several tensors; call it through Tensor::%s", info.name, info.name);
      result = make_view(op, in[0], attrs);
      break;
    case OpCategory::Inplace:
      result = do_inplace(op, in);
      break;
    default:
      result = record(op, in, attrs, out, device);
      break;
  }
  lazy::maybe_auto_flush();
  return result;
}

Tensor call_op_borrowed(OpId op, const Tensor& a, const Tensor& b) {
  // Handles that own no reference: `a` and `b` outlive the call, and whatever call_op keeps
  // of an operand it copies (an ordinary owning handle). Forgotten before they are destroyed,
  // also when call_op throws.
  Tensor in[2] = {Tensor(Ref<TensorImpl>::borrow(a.impl().get())),
                  Tensor(Ref<TensorImpl>::borrow(b.impl().get()))};
  struct Forget {
    Tensor* t;
    ~Forget() {
      const_cast<Ref<TensorImpl>&>(t[0].impl()).forget();
      const_cast<Ref<TensorImpl>&>(t[1].impl()).forget();
    }
  } forget{in};
  return call_op(op, {in, 2});
}

Tensor call_op_number(OpId op, const Tensor& t, const Scalar& v, bool number_first) {
  const TensorImpl* ti = t.impl().get();
  const OpCategory category = op_info(op).category;
  // The number needs a tensor of its own (wrap_scalar) only where something may keep it
  // beyond the node: a view or an in-place write, a decomposition, or a save plan that reads
  // the operands themselves (matmul, mean, ...: never an operator with a number). Otherwise (a
  // base tensor: its value is its group's node) the number enters as exactly what call_op
  // makes of wrap_scalar(v): a wrapped number of v's kind for inference, a float64 Scalar leaf
  // in the IR. That saves a TensorImpl, an AliasGroup and their release per op (recording
  // `s * 2.0` took ~1700 instructions, ~450 of them for these). With autograd the backward node
  // is attach_grad_fn_number's: the one call_op would make, the number's leaf saved where the
  // formula reads it (x * 2.0's MulBackward0 needs only the number).
  const bool grad = ti != nullptr && ti->autograd != nullptr && autograd::is_grad_enabled();
  if (ti == nullptr || ti->has_chain() || ti->is_view() ||
      (grad && internal::save_plan_reads_operands(op)) ||
      category == OpCategory::Composite || category == OpCategory::View ||
      category == OpCategory::Inplace) {
    const Tensor w = wrap_scalar(v);
    return number_first ? call_op_borrowed(op, w, t) : call_op_borrowed(op, t, w);
  }
  const int tensor_pos = number_first ? 1 : 0;
  TensorMeta metas[2];
  metas[tensor_pos] = {&ti->shape, ti->dtype, ti->wrapped_number};
  metas[1 - tensor_pos] = {&kNumberShape, v.type(), true};
  Attrs attrs;
  OutputMeta& out = infer_out;
  throw_if_error(infer(op, metas, attrs, &out));
  ++lazy::counters().ops_traced;
  NodePtr number = lazy::Node::scalar_leaf(v.to<double>(), DType::kFloat64);
  lazy::Node* values[2];
  values[tensor_pos] = ti->group->value.get();
  values[1 - tensor_pos] = number.get();
  Tensor result(TensorImpl::make(lazy::Node::make(op, out.shape, out.dtype, attrs, values),
                                 ti->group->device));
  if (grad) attach_grad_fn_number(op, t, v, number, tensor_pos, result);
  lazy::maybe_auto_flush();
  return result;
}

std::vector<Tensor> call_op_list(OpId op, const Tensor& x, Attrs attrs) {
  if (!x.defined()) fail("%s: operand 0 is an undefined tensor", op_name(op));
  TensorMeta m{&x.impl()->shape, x.dtype(), false};
  OutputMeta out;
  throw_if_error(infer(op, {&m, 1}, attrs, &out));
  const auto v = SplitAttrs::of(attrs);
  const int64_t dim = v.dim, size = x.shape()[dim];
  int64_t piece = op == OpId::kSplit ? v.size_or_n : (size + v.size_or_n - 1) / v.size_or_n;
  std::vector<Tensor> parts;
  if (op == OpId::kChunk && size == 0) {
    // As ATen: chunks of an empty dim are `chunks` empty tensors.
    for (int64_t i = 0; i < v.size_or_n; ++i) parts.push_back(x.narrow(dim, 0, 0));
    mark_multi_output(parts);
    return parts;
  }
  if (piece == 0) piece = 1;
  for (int64_t start = 0; start < size || (size == 0 && parts.empty()); start += piece) {
    int64_t len = std::min(piece, size - start);
    parts.push_back(x.narrow(dim, start, std::max<int64_t>(len, 0)));
    if (size == 0) break;
  }
  mark_multi_output(parts);
  return parts;
}

}  // namespace sloth
