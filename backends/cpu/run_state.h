// The buffer bookkeeping of a CPU executable's run: which slots each kernel's end releases,
// which are still held when the run ends, which outputs' references move to the caller, and
// which operands an elementwise step may write its result into (donation candidates). All of
// it is a function of the plan and its release lists, computed once per executable.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/kernels.h"
#include "lazy/plan.h"

namespace sloth::cpu {

class RunReleases {
 public:
  // `release[k]`: the slots whose last reader is kernel k (lazy::split_steps).
  void build(const Plan& plan, std::vector<std::vector<int32_t>> release);

  const std::vector<std::vector<int32_t>>& release() const { return release_; }
  // Output `o`'s reference moves to the caller at the end of a run (its slot is computed by
  // the plan and no later output names it).
  bool output_moves(size_t o) const { return output_move_[o] != 0; }

  // After kernel k: its dead slots' buffers go to `env.pool` (computed slots) or are dropped
  // (input slots: the caller's); without a pool every one is dropped.
  void release_kernel(Env& env, size_t k) const {
    if (env.pool != nullptr) {
      for (int32_t c : release_code_[k]) {
        if (c >= 0) env.pool->give(env.vals[c].storage);
        else env.vals[~c].storage.reset();
      }
    } else {
      for (int32_t s : release_[k]) env.vals[s].storage.reset();
    }
  }
  // At the end of a run: drops every reference the slot table still holds; computed values
  // nothing else holds go to the pool. `completed`: every kernel end ran, so only the slots
  // no kernel end releases can hold a buffer.
  void release_at_end(Env& env, bool completed) const;

 private:
  // A slot as the release lists code it: s for a computed (or scalar) slot, whose buffer may
  // go to the pool; ~s (negative) for an input slot, whose buffer is the caller's.
  // The kind from the plan's slot ranges (Plan::slot_kind): a wide plan's 2e5 slots are not read.
  static int32_t code(const Plan& plan, int32_t s) {
    return plan.slot_kind(s) == lazy::SlotKind::kInput ? ~s : s;
  }
  std::vector<std::vector<int32_t>> release_;
  std::vector<std::vector<int32_t>> release_code_;  // release_, coded (see code())
  std::vector<int32_t> held_at_end_;                // coded slots no kernel end releases
  std::vector<char> output_move_;                   // per plan output
};

// The operands among `reads` an elementwise step ending at execution position `end_pos` may
// write its result into: not plan outputs (`plan_out`), not scalars, and read by nothing after
// the step (`last_read`, per slot, from lazy::split_steps).
std::vector<int32_t> donation_candidates(const Plan& plan, const std::vector<char>& plan_out,
                                         const std::vector<int32_t>& last_read,
                                         const std::vector<int32_t>& reads, int32_t end_pos);

}  // namespace sloth::cpu
