#include "autograd/function.h"

#include <array>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/error.h"

namespace sloth::autograd {
namespace {

// Sequence numbers come in per-thread blocks (one locked add per 4096 nodes instead of one per
// node, which also waits for the node's own stores): numbers grow on each thread, which is all
// their users need (the engine's order among ready nodes; a composite op's "made by this call"
// test against peek_sequence_nr() on the same thread).
std::atomic<uint64_t> next_sequence_nr{1};
constexpr uint64_t kSequenceBlock = 4096;
struct SequenceBlock {
  uint64_t next = 0, end = 0;
};
thread_local SequenceBlock sequence_block;
uint64_t take_sequence_nr() {
  SequenceBlock& b = sequence_block;
  if (b.next == b.end) {
    b.next = next_sequence_nr.fetch_add(kSequenceBlock, std::memory_order_relaxed);
    b.end = b.next + kSequenceBlock;
  }
  return b.next++;
}
std::array<Formula, kNumOps>& formulas() {
  static std::array<Formula, kNumOps> f{};
  return f;
}
GradMath& math_slot() {
  static GradMath m{};
  return m;
}
thread_local bool grad_enabled = true;

}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

GradFn::GradFn() : sequence_nr(take_sequence_nr()) {}

void GradFn::release() {
  // A work list instead of recursion (as lazy::Node::release): dropping a node's edges may
  // free the nodes they point at, which then queue here instead of nesting on the stack.
  thread_local std::vector<GradFn*>* pending = nullptr;
  thread_local bool draining = false;
  if (pending == nullptr) pending = new std::vector<GradFn*>();
  pending->push_back(this);
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    GradFn* f = pending->back();
    pending->pop_back();
    f->next.clear();
    f->extras.reset();
    delete f;
  }
  draining = false;
}

AutogradMeta* meta(const TensorImpl& t) { return static_cast<AutogradMeta*>(t.autograd.get()); }
AutogradMeta& ensure_meta(TensorImpl& t) {
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *static_cast<AutogradMeta*>(t.autograd.get());
}

Edge gradient_edge(const TensorImplPtr& t) {
  auto* m = meta(*t);
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  // A view made under no_grad of a tensor that requires grad reports requires_grad (and is a
  // leaf) but, as in PyTorch, has no grad accumulator: gradients through it go nowhere.
  // (Unless requires_grad_() was called on the view itself: then it is a leaf of its own.)
  if (m->frozen_view && t->is_view() && !m->requires_grad) return {};
  if (m->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

uint64_t peek_sequence_nr() {
  // This thread's next number; once its block is used up, every later block starts above it.
  const SequenceBlock& b = sequence_block;
  return b.next != b.end ? b.next : next_sequence_nr.load(std::memory_order_relaxed);
}

void SavedVariable::save(const TensorImplPtr& t, bool check) {
  value = t->value();
  const bool wrapped = t->wrapped_number;
  // A wrapped number is never checked nor written: its group is not kept (it goes back to
  // the pool with the temporary handle instead of living as long as this node).
  int64_t version = 0;
  if (wrapped) {
    group.reset();
  } else {
    group = t->group;
    version = group->version;
  }
  // A C++ number (x / 2.0) is a Scalar argument in PyTorch: nothing is saved or checked, so a
  // second backward through such a node is fine.
  const bool checked = check && !wrapped;
  bits_ = static_cast<uint64_t>(version) << 2 | static_cast<uint64_t>(wrapped) << 1 |
          static_cast<uint64_t>(checked);
  auto* m = meta(*t);
  leaf.reset();
  if (!wrapped && !t->is_view() && (m == nullptr || !m->grad_fn)) {
    AutogradMeta& lm = ensure_meta(*t);
    AutogradMetaExtras& x = lm.extras_mut();
    if (!x.cell) {
      x.cell = Ref<LeafCell>(new LeafCell());
      x.cell->tensor = t.get();
    }
    leaf = x.cell;
  }
}

TensorImplPtr SavedVariable::unpack(const Edge& edge) const {
  if (!value) return nullptr;
  // A wrapped number keeps its promotion role (its node is float64 whatever its C++ type).
  TensorImplPtr t = wrapped() ? TensorImpl::wrapped_scalar(value->scalar) : TensorImpl::make(value, group->device);
  Edge e = edge;
  if (!e.fn && leaf && leaf->tensor != nullptr && leaf->tensor->group.get() == group.get() &&
      group->version == version())
    e = gradient_edge(TensorImplPtr(leaf->tensor));
  if (e.fn && is_grad_enabled()) {
    AutogradMeta& m = ensure_meta(*t);
    m.grad_fn = e.fn;
    m.output_nr = e.input_nr;
    m.requires_grad = true;
  }
  return t;
}

namespace {
// C++ scalar type names, as PyTorch's message spells them ("[float [3, 3]]").
const char* scalar_type_name(DType d) {
  switch (d) {
    case DType::kBool: return "bool";
    case DType::kInt32: return "int";
    case DType::kInt64: return "long";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kUInt8: return "unsigned char";
  }
  return dtype_name(d);
}
}  // namespace

void SavedVariable::check(const GradFn* producer, int output_nr) const {
  if (!value || !checked() || group->version == version()) return;
  std::string from;
  if (producer != nullptr && !producer->is_accumulator())
    from = absl::StrCat(", which is output ", output_nr, " of ", producer->name(), ",");
  fail("one of the variables needed for gradient computation has been modified by an inplace "
       "operation: [%s %s]%s is at version %d; expected version %d instead. Hint: the write "
       "went through this tensor or an alias of it (a view, detach()); clone() it before "
       "modifying it in place, or do the in-place update after backward()",
       scalar_type_name(value->dtype), shape_str(value->shape), from, group->version, version());
}

void GradFn::check_versions() const {
  if (!extras) return;
  for (const auto& c : extras->extra_checks)
    c.saved.check(c.own_output ? this : c.producer.fn.get(), c.own_output ? 0 : c.producer.input_nr);
}

void register_formula(OpId op, Formula f) { formulas()[static_cast<int>(op)] = f; }
Formula formula(OpId op) { return formulas()[static_cast<int>(op)]; }

std::string backward_name(OpId op) {
  switch (op) {
    case OpId::kCast: return "ToCopyBackward0";
    case OpId::kReshape: return "ViewBackward0";
    case OpId::kMatmul: return "MmBackward0";
    case OpId::kCopy_: return "CopyBackwards";
    case OpId::kFill_: return "FillBackward2";
    default: break;
  }
  std::string n;
  bool up = true;
  for (char c : op_name(op)) {
    if (c == '_') { up = true; continue; }
    n.push_back(up && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c);
    up = false;
  }
  return n + "Backward0";
}

void set_grad_math(GradMath m) { math_slot() = m; }
const GradMath& grad_math() { return math_slot(); }

// PyTorch frees the tensors a node saved; a second backward through the node fails only when
// it had saved some (a node that saved none, PermuteBackward0 or `x * 2.0`'s MulBackward0, can
// be run again). Values sloth's formula reads that PyTorch does not save (wrapped numbers) are
// kept, so such a node still runs.
void OpBackward::input_infos(absl::InlinedVector<OutputInfo, 2>& out) const {
  out.clear();
  out.reserve(next.size());
  size_t stored = 0;
  for (size_t i = 0; i < next.size(); ++i) {
    const uint8_t t = info_tag(i);
    if (t == kInfoFromEdge) {
      const Edge& e = next[i];
      out.push_back(e.fn->outputs[e.input_nr]);
    } else if (t == kInfoAsOutput) {
      out.push_back(outputs[0]);
    } else if (t == kInfoStored) {
      out.push_back(cold_->infos[stored++]);
    } else {
      OutputInfo& o = out.emplace_back();  // 0-dim
      o.dtype = static_cast<DType>(t - kInfoScalar);
      o.device = Device::cpu();
    }
  }
}

void OpBackward::release_saved() {
  SavedVariable* result = saved_result();
  const bool result_checked = result != nullptr && result->checked();
  bool had = (extras && !extras->extra_checks.empty()) || result_checked;
  for (auto& s : saved_)
    if (s.checked()) {
      had = true;
      s = {};
    }
  if (result_checked) *result = {};
  if (extras) extras->extra_checks.clear();
  released_ = released_ || had;
}

void OpBackward::check_versions() const {
  for (size_t i = 0; i < saved_.size(); ++i)
    if (i < next.size()) saved_[i].check(next[i].fn.get(), next[i].input_nr);
  if (const SavedVariable* r = saved_result()) r->check(this, 0);
  GradFn::check_versions();
}

std::vector<TensorImplPtr> OpBackward::apply(std::vector<TensorImplPtr> grads) {
  std::vector<TensorImplPtr> out(next.size());
  if (grads.empty() || !grads[0]) return out;
  if (released_)
    fail("Trying to backward through the graph a second time (or to use saved values after "
         "they were freed) at %s. Saved values are freed by backward() and autograd::grad(); "
         "pass retain_graph=true to the first call if you need to go through the graph again",
         name());
  check_versions();
  // One slot per input (null where nothing is saved; saved_ is empty when nothing is).
  std::vector<TensorImplPtr> inputs(next.size());
  for (size_t i = 0; i < saved_.size() && i < next.size(); ++i) inputs[i] = saved_[i].unpack(next[i]);
  // The result is re-attached to this node (PyTorch stores it without its grad_fn).
  const SavedVariable* saved_r = saved_result();
  TensorImplPtr result = saved_r ? saved_r->unpack({GradFnPtr(this), 0}) : nullptr;
  std::vector<bool> needs(next.size());
  for (size_t i = 0; i < next.size(); ++i) needs[i] = next[i].fn != nullptr;
  Formula f = formula(op_);
  // name() builds a string: only an error asks for it.
  if (f == nullptr) fail("%s: the op %s has no derivative formula", name(), op_name(op_));
  static const Attrs kNoAttrs;
  absl::InlinedVector<OutputInfo, 2> info;
  input_infos(info);
  FormulaArgs args{op_, attrs_ ? *attrs_ : kNoAttrs, inputs, info, grads[0], outputs[0], needs, result};
  out = f(args);
  out.resize(next.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!needs[i]) { out[i].reset(); continue; }
    if (out[i] && out[i]->dtype != info[i].dtype)
      out[i] = grad_math().cast(out[i], info[i].dtype);
    if (out[i] && out[i]->shape != info[i].shape)
      fail("internal: %s produced a gradient of shape %s for input %d of shape %s", name(),
           shape_str(out[i]->shape), static_cast<int64_t>(i), shape_str(info[i].shape));
  }
  return out;
}

}  // namespace sloth::autograd

namespace sloth::autograd {
// Four cache lines: with 1e5 live results each line the node recorded per op writes is a miss
// (see OpBackward). A field added here should go to the cold block or replace one.
static_assert(sizeof(OpBackward) <= 256, "OpBackward outgrew four cache lines");
}  // namespace sloth::autograd
