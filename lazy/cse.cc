#include "lazy/cse.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

namespace sloth::lazy {
namespace {

bool commutative(OpId op) { return op_info(op).facts.commutative; }

struct Key {
  const Instr* instr;
  absl::InlinedVector<int32_t, 3> in;  // operand slots, sorted for commutative ops

  template <typename H>
  friend H AbslHashValue(H h, const Key& k) {
    const Instr& i = *k.instr;
    h = H::combine(std::move(h), static_cast<int>(i.op), static_cast<int>(i.dtype), i.attrs.hash());
    h = H::combine_contiguous(std::move(h), i.shape.data(), i.shape.size());
    return H::combine_contiguous(std::move(h), k.in.data(), k.in.size());
  }
  friend bool operator==(const Key& a, const Key& b) {
    return a.instr->op == b.instr->op && a.instr->dtype == b.instr->dtype && a.in == b.in &&
           a.instr->shape == b.instr->shape && a.instr->attrs == b.instr->attrs;
  }
};

}  // namespace

int eliminate_common_subexpressions(Plan& p) {
  std::vector<int32_t> alias(p.slots.size());
  for (size_t s = 0; s < alias.size(); ++s) alias[s] = static_cast<int32_t>(s);
  absl::flat_hash_map<Key, int32_t> seen;  // -> slot of the first instruction computing it
  seen.reserve(p.instrs.size());
  std::vector<Instr> kept;
  kept.reserve(p.instrs.size());
  int removed = 0;
  for (Instr& in : p.instrs) {
    for (int32_t& s : in.in) s = alias[s];
    const OpCategory cat = op_info(in.op).category;
    // Factories are left alone: each one is its own fresh buffer (random ones draw numbers).
    // ---- distributed ----
    // Collectives too: each is a message exchange every rank must issue, so how many run
    // must not depend on which values happen to coincide on one rank.
    const bool collective = in.op == OpId::kAllReduce || in.op == OpId::kBroadcast ||
                            in.op == OpId::kAllGather || in.op == OpId::kReduceScatter;
    if (cat == OpCategory::Factory || cat == OpCategory::Leaf || collective) {
      kept.push_back(std::move(in));
      continue;
    }
    Key k{&in, {in.in.begin(), in.in.end()}};
    if (commutative(in.op) && k.in.size() == 2 && k.in[1] < k.in[0]) std::swap(k.in[0], k.in[1]);
    auto it = seen.find(k);
    if (it != seen.end()) {
      alias[in.out] = it->second;
      ++removed;
      continue;
    }
    kept.push_back(std::move(in));
    // The key points at the kept instruction (stable: `kept` never reallocates).
    Key stored{&kept.back(), std::move(k.in)};
    seen.emplace(std::move(stored), kept.back().out);
  }
  p.instrs = std::move(kept);  // the originals were moved from
  for (int32_t& o : p.outputs) o = alias[o];
  return removed;
}

}  // namespace sloth::lazy
