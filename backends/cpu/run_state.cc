// See run_state.h.
#include "backends/cpu/run_state.h"

#include <utility>

namespace sloth::cpu {

using lazy::SlotKind;

void RunReleases::build(const Plan& plan, std::vector<std::vector<int32_t>> release) {
  release_ = std::move(release);
  std::vector<char> released(plan.slots.size(), 0);
  for (const auto& r : release_)
    for (int32_t s : r) released[s] = 1;
  held_at_end_.clear();
  for (size_t s = 0; s < plan.slots.size(); ++s)
    if (!released[s]) held_at_end_.push_back(code(plan, static_cast<int32_t>(s)));
  release_code_.assign(release_.size(), {});
  for (size_t k = 0; k < release_.size(); ++k)
    for (int32_t s : release_[k]) release_code_[k].push_back(code(plan, s));
  // An output's reference moves to the caller when its slot is computed by the plan (not
  // an input or a bound scalar: those are not this run's) and no later output names it.
  // One backward walk with a flag per slot: a wide plan has as many outputs as nodes.
  output_move_.assign(plan.outputs.size(), 0);
  std::vector<char> named_later(plan.slots.size(), 0);
  for (size_t o = plan.outputs.size(); o-- > 0;) {
    const int32_t s = plan.outputs[o];
    output_move_[o] = !named_later[s] && plan.slot_kind(s) == SlotKind::kValue;
    named_later[s] = 1;
  }
}

void RunReleases::release_at_end(Env& env, bool completed) const {
  if (env.pool != nullptr && completed) {
    for (int32_t c : held_at_end_) {
      if (c >= 0) env.pool->give(env.vals[c].storage);
      else env.vals[~c].storage.reset();
    }
  } else if (env.pool != nullptr) {
    for (size_t s = 0; s < env.vals.size(); ++s) {
      if (env.plan->slot_kind(static_cast<int32_t>(s)) != SlotKind::kInput) env.pool->give(env.vals[s].storage);
      else env.vals[s].storage.reset();
    }
  } else {
    for (DeviceData& d : env.vals) d.storage.reset();
  }
}

std::vector<int32_t> donation_candidates(const Plan& plan, const std::vector<char>& plan_out,
                                         const std::vector<int32_t>& last_read,
                                         const std::vector<int32_t>& reads, int32_t end_pos) {
  std::vector<int32_t> d;
  for (int32_t s : reads)
    if (!plan_out[s] && last_read[s] <= end_pos && plan.slot_kind(s) != SlotKind::kScalar)
      d.push_back(s);
  return d;
}

}  // namespace sloth::cpu
