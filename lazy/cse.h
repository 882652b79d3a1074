// Common-subexpression elimination over a lowered plan: an instruction that repeats an
// earlier one (same op, dtype, shape, attrs and operand slots; operands of commutative ops in
// either order) is dropped and its readers read the earlier result. Autograd makes such
// repeats routinely (d(x*x) = g*x + g*x, the same mask or transpose built by two formulas).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "lazy/plan.h"

namespace sloth::lazy {

// Rewrites `plan` in place (before kernels are formed); returns how many instructions went.
int eliminate_common_subexpressions(Plan& plan);

// The same pass one instruction at a time, for a caller that makes the instructions in order
// (lower(): each is checked while its data is in cache, not in a second walk over all of
// them). `kept` holds the instructions kept so far, in order.
class CseTable {
 public:
  explicit CseTable(size_t num_slots, size_t num_instrs = 0);
  // Rewrites in.in through the aliases of removed instructions. True: `in` repeats a kept
  // instruction (its result slot now aliases that one's; drop it). False: the caller keeps
  // it as kept[kept.size()] (appends it next).
  bool repeats(const Instr* kept, Instr& in);
  int32_t alias(int32_t slot) const { return alias_[slot]; }

 private:
  std::vector<int32_t> alias_, head_, chain_len_, next_;
  std::vector<uint64_t> hash_of_;  // per kept instruction
  absl::flat_hash_map<uint64_t, int32_t> seen_;  // instructions of long chains (and no operand)
};

}  // namespace sloth::lazy
