#include "lazy/plan_instance.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "lazy/size_key.h"

namespace sloth::lazy {

std::optional<std::vector<int64_t>> specialize(absl::Span<const uint32_t> tmpl_ids,
                                               size_t tmpl_symbols, const Graph& g) {
  if (tmpl_ids.size() != g.size_ids.size()) return std::nullopt;
  std::vector<int64_t> to(tmpl_symbols, -1);
  for (size_t p = 0; p < tmpl_ids.size(); ++p) {
    const uint32_t a = tmpl_ids[p];
    if (a >= tmpl_symbols) return std::nullopt;
    const int64_t v = g.sizes[g.size_ids[p]];
    if (to[a] < 0) to[a] = v;
    else if (to[a] != v) return std::nullopt;  // equal in the plan, different here
  }
  for (int64_t v : to)
    if (v < 0) return std::nullopt;
  return to;
}

std::optional<Plan> instantiate_plan(const Plan& tmpl, absl::Span<const int64_t> from,
                                     absl::Span<const int64_t> to_values, const Graph& g,
                                     bool with_kernels) {
  if (from.size() != to_values.size() || tmpl.num_inputs != static_cast<int32_t>(g.inputs.size()))
    return std::nullopt;
  // A plan has a handful of symbols (batch, length, widths): a linear scan with the last hit
  // remembered beats hashing; a hash map past kLinear of them.
  constexpr size_t kLinear = 16;
  absl::flat_hash_map<int64_t, int64_t> to;
  if (from.size() > kLinear) {
    to.reserve(from.size());
    for (size_t i = 0; i < from.size(); ++i) to.emplace(from[i], to_values[i]);
  }
  bool ok = true;
  size_t last = 0;
  auto map = [&](int64_t& v) {
    if (v <= 1) return;  // 0, 1 and negatives are hashed literally
    if (from.size() > kLinear) {
      auto it = to.find(v);
      if (it == to.end()) ok = false;
      else v = it->second;
      return;
    }
    if (last < from.size() && from[last] == v) {
      v = to_values[last];
      return;
    }
    for (size_t i = 0; i < from.size(); ++i)
      if (from[i] == v) {
        last = i;
        v = to_values[i];
        return;
      }
    ok = false;
  };
  Plan p;
  p.slots = tmpl.slots;
  p.instrs = tmpl.instrs;
  p.outputs = tmpl.outputs;
  if (with_kernels) {
    p.kernels = tmpl.kernels;
    p.free_after = tmpl.free_after;
    p.read_counts = tmpl.read_counts;  // the operands are the template's
  }
  p.num_inputs = tmpl.num_inputs;
  p.num_scalars = tmpl.num_scalars;
  p.key = tmpl.key;
  p.input_strides.assign(g.inputs.size(), {});
  for (Slot& s : p.slots) {
    if (s.kind == SlotKind::kInput) {
      const Layout& l = g.inputs[s.index]->data->layout;
      s.shape = l.shape;
      p.input_strides[s.index] = l.strides;
      continue;
    }
    for (int64_t& d : s.shape) map(d);
  }
  for (Instr& in : p.instrs) {
    for (int64_t& d : in.shape) map(d);
    if (size_attrs_of(in.op) != SizeAttrs::kNone) for_each_size_attr(in.op, in.attrs.mut(), map);
  }
  if (!ok) return std::nullopt;
  return p;
}

namespace {

// The one-to-one correspondence between the sizes of two plans, built as they are walked.
class Correspondence {
 public:
  // Empty while `now` (fresh plan) and `was` (cached plan) can be one symbol; else why not.
  std::string check(int64_t now, int64_t was, const std::string& where) {
    if (now <= 1 || was <= 1) {
      if (now == was) return "";
      return absl::StrFormat(
          "%s is %d here but %d in the cached plan: sizes 0 and 1 are never symbolic (a size-1 "
          "dim broadcasts, which changes fusion), so a plan is made for each",
          where, now, was);
    }
    // Sizes equal in the cached plan must be equal here; sizes distinct there may coincide
    // here (the cached plan is then still valid, only less fused).
    auto [f, fresh_f] = fwd_.try_emplace(was, now);
    if (f->second != now)
      return absl::StrFormat(
          "%s is %d here (%d in the cached plan), but another size that was also %d there is "
          "%d here: the cached plan was made where these sizes coincided (a batch equal to a "
          "hidden size, say) and assumes them equal, so this graph needs a plan of its own",
          where, now, was, was, f->second);
    return "";
  }

 private:
  absl::flat_hash_map<int64_t, int64_t> fwd_;
};

}  // namespace

std::string size_mismatch_reason(const Plan& fresh, const Plan& cached) {
  Correspondence c;
  std::string r;
  const size_t ns = std::min(fresh.slots.size(), cached.slots.size());
  for (size_t i = 0; i < ns; ++i) {
    const Slot &a = fresh.slots[i], &b = cached.slots[i];
    if (a.kind != SlotKind::kInput || b.kind != SlotKind::kInput) continue;
    const Strides &a_strides = fresh.strides_of_input(a.index),
                  &b_strides = cached.strides_of_input(b.index);
    if (a.shape.size() != b.shape.size())
      return absl::StrFormat("input %d has rank %d here, %d in the cached plan", a.index,
                             a.shape.size(), b.shape.size());
    for (size_t d = 0; d < a.shape.size(); ++d) {
      r = c.check(a.shape[d], b.shape[d],
                  absl::StrFormat("dim %d of input %d (shape %s; cached %s)", d, a.index,
                                  shape_str(a.shape), shape_str(b.shape)));
      if (!r.empty()) return r;
    }
    int64_t ca = 1, cb = 1;
    for (size_t d = a.shape.size(); d-- > 0;) {
      if (a.shape[d] != 1 && d < a_strides.size() && d < b_strides.size()) {
        const bool ka = a_strides[d] == ca, kb = b_strides[d] == cb;
        if (ka != kb)
          return absl::StrFormat(
              "input %d has strides %s here, %s in the cached plan: it is %scontiguous in dim "
              "%d here and %scontiguous there (a layout, not a size)",
              a.index, shape_str(a_strides), shape_str(b_strides), ka ? "" : "not ", d,
              kb ? "" : "not ");
        if (!ka) {
          r = c.check(a_strides[d], b_strides[d],
                      absl::StrFormat("stride %d of input %d", d, a.index));
          if (!r.empty()) return r;
        }
      }
      ca *= std::max<int64_t>(a.shape[d], 1);
      cb *= std::max<int64_t>(b.shape[d], 1);
    }
  }
  const size_t ni = std::min(fresh.instrs.size(), cached.instrs.size());
  for (size_t i = 0; i < ni; ++i) {
    const Instr &a = fresh.instrs[i], &b = cached.instrs[i];
    const std::string what = absl::StrFormat("instruction %d (%s)", i, op_name(a.op));
    if (a.op != b.op || a.shape.size() != b.shape.size()) return "";  // not a size difference
    for (size_t d = 0; d < a.shape.size(); ++d) {
      r = c.check(a.shape[d], b.shape[d],
                  absl::StrFormat("dim %d of %s, shape %s (cached %s)", d, what, shape_str(a.shape),
                                  shape_str(b.shape)));
      if (!r.empty()) return r;
    }
    Attrs x = a.attrs.get(), y = b.attrs.get();
    std::vector<int64_t> xs, ys;
    for_each_size_attr(a.op, x, [&](int64_t& v) { xs.push_back(v); v = 0; });
    for_each_size_attr(b.op, y, [&](int64_t& v) { ys.push_back(v); v = 0; });
    if (!(x == y))
      return absl::StrFormat(
          "the attributes of %s differ (%s vs %s in the cached plan); attributes other than "
          "shapes and slice bounds are not symbolic, so a size that reaches one makes a plan "
          "per value",
          what, a.attrs->debug_string(), b.attrs->debug_string());
    for (size_t k = 0; k < xs.size() && k < ys.size(); ++k) {
      r = c.check(xs[k], ys[k], absl::StrFormat("size attribute %d of %s", k, what));
      if (!r.empty()) return r;
    }
  }
  return "";
}

}  // namespace sloth::lazy
