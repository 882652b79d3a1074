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

// A repeat reads the same operands, so the kept instructions are found through their key
// operand (the second of the compared pair, else the first): per slot, a chain of the kept
// instructions keyed on it, newest first, with their hashes. These arrays are indexed by slot
// and by position, which in a large graph mostly advance together, so the lookups stay in
// cache where a hash table of 1e5 instructions is probed at random. A slot read by many
// different instructions (1e5 slices of one tensor) would make its chain long: past kMaxChain
// members it moves to a hash map (hash -> instruction), which keeps the pass linear. Two
// different instructions with one 64-bit hash (never seen in practice) just both stay: CSE is
// an optimization, the plan is right either way.
constexpr int32_t kMaxChain = 8;

CseTable::CseTable(size_t num_slots, size_t num_instrs)
    : alias_(num_slots), head_(num_slots, -1), chain_len_(num_slots, 0) {
  for (size_t s = 0; s < num_slots; ++s) alias_[s] = static_cast<int32_t>(s);
  next_.reserve(num_instrs);
  hash_of_.reserve(num_instrs);
}

bool CseTable::repeats(const Instr* kept, Instr& in) {
  for (int32_t& s : in.in) s = alias_[s];
  const OpCategory cat = op_info(in.op).category;
  // Factories are left alone: each one is its own fresh buffer (random ones draw numbers).
  // ---- distributed ----
  // Collectives too: each is a message exchange every rank must issue, so how many run
  // must not depend on which values happen to coincide on one rank.
  const bool collective = in.op == OpId::kAllReduce || in.op == OpId::kBroadcast ||
                          in.op == OpId::kAllGather || in.op == OpId::kReduceScatter;
  uint64_t h = 0;
  int32_t key = -1;
  const bool candidate = cat != OpCategory::Factory && cat != OpCategory::Leaf && !collective;
  if (candidate) {
    const auto [a, b] = first_two(in);
    h = instr_hash(in, a, b);
    key = b >= 0 ? b : a;
    int32_t match = -1;
    if (key >= 0 && chain_len_[key] <= kMaxChain) {
      for (int32_t j = head_[key]; j >= 0; j = next_[j])
        if (hash_of_[j] == h) {
          match = j;
          break;
        }
    } else if (auto it = seen_.find(h); it != seen_.end()) {
      match = it->second;
    }
    if (match >= 0 && same(kept[match], in)) {
      alias_[in.out] = kept[match].out;
      return true;
    }
  }
  const int32_t k = static_cast<int32_t>(next_.size());
  next_.push_back(-1);
  hash_of_.push_back(h);
  if (!candidate) return false;
  if (key < 0 || chain_len_[key] > kMaxChain) {
    seen_.try_emplace(h, k);
    return false;
  }
  next_[k] = head_[key];
  head_[key] = k;
  if (++chain_len_[key] > kMaxChain)  // too long: this slot's instructions go to the map
    for (int32_t j = head_[key]; j >= 0; j = next_[j]) seen_.try_emplace(hash_of_[j], j);
  return false;
}

int eliminate_common_subexpressions(Plan& p) {
  CseTable t(p.slots.size(), p.instrs.size());
  // Compacted in place (kept instructions move down over removed ones): a plan of 1e5
  // instructions is not copied into a second array.
  size_t w = 0;
  int removed = 0;
  for (size_t r = 0; r < p.instrs.size(); ++r) {
    Instr& in = p.instrs[r];
    if (t.repeats(p.instrs.data(), in)) {
      ++removed;
      continue;
    }
    if (w != r) p.instrs[w] = std::move(in);
    ++w;
  }
  p.instrs.erase(p.instrs.begin() + static_cast<std::ptrdiff_t>(w), p.instrs.end());
  for (int32_t& o : p.outputs) o = t.alias(o);
  return removed;
}

}  // namespace sloth::lazy
