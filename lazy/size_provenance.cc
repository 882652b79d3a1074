#include "lazy/size_provenance.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "core/op_attrs.h"
#include "core/op_table.h"
#include "lazy/size_key.h"

namespace sloth::lazy {
namespace {

// Attempts that pin at the first node a shape rule rejects, before attempts pin at all of them.
constexpr int kAttemptsOneByOne = 2;

// An element is one size position: a dim of an input or node, an input's stride, a size
// attribute. Its value is the real size; values <= 1 are literal (never joined, never moved).
class Provenance {
 public:
  // `p`: the plan lower() is building for `g`, slots and instructions still numbered as the
  // graph (read instead of the graph's nodes: contiguous, and just written).
  Provenance(const Graph& g, const Plan& p)
      : g_(g), p_(p), vb_(p.num_inputs + p.num_scalars) {}

  std::optional<StandInSizes> run(std::string* why);

 private:
  struct Operand {
    int32_t off = 0;  // first element of its dims
    int32_t rank = 0;
  };

  // Operand j of instruction k as a Graph::operands entry (kind << 30 | index).
  uint32_t opref(size_t k, size_t j) const {
    const int32_t slot = p_.instrs[k].in[j];
    if (slot < p_.num_inputs) return uint32_t{1} << 30 | static_cast<uint32_t>(slot);
    if (slot < vb_) return uint32_t{2} << 30 | static_cast<uint32_t>(slot - p_.num_inputs);
    return uint32_t{3} << 30 | static_cast<uint32_t>(slot - vb_);
  }
  int32_t add(int64_t v) {
    val_.push_back(v);
    parent_.push_back(static_cast<int32_t>(parent_.size()));
    return static_cast<int32_t>(val_.size() - 1);
  }
  int32_t find(int32_t a) {
    while (parent_[a] != a) a = parent_[a] = parent_[parent_[a]];
    return a;
  }
  void join(int32_t a, int32_t b) {
    if (val_[a] <= 1 || val_[b] <= 1) return;
    if (val_[a] != val_[b]) {
      if (fail_.empty())
        fail_ = absl::StrFormat("a size rule joined %d with %d (a rule that is wrong)", val_[a], val_[b]);
      return;
    }
    a = find(a), b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }
  // Right-aligned, where the values are equal (broadcast dims of size 1 skip).
  void join_aligned(int32_t out, int32_t out_rank, Operand x) {
    for (int32_t t = 1; t <= std::min(out_rank, x.rank); ++t) {
      const int32_t o = out + out_rank - t, e = x.off + x.rank - t;
      if (val_[e] >= 2 && val_[e] == val_[o]) join(o, e);
    }
  }
  void define(int32_t e, std::vector<int32_t> factors) {
    if (val_[e] >= 2) defs_.push_back({e, std::move(factors)});
  }
  void node_rule(size_t k, absl::Span<const Operand> ops);
  void reshape_rule(int32_t in, int32_t in_rank, int32_t out, int32_t out_rank);
  int64_t stand_in_of(int32_t cls, int depth);

  const Graph& g_;
  const Plan& p_;
  const int32_t vb_;  // the first value slot
  std::string fail_;
  std::vector<int64_t> val_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> in_dims_, in_strides_, node_dims_, node_attrs_;  // first element of each
  std::vector<int32_t> node_nattrs_, node_rank_;
  // Per node: its rule joined every dim of its result to the operand dim the result takes
  // it from (elementwise broadcasting, a permutation), so its shape rule gives its dims again
  // at any stand-ins and is not checked. Rules of other relations (a slice's bounds, a
  // concatenation's sum) are checked.
  std::vector<uint8_t> exact_;
  struct Def {
    int32_t e;
    std::vector<int32_t> factors;
  };
  std::vector<Def> defs_;
  // Per class (indexed by root element): the stand-in and its state.
  std::vector<int64_t> stand_;
  std::vector<uint8_t> state_;  // 0 unset, 1 being computed, 2 set
  std::vector<int32_t> def_of_;  // first def index of a root, -1 none
  std::vector<uint8_t> moved_;   // the class's stand-in differs from its value
};

void Provenance::reshape_rule(int32_t in, int32_t in_rank, int32_t out, int32_t out_rank) {
  // Dim groups of equal products, 1s skipped: one dim each side joins; one against many is
  // a product (the one side is derived from the many).
  std::vector<int32_t> a, b;
  for (int32_t d = 0; d < in_rank; ++d)
    if (val_[in + d] != 1) a.push_back(in + d);
  for (int32_t d = 0; d < out_rank; ++d)
    if (val_[out + d] != 1) b.push_back(out + d);
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    std::vector<int32_t> ga{a[i]}, gb{b[j]};
    int64_t pa = val_[a[i++]], pb = val_[b[j++]];
    while (pa != pb) {
      if (pa < pb && i < a.size()) {
        ga.push_back(a[i]);
        pa *= val_[a[i++]];
      } else if (pb < pa && j < b.size()) {
        gb.push_back(b[j]);
        pb *= val_[b[j++]];
      } else {
        fail_ = "a reshape whose dim groups do not match";
        return;
      }
    }
    if (ga.size() == 1 && gb.size() == 1) join(ga[0], gb[0]);
    else if (ga.size() == 1) define(ga[0], gb);
    else if (gb.size() == 1) define(gb[0], ga);
    else fail_ = "a reshape that regroups dims on both sides (its sizes stay as they are)";
  }
  if (i != a.size() || j != b.size()) fail_ = "a reshape whose dim groups do not match";
}

void Provenance::node_rule(size_t k, absl::Span<const Operand> ops) {
  const Instr* n = &p_.instrs[k];
  const int32_t out = node_dims_[k], r = static_cast<int32_t>(n->shape.size());
  const int32_t attrs = node_attrs_[k];
  const int32_t nattrs = node_nattrs_[k];
  const OpCategory cat = op_category(n->op);
  switch (n->op) {
    case OpId::kMatmul: {
      const Operand a = ops[0], b = ops[1];
      if (a.rank >= 2 && b.rank >= 2) {
        join(a.off + a.rank - 2, out + r - 2);
        join(b.off + b.rank - 1, out + r - 1);
        join(a.off + a.rank - 1, b.off + b.rank - 2);
        join_aligned(out, r - 2, {a.off, a.rank - 2});
        join_aligned(out, r - 2, {b.off, b.rank - 2});
      } else if (a.rank == 1 && b.rank >= 2) {
        join(a.off, b.off + b.rank - 2);
        join(b.off + b.rank - 1, out + r - 1);
        join_aligned(out, r - 1, {b.off, b.rank - 2});
      } else if (a.rank >= 2 && b.rank == 1) {
        join(a.off + a.rank - 1, b.off);
        join(a.off + a.rank - 2, out + r - 1);
        join_aligned(out, r - 1, {a.off, a.rank - 2});
      } else if (a.rank == 1 && b.rank == 1) {
        join(a.off, b.off);
      }
      return;
    }
    case OpId::kReshape:
      if (nattrs != r) break;
      for (int32_t d = 0; d < r; ++d) join(attrs + d, out + d);
      reshape_rule(ops[0].off, ops[0].rank, out, r);
      return;
    case OpId::kPermute: {
      const Attrs& at = n->attrs;
      if (static_cast<int32_t>(at.dims.size()) != r || ops[0].rank != r) break;
      bool perm = true;
      for (int64_t p : at.dims) perm &= p >= 0 && p < r;
      if (!perm) break;
      for (int32_t d = 0; d < r; ++d) join(out + d, ops[0].off + static_cast<int32_t>(at.dims[d]));
      exact_[k] = 1;
      return;
    }
    case OpId::kExpand:
      if (nattrs != r) break;
      for (int32_t d = 0; d < r; ++d) join(attrs + d, out + d);
      join_aligned(out, r, ops[0]);
      return;
    case OpId::kSlice: {
      const SliceAttrs s = SliceAttrs::of(n->attrs);
      if (ops[0].rank != r || s.dim < 0 || s.dim >= r || nattrs != 2) break;
      for (int32_t d = 0; d < r; ++d)
        if (d != s.dim) join(out + d, ops[0].off + d);
      // start, end are attrs (start at attrs, end at attrs + 1); out = end - start: a join
      // only from 0 in steps of 1. Other bounds keep their relation only at real values (the
      // shape rule checks any stand-in).
      if (s.start == 0 && s.step == 1) join(out + s.dim, attrs + 1);
      return;
    }
    case OpId::kSliceScatter: {
      const SliceAttrs s = SliceAttrs::of(n->attrs);
      join_aligned(out, r, ops[0]);
      if (ops[1].rank != r || s.dim < 0 || s.dim >= r || nattrs != 2) return;
      for (int32_t d = 0; d < r; ++d)
        if (d != s.dim) join(out + d, ops[1].off + d);
      if (s.start == 0 && s.step == 1) join(ops[1].off + s.dim, attrs + 1);
      return;
    }
    case OpId::kSelect: {
      const int64_t dim = SelectAttrs::of(n->attrs).dim;
      if (ops[0].rank != r + 1 || dim < 0 || dim > r) break;
      for (int32_t d = 0, e = 0; d < ops[0].rank; ++d)
        if (d != dim) join(out + e++, ops[0].off + d);
      return;
    }
    default:
      break;
  }
  if (cat == OpCategory::Factory) {
    for (int32_t d = 0; d < r && d < nattrs; ++d) join(attrs + d, out + d);
    return;
  }
  if (cat == OpCategory::Reduce) {
    const ReduceAttrs ra = ReduceAttrs::of(n->attrs);
    const Operand x = ops[0];
    if (ra.keepdim || x.rank == r) {
      join_aligned(out, r, x);
      return;
    }
    std::vector<bool> reduced(static_cast<size_t>(x.rank), ra.dims.empty());
    for (int64_t d : ra.dims)
      if (d >= 0 && d < x.rank) reduced[d] = true;
    int32_t e = 0;
    for (int32_t d = 0; d < x.rank; ++d)
      if (!reduced[d] && e < r) join(out + e++, x.off + d);
    return;
  }
  // Elementwise (broadcasting) and every op without a rule of its own: each operand's dims
  // join the result's right-aligned where the values are equal. For an op whose semantics
  // differ this joins too much (a less general plan) or too little (its shape rule rejects
  // the stand-ins below, and the graph is planned as before).
  for (const Operand& x : ops) join_aligned(out, r, x);
}

int64_t Provenance::stand_in_of(int32_t c, int depth) {
  if (state_[c] == 2) return stand_[c];
  if (state_[c] == 1 || depth > 64) {
    fail_ = "sizes defined by products of each other";
    return -1;
  }
  state_[c] = 1;
  int64_t v = stand_[c];
  bool moved = moved_[c] != 0;
  for (int32_t di = def_of_[c]; di >= 0 && di < static_cast<int32_t>(defs_.size()); ++di) {
    if (parent_[defs_[di].e] != c) break;  // sorted by class (classes are final here)
    int64_t p = 1, real = 1;
    bool any = false;
    for (int32_t f : defs_[di].factors) {
      const int32_t fc = parent_[f];
      const int64_t s = stand_in_of(fc, depth + 1);
      if (s < 0) return -1;
      any |= moved_[fc] != 0;
      real *= val_[f];
      if (__builtin_mul_overflow(p, s, &p)) {
        fail_ = "a product of stand-in sizes overflows";
        return -1;
      }
    }
    if (real != val_[c]) {
      fail_ = "a product class whose factors do not multiply to it";
      return -1;
    }
    if (any) {
      if (moved && v != p) {
        fail_ = "a size that is two different products of stand-ins";
        return -1;
      }
      v = p;
      moved = true;
    }
  }
  stand_[c] = v;
  moved_[c] = moved;
  state_[c] = 2;
  return v;
}

std::optional<StandInSizes> Provenance::run(std::string* why) {
  auto give_up = [&](const std::string& r) -> std::optional<StandInSizes> {
    if (why) *why = "sizes were not followed through the ops (" + r + "): planned for these sizes, so sizes that coincide here stay equal in the plan";
    return std::nullopt;
  };
  // Elements, in the graph's own numbering.
  val_.reserve(p_.slots.size());
  parent_.reserve(p_.slots.size());
  in_dims_.resize(static_cast<size_t>(p_.num_inputs));
  in_strides_.resize(static_cast<size_t>(p_.num_inputs));
  for (size_t i = 0; i < static_cast<size_t>(p_.num_inputs); ++i) {
    const Slot& l = p_.slots[i];
    const Strides& l_strides = p_.strides_of_input(l.index);
    in_dims_[i] = static_cast<int32_t>(val_.size());
    for (int64_t d : l.shape) {
      if (d == 0) return std::nullopt;  // nothing to gain from an empty tensor
      add(d);
    }
    in_strides_[i] = static_cast<int32_t>(val_.size());
    for (size_t d = 0; d < l.shape.size(); ++d) add(-1);
    int64_t contiguous = 1;
    for (size_t d = l.shape.size(); d-- > 0;) {
      if (l.shape[d] != 1 && d < l_strides.size() && l_strides[d] != contiguous) {
        const int32_t e = in_strides_[i] + static_cast<int32_t>(d);
        // A stride of its own: which product of the base's dims it is is not known here,
        // and nothing that plans reads an input's strides (the plan at the stand-ins takes
        // the real layouts when it is mapped back), so its stand-in only has to keep it apart.
        val_[e] = l_strides[d];
      }
      contiguous *= std::max<int64_t>(l.shape[d], 1);
    }
  }
  // One walk over the instructions: each one's elements, then its op's joins (its operands
  // come before it). An elementwise result with an operand of its very shape shares that
  // operand's elements instead of joining new ones (most of a graph: no work per dim).
  node_dims_.resize(p_.instrs.size());
  node_attrs_.resize(p_.instrs.size());
  node_nattrs_.resize(p_.instrs.size());
  node_rank_.resize(p_.instrs.size());
  exact_.assign(p_.instrs.size(), 0);
  std::vector<Operand> ops;
  for (size_t k = 0; k < p_.instrs.size() && fail_.empty(); ++k) {
    const Instr* n = &p_.instrs[k];
    const int32_t r = static_cast<int32_t>(n->shape.size());
    node_rank_[k] = r;
    ops.clear();
    int32_t same = -1;  // an operand of the result's shape (elementwise ops)
    const OpCategory cat = op_category(n->op);  // the constexpr table: no call per node
    const bool ew = cat == OpCategory::Unary || cat == OpCategory::Binary || cat == OpCategory::Ternary;
    // An elementwise result's dims above 1 each join the operand dims of that size (the
    // others are literal 1s): exact, whether it shares an operand's elements or not.
    exact_[k] = ew;
    for (size_t j = 0; j < n->in.size(); ++j) {
      const uint32_t ref = opref(k, j);
      const int32_t slot = Graph::operand_slot(ref);
      switch (Graph::operand_kind(ref)) {
        case 1: ops.push_back({in_dims_[slot], static_cast<int32_t>(p_.slots[slot].shape.size())}); break;
        case 3: ops.push_back({node_dims_[slot], node_rank_[slot]}); break;
        default: ops.push_back({0, 0}); break;  // a scalar: no dims
      }
      if (ew && same < 0 && ops.back().rank == r && r > 0) {
        bool eq = true;
        for (int32_t d = 0; d < r && eq; ++d) eq = val_[ops.back().off + d] == n->shape[d];
        if (eq) same = static_cast<int32_t>(j);
      }
    }
    if (same >= 0) {
      node_dims_[k] = ops[same].off;
    } else {
      node_dims_[k] = static_cast<int32_t>(val_.size());
      for (int64_t d : n->shape) {
        if (d == 0) return std::nullopt;  // nothing to gain from an empty tensor
        add(d);
      }
    }
    node_attrs_[k] = static_cast<int32_t>(val_.size());
    if (size_attrs_of(n->op) != SizeAttrs::kNone) {
      Attrs a = n->attrs.get();
      for_each_size_attr(n->op, a, [&](int64_t& v) { add(v); });
    }
    node_nattrs_[k] = static_cast<int32_t>(val_.size()) - node_attrs_[k];
    if (same >= 0) {
      for (size_t j = 0; j < ops.size(); ++j)
        if (static_cast<int32_t>(j) != same) join_aligned(node_dims_[k], r, ops[j]);
    } else {
      node_rule(k, ops);
    }
  }
  if (!fail_.empty()) return give_up(fail_);
  // A class that is the product of two factor lists ([B, S] -> [B * S] -> [B, S]): lists of
  // the same sizes in the same order are taken as the same factors. Where a reshape really
  // regroups them this joins more than the ops force: a less general plan, never a wrong one.
  for (int round = 0; round < 4; ++round) {
    bool changed = false;
    std::stable_sort(defs_.begin(), defs_.end(),
                     [&](const Def& a, const Def& b) { return find(a.e) < find(b.e); });
    for (size_t i = 1; i < defs_.size(); ++i) {
      const Def &a = defs_[i - 1], &b = defs_[i];
      if (find(a.e) != find(b.e) || a.factors.size() != b.factors.size()) continue;
      bool same_values = true, same_classes = true;
      for (size_t f = 0; f < a.factors.size(); ++f) {
        same_values &= val_[a.factors[f]] == val_[b.factors[f]];
        same_classes &= find(a.factors[f]) == find(b.factors[f]);
      }
      if (!same_values || same_classes) continue;
      for (size_t f = 0; f < a.factors.size(); ++f) join(a.factors[f], b.factors[f]);
      changed = true;
    }
    // Products of the same factors are the same size (forced: equal in every graph).
    absl::flat_hash_map<std::vector<int32_t>, int32_t> by_factors;
    for (const Def& d : defs_) {
      std::vector<int32_t> key;
      for (int32_t f : d.factors) key.push_back(find(f));
      std::sort(key.begin(), key.end());
      auto [it, fresh] = by_factors.try_emplace(std::move(key), d.e);
      if (!fresh && find(it->second) != find(d.e)) {
        join(it->second, d.e);
        changed = true;
      }
    }
    if (!changed) break;
  }
  // Classes, and the values that occur in more than one of them (coincidences).
  const int32_t ne = static_cast<int32_t>(val_.size());
  absl::flat_hash_map<int64_t, int32_t> first_class;  // value -> its first class
  std::vector<int32_t> extra;                          // classes of a value seen before
  for (int32_t e = 0; e < ne; ++e) {
    if (val_[e] <= 1 || find(e) != e) continue;
    auto [it, fresh] = first_class.try_emplace(val_[e], e);
    if (!fresh) extra.push_back(e);
  }
  if (extra.empty()) return std::nullopt;  // the forced classes are the value classes
  // Stand-ins. In each value's group of classes one keeps the value (a pinned one, else the
  // first met); each other free class takes the next value above its own that no class has;
  // product classes follow their factors. Where a shape rule then rejects a node (a slice's
  // bounds, a concatenation's sum: relations other than equality and product), the moved
  // classes at that node are pinned to their values and the assignment is made again.
  // The classes are final from here on (nothing joins below): every element points straight
  // at its root, so the attempts read an element's class with one load (parent_[e]).
  for (int32_t e = 0; e < ne; ++e) parent_[e] = find(e);
  // The classes of sizes above 1 (their root elements, in element order): what the attempts
  // below assign and walk, instead of every element.
  std::vector<int32_t> roots;
  for (int32_t e = 0; e < ne; ++e)
    if (val_[e] > 1 && parent_[e] == e) roots.push_back(e);
  stand_.assign(ne, 0);
  state_.assign(ne, 0);
  moved_.assign(ne, 0);
  def_of_.assign(ne, -1);
  std::sort(defs_.begin(), defs_.end(), [&](const Def& a, const Def& b) { return parent_[a.e] < parent_[b.e]; });
  for (int32_t di = static_cast<int32_t>(defs_.size()); di-- > 0;) def_of_[parent_[defs_[di].e]] = di;
  absl::flat_hash_map<int64_t, std::vector<int32_t>> groups;  // value -> its classes, in order
  for (const int32_t c : roots) groups[val_[c]].push_back(c);
  std::vector<uint8_t> pinned(ne, 0);
  std::vector<int32_t> to_pin;
  auto pin = [&](int32_t c) {  // c and, where it is a product, its factors
    to_pin.assign(1, c);
    while (!to_pin.empty()) {
      const int32_t x = to_pin.back();
      to_pin.pop_back();
      if (pinned[x]) continue;
      pinned[x] = 1;
      for (int32_t di = def_of_[x]; di >= 0 && di < static_cast<int32_t>(defs_.size()) && parent_[defs_[di].e] == x; ++di)
        for (int32_t f : defs_[di].factors)
          if (val_[f] > 1) to_pin.push_back(parent_[f]);
    }
  };
  StandInSizes out;
  std::vector<uint8_t> touched(p_.instrs.size(), 0);
  auto s_of = [&](int32_t e) { return val_[e] <= 1 ? val_[e] : stand_[parent_[e]]; };
  auto moved = [&](int32_t e) { return val_[e] > 1 && moved_[parent_[e]] != 0; };
  std::vector<Shape> shapes;
  std::vector<TensorMeta> metas;
  OutputMeta om;
  std::vector<size_t> bad;  // the nodes whose shape rule rejected an attempt's stand-ins
  // Per attempt: each moved free class's stand-in (fresh_val, by class; fresh_list in order
  // of assignment), and the values taken (every real size, and each stand-in given).
  std::vector<int64_t> fresh_val(ne, 0);
  std::vector<int32_t> fresh_list;
  absl::flat_hash_set<int64_t> taken;
  absl::flat_hash_map<int64_t, int64_t> search_from;
  absl::flat_hash_map<int64_t, int32_t> seen;  // stand-in -> its class
  for (int attempt = 0;; ++attempt) {
    if (attempt == 16) return give_up(fail_);
    taken.clear();
    taken.reserve(groups.size() + roots.size());
    for (const auto& [v, cs] : groups) taken.insert(v);
    for (const int32_t c : fresh_list) fresh_val[c] = 0;
    fresh_list.clear();
    // Where the search above each value goes on: every value below it was taken when last
    // searched, and `taken` only grows, so each value is stepped over once per attempt (a
    // search from val + 1 each time was quadratic in the classes of one value: 400 slices of
    // 8 rows took 0.5 G instructions).
    search_from.clear();
    auto give_fresh = [&](int32_t c, int64_t& from) {
      int64_t v = from;
      while (!taken.insert(v).second) ++v;
      from = v + 1;
      if (fresh_val[c] == 0) fresh_list.push_back(c);
      fresh_val[c] = v;
    };
    auto move_free = [&](int32_t c) {
      give_fresh(c, search_from.try_emplace(val_[c], val_[c] + 1).first->second);
    };
    for (const auto& [v, cs] : groups) {
      if (cs.size() < 2) continue;
      // Pinned classes keep the value (several pinned ones stay equal: that coincidence is
      // kept, as before); else the first class met keeps it.
      bool some_pinned = false;
      for (int32_t c : cs) some_pinned |= pinned[c] != 0;
      int64_t* from = nullptr;  // search_from[v], looked up once per group
      for (int32_t c : cs)
        if (!pinned[c] && (some_pinned || c != cs[0]) && def_of_[c] < 0) {  // a product follows its factors
          if (from == nullptr) from = &search_from.try_emplace(v, v + 1).first->second;
          give_fresh(c, *from);
        }
    }
    // A product whose factors all kept their values keeps its own, and may then equal a free
    // size of that value that stayed: that one moves instead. A few rounds settle it.
    bool settled = false;
    for (int round = 0; round < 8 && !settled; ++round) {
      for (const int32_t c : roots) {
        state_[c] = 0;
        stand_[c] = val_[c];
        moved_[c] = 0;
      }
      for (const int32_t c : fresh_list) {
        stand_[c] = fresh_val[c];
        moved_[c] = 1;
      }
      seen.clear();
      settled = true;
      for (size_t ri = 0; ri < roots.size() && settled; ++ri) {
        const int32_t e = roots[ri];
        if (stand_in_of(e, 0) < 0) return give_up(fail_);
        // Without products every stand-in is a real size kept by one class of it (or by
        // pinned classes that are equal anyway) or a fresh value no class has: none collide.
        if (defs_.empty()) continue;
        auto [it, fresh] = seen.try_emplace(stand_[e], e);
        if (fresh) continue;
        const int32_t other = it->second;
        const int32_t mover = def_of_[e] < 0 && !pinned[e]           ? e
                              : def_of_[other] < 0 && !pinned[other] ? other
                                                                     : -1;
        if (mover < 0 && val_[e] == val_[other]) continue;  // sizes equal here stay equal
        if (mover < 0)
          return give_up(absl::StrFormat("the stand-in %d of a size %d equals that of a size %d",
                                         stand_[e], val_[e], val_[other]));
        move_free(mover);
        settled = false;
      }
    }
    if (!settled) return give_up("stand-in sizes that keep colliding");

    // Which nodes touch a moved class, and whether a stand-in shape overflows (the stand-in
    // sizes are read where they are needed, not copied out per attempt).
    std::fill(touched.begin(), touched.end(), 0);
    for (size_t k = 0; k < p_.instrs.size(); ++k) {
      const int32_t r = node_rank_[k];
      int64_t numel = 1;
      for (int32_t d = 0; d < r; ++d) {
        const int32_t e = node_dims_[k] + d;
        touched[k] |= moved(e);
        if (__builtin_mul_overflow(numel, std::max<int64_t>(s_of(e), 1), &numel) || numel > (int64_t{1} << 60))
          return give_up("a stand-in shape too large");
      }
      const int32_t na = node_nattrs_[k];
      for (int32_t j = 0; j < na; ++j) touched[k] |= moved(node_attrs_[k] + j);
    }
    // Every node that touches a stand-in, checked by its op's shape rule at the stand-ins.
    // The first attempts stop at the first node rejected (pinning there may settle the
    // rest, keeping the plan as general as it can be); later ones collect every rejected
    // node and pin at each, so that a graph of many alike rejections (hundreds of slices)
    // settles in a few attempts instead of giving up after 16 passes over the graph.
    const bool pin_all = attempt >= kAttemptsOneByOne;
    bad.clear();
    for (size_t k = 0; k < p_.instrs.size() && (pin_all || bad.empty()); ++k) {
      const Instr* n = &p_.instrs[k];
      if (exact_[k]) continue;  // its check could only pass
      const size_t nin = n->in.size();
      bool check = touched[k] != 0;
      for (size_t j = 0; j < nin && !check; ++j) {
        const uint32_t ref = opref(k, j);
        const int32_t slot = Graph::operand_slot(ref);
        if (Graph::operand_kind(ref) == 3) check = touched[slot] != 0;
        if (Graph::operand_kind(ref) == 1)
          for (size_t d = 0; d < p_.slots[slot].shape.size(); ++d)
            check |= moved(in_dims_[slot] + static_cast<int32_t>(d));
      }
      if (!check) continue;
      // The operand shapes reuse their buffers from node to node (resize, not new Shapes).
      if (shapes.size() < nin) shapes.resize(nin);
      metas.clear();
      auto stand_in_shape = [&](Shape& sh, int32_t first, size_t rank) {
        sh.resize(rank);
        for (size_t d = 0; d < rank; ++d) sh[d] = s_of(first + static_cast<int32_t>(d));
      };
      for (size_t j = 0; j < nin; ++j) {
        const uint32_t ref = opref(k, j);
        const int32_t slot = Graph::operand_slot(ref);
        if (Graph::operand_kind(ref) == 1) stand_in_shape(shapes[j], in_dims_[slot], p_.slots[slot].shape.size());
        else if (Graph::operand_kind(ref) == 3) stand_in_shape(shapes[j], node_dims_[slot], static_cast<size_t>(node_rank_[slot]));
        else shapes[j].clear();
        // A Scalar leaf is a C++ number (x * 2.0): it takes part in promotion as one.
        metas.push_back({nullptr, p_.slots[n->in[j]].dtype, Graph::operand_kind(ref) == 2});
      }
      for (size_t j = 0; j < nin; ++j) metas[j].shape = &shapes[j];
      Attrs a = n->attrs;
      if (size_attrs_of(n->op) != SizeAttrs::kNone) {
        size_t j = 0;
        for_each_size_attr(n->op, a, [&](int64_t& v) { v = s_of(node_attrs_[k] + static_cast<int32_t>(j++)); });
      }
      om.shape.clear();
      const absl::Status st = infer(n->op, metas, a, &om);
      bool same_shape = st.ok() && om.shape.size() == static_cast<size_t>(node_rank_[k]);
      for (int32_t d = 0; d < node_rank_[k] && same_shape; ++d) same_shape = om.shape[d] == s_of(node_dims_[k] + d);
      if (!same_shape) {
        bad.push_back(k);
        if (bad.size() == 1)
          fail_ = absl::StrFormat("%s's shape rule does not accept the stand-in sizes: %s", op_name(n->op),
                                st.ok() ? std::string("another result shape") : std::string(st.message()));
      }
    }
    if (bad.empty()) break;
    // Pin the moved classes at each rejected node: its size attributes first (a slice's
    // bounds), else its result's dims, else its operands' (as few as will do: a class pinned
    // keeps its coincidences).
    bool pinned_any = false;
    for (const size_t k : bad) {
      bool pinned_here = false;
      auto pin_elem = [&](int32_t e) {
        if (moved(e) && !pinned[parent_[e]]) pin(parent_[e]), pinned_here = true;
      };
      for (int32_t e = node_attrs_[k]; e < node_attrs_[k] + node_nattrs_[k]; ++e) pin_elem(e);
      for (int32_t e = node_dims_[k]; e < node_dims_[k] + node_rank_[k] && !pinned_here; ++e) pin_elem(e);
      for (size_t j = 0; j < p_.instrs[k].in.size() && !pinned_here; ++j) {
        const uint32_t ref = opref(k, j);
        const int32_t slot = Graph::operand_slot(ref);
        if (Graph::operand_kind(ref) == 1)
          for (size_t d = 0; d < p_.slots[slot].shape.size(); ++d) pin_elem(in_dims_[slot] + static_cast<int32_t>(d));
        else if (Graph::operand_kind(ref) == 3)
          for (size_t d = 0; d < p_.instrs[slot].shape.size(); ++d) pin_elem(node_dims_[slot] + static_cast<int32_t>(d));
      }
      pinned_any |= pinned_here;
    }
    if (!pinned_any) return give_up(fail_);
  }
  bool split = false;
  for (const int32_t c : roots) split |= moved_[c] != 0;
  if (!split) {  // every coincidence is kept: the plan of these sizes
    if (!fail_.empty()) return give_up(fail_);
    return std::nullopt;
  }
  // The stand-in graph's shapes and size attributes, for apply().
  for (size_t i = 0; i < static_cast<size_t>(p_.num_inputs); ++i) {
    const Slot& l = p_.slots[i];
    const Strides& l_strides = p_.strides_of_input(l.index);
    for (size_t d = 0; d < l.shape.size(); ++d) out.input_shapes.v.push_back(s_of(in_dims_[i] + static_cast<int32_t>(d)));
    out.input_shapes.end_row();
    for (size_t d = 0; d < l_strides.size(); ++d) {
      const int32_t e = in_strides_[i] + static_cast<int32_t>(d);
      out.input_strides.v.push_back(d < l.shape.size() && val_[e] != -1 ? s_of(e) : l_strides[d]);
    }
    out.input_strides.end_row();
  }
  out.node_shapes.v.reserve(p_.instrs.size() * 2);
  out.node_shapes.off.reserve(p_.instrs.size() + 1);
  out.node_size_attrs.off.reserve(p_.instrs.size() + 1);
  for (size_t k = 0; k < p_.instrs.size(); ++k) {
    for (int32_t d = 0; d < node_rank_[k]; ++d) out.node_shapes.v.push_back(s_of(node_dims_[k] + d));
    out.node_shapes.end_row();
    for (int32_t j = 0; j < node_nattrs_[k]; ++j) out.node_size_attrs.v.push_back(s_of(node_attrs_[k] + j));
    out.node_size_attrs.end_row();
  }
  for (size_t ri = 0; ri < roots.size() && out.summary.size() < 200; ++ri)
    if (const int32_t c = roots[ri]; moved_[c])
      absl::StrAppendFormat(&out.summary, "%s%d -> %d", out.summary.empty() ? "" : ", ", val_[c], stand_[c]);

  // The key walk's order (build_graph: a depth-first walk from the roots, an input's dims and
  // recorded strides when first met, a node's dims and size attributes when emitted), to
  // number the stand-in sizes as a graph of these sizes would be numbered.
  std::vector<int32_t> stream;
  stream.reserve(g_.size_ids.size());
  {
    std::vector<uint8_t> done_v(p_.instrs.size(), 0), done_i(static_cast<size_t>(p_.num_inputs), 0);
    std::vector<std::pair<int32_t, size_t>> stack;
    size_t emitted = 0;
    auto emit_input = [&](int32_t i) {
      const Slot& l = p_.slots[i];
      for (size_t d = 0; d < l.shape.size(); ++d)
        if (l.shape[d] >= 2) stream.push_back(in_dims_[i] + static_cast<int32_t>(d));
      for (size_t d = l.shape.size(); d-- > 0;) {
        const int32_t e = in_strides_[i] + static_cast<int32_t>(d);
        if (val_[e] >= 2) stream.push_back(e);
      }
    };
    for (const int32_t rs : g_.root_values) {
      if (rs < 0 || static_cast<size_t>(rs) >= p_.instrs.size()) return give_up("an unexpected graph");
      if (done_v[rs]) continue;
      stack.push_back({rs, 0});
      done_v[rs] = 1;
      while (!stack.empty()) {
        auto& [k, j] = stack.back();
        const Instr* n = &p_.instrs[k];
        if (j < n->in.size()) {
          const uint32_t ref = opref(k, j++);
          const int32_t slot = Graph::operand_slot(ref);
          const uint32_t kind = Graph::operand_kind(ref);
          if (kind == 1 && !done_i[slot]) {
            done_i[slot] = 1;
            emit_input(slot);
          } else if (kind == 3 && !done_v[slot]) {
            done_v[slot] = 1;
            stack.push_back({slot, 0});
          }
          continue;
        }
        if (static_cast<size_t>(k) != emitted++) return give_up("an unexpected graph order");
        for (size_t d = 0; d < n->shape.size(); ++d)
          if (n->shape[d] >= 2) stream.push_back(node_dims_[k] + static_cast<int32_t>(d));
        const int32_t na = node_nattrs_[k];
        for (int32_t a = 0; a < na; ++a)
          if (val_[node_attrs_[k] + a] >= 2) stream.push_back(node_attrs_[k] + a);
        stack.pop_back();
      }
    }
    if (emitted != p_.instrs.size() || stream.size() != g_.size_ids.size())
      return give_up("an unexpected graph walk");
  }
  absl::flat_hash_map<int64_t, uint32_t> sym;
  out.size_ids.reserve(stream.size());
  for (size_t p = 0; p < stream.size(); ++p) {
    const int32_t e = stream[p];
    if (val_[e] != g_.sizes[g_.size_ids[p]]) return give_up("an unexpected graph walk");
    auto [it, fresh] = sym.try_emplace(s_of(e), static_cast<uint32_t>(out.sizes.size()));
    if (fresh) {
      out.sizes.push_back(s_of(e));
      out.real.push_back(val_[e]);
    } else if (out.real[it->second] != val_[e]) {
      return give_up("a stand-in that stands for two sizes");
    }
    out.size_ids.push_back(it->second);
  }
  return out;
}

}  // namespace

void StandInSizes::apply(Plan& p) const {
  p.shape_ids = false;  // the shape numbers lower() gave are for the real sizes
  for (size_t i = 0; i < input_shapes.size() && i < p.slots.size(); ++i) {
    const std::span<const int64_t> sh = input_shapes[i];
    p.slots[i].shape = Shape(sh.begin(), sh.end());
    const int32_t index = p.slots[i].index;
    if (index >= 0) {
      if (p.input_strides.size() <= static_cast<size_t>(index)) p.input_strides.resize(index + 1);
      const std::span<const int64_t> st = input_strides[i];
      p.input_strides[index] = Strides(st.begin(), st.end());
    }
  }
  for (size_t k = 0; k < node_shapes.size() && k < p.instrs.size(); ++k) {
    Instr& in = p.instrs[k];
    const std::span<const int64_t> sh = node_shapes[k];
    in.shape = Shape(sh.begin(), sh.end());
    p.slots[in.out].shape = in.shape;
    const std::span<const int64_t> sa = node_size_attrs[k];
    if (!sa.empty()) {
      size_t j = 0;
      for_each_size_attr(in.op, in.attrs.mut(), [&](int64_t& v) { v = sa[j++]; });
    }
  }
}

std::optional<StandInSizes> generalize_sizes(const Graph& g, const Plan& p, std::string* why) {
  if (why) why->clear();
  if (g.sizes.empty() || !p.slots_ordered || p.instrs.size() != g.order.size() ||
      p.num_inputs != static_cast<int32_t>(g.inputs.size()))
    return std::nullopt;
  // Collectives reorder the walk (build_graph); their graphs are planned as before.
  for (const Instr& in : p.instrs)
    if (in.op == OpId::kAllReduce || in.op == OpId::kBroadcast || in.op == OpId::kAllGather ||
        in.op == OpId::kReduceScatter)
      return std::nullopt;
  return Provenance(g, p).run(why);
}

}  // namespace sloth::lazy
