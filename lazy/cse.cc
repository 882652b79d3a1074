#include "lazy/cse.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

namespace sloth::lazy {
namespace {

bool commutative(OpId op) { return op_info(op).facts.commutative; }

// The structural hash of an instruction given its (aliased, for commutative binary ops
// sorted) operand slots.
uint64_t instr_hash(const Instr& i, int32_t a, int32_t b) {
  uint64_t h = absl::HashOf(static_cast<int>(i.op), static_cast<int>(i.dtype), i.attrs.hash(),
                            i.in.size(), a, b);
  for (size_t k = 2; k < i.in.size(); ++k) h = absl::HashOf(h, i.in[k]);
  return absl::HashOf(h, absl::MakeSpan(i.shape));
}

// Operand pair as compared: sorted for commutative binary ops.
std::pair<int32_t, int32_t> first_two(const Instr& i) {
  int32_t a = i.in.size() > 0 ? i.in[0] : -1, b = i.in.size() > 1 ? i.in[1] : -1;
  if (i.in.size() == 2 && commutative(i.op) && b < a) std::swap(a, b);
  return {a, b};
}

bool same(const Instr& x, const Instr& y) {
  if (x.op != y.op || x.dtype != y.dtype || x.in.size() != y.in.size() || first_two(x) != first_two(y))
    return false;
  for (size_t k = 2; k < x.in.size(); ++k)
    if (x.in[k] != y.in[k]) return false;
  return x.shape == y.shape && x.attrs == y.attrs;
}

}  // namespace

int eliminate_common_subexpressions(Plan& p) {
  std::vector<int32_t> alias(p.slots.size());
  for (size_t s = 0; s < alias.size(); ++s) alias[s] = static_cast<int32_t>(s);
  // Hash -> index of the kept instruction with that hash. A flat map of integers: no key
  // object per instruction, and the instruction is read only on a hash match. Two different
  // instructions with one 64-bit hash (never seen in practice) just both stay: CSE is an
  // optimization, the plan is right either way.
  absl::flat_hash_map<uint64_t, int32_t> seen;
  seen.reserve(p.instrs.size());
  // Compacted in place (kept instructions move down over removed ones): a plan of 1e5
  // instructions is not copied into a second array.
  size_t w = 0;
  int removed = 0;
  for (size_t r = 0; r < p.instrs.size(); ++r) {
    Instr& in = p.instrs[r];
    for (int32_t& s : in.in) s = alias[s];
    const OpCategory cat = op_info(in.op).category;
    // Factories are left alone: each one is its own fresh buffer (random ones draw numbers).
    // ---- distributed ----
    // Collectives too: each is a message exchange every rank must issue, so how many run
    // must not depend on which values happen to coincide on one rank.
    const bool collective = in.op == OpId::kAllReduce || in.op == OpId::kBroadcast ||
                            in.op == OpId::kAllGather || in.op == OpId::kReduceScatter;
    if (cat != OpCategory::Factory && cat != OpCategory::Leaf && !collective) {
      const auto [a, b] = first_two(in);
      auto [it, fresh] = seen.try_emplace(instr_hash(in, a, b), static_cast<int32_t>(w));
      if (!fresh && same(p.instrs[it->second], in)) {
        alias[in.out] = p.instrs[it->second].out;
        ++removed;
        continue;
      }
    }
    if (w != r) p.instrs[w] = std::move(in);
    ++w;
  }
  p.instrs.erase(p.instrs.begin() + static_cast<std::ptrdiff_t>(w), p.instrs.end());
  for (int32_t& o : p.outputs) o = alias[o];
  return removed;
}

}  // namespace sloth::lazy
