#include "lazy/epilogue_sink.h"

#include <algorithm>
#include <vector>

#include "lazy/fusion.h"

namespace sloth::lazy {
namespace {

constexpr int32_t kNone = -1, kMany = -2;

}  // namespace

int sink_matmul_epilogues(Plan& p) {
  // Nothing to sink without a matmul kernel that has an epilogue: a plan without one skips the
  // passes over every instruction below.
  if (std::none_of(p.kernels.begin(), p.kernels.end(), [](const Kernel& k) {
        return k.kind == KernelKind::kMatmul && k.instrs.size() >= 2;
      }))
    return 0;
  const int32_t nslots = static_cast<int32_t>(p.slots.size());
  std::vector<int32_t> kernel_of(nslots, kNone);  // slot -> kernel computing it
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int32_t i : p.kernels[k].instrs) kernel_of[p.instrs[i].out] = static_cast<int32_t>(k);
  std::vector<char> is_output(nslots, 0);
  for (int32_t o : p.outputs) is_output[o] = 1;
  // reader[s]: the one other kernel that reads slot s (kNone: none, kMany: several).
  std::vector<int32_t> reader(nslots, kNone);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (int32_t i : p.kernels[k].instrs)
      for (int32_t s : p.instrs[i].in) {
        if (kernel_of[s] == kNone || kernel_of[s] == static_cast<int32_t>(k)) continue;
        int32_t& r = reader[s];
        r = r == kNone || r == static_cast<int32_t>(k) ? static_cast<int32_t>(k) : kMany;
      }

  int moved = 0;
  std::vector<char> in_set(nslots, 0);
  for (size_t m = 0; m < p.kernels.size(); ++m) {
    Kernel& M = p.kernels[m];
    if (M.kind != KernelKind::kMatmul || M.instrs.size() < 2) continue;
    const Instr& anchor = p.instrs[M.instrs[0]];
    if (op_info(anchor.op).category != OpCategory::Matmul) continue;
    // The GEMM's result must be in memory anyway, or moving its consumers would add a write.
    const int32_t a = anchor.out;
    if (!is_output[a] && reader[a] < 0) continue;
    // Walk the epilogue backwards so an instruction's in-kernel readers are decided first.
    int32_t target = kNone;
    std::vector<int32_t> set;  // instruction indices, in reverse order
    for (size_t j = M.instrs.size(); j-- > 1;) {
      const int32_t i = M.instrs[j];
      const Instr& in = p.instrs[i];
      const int32_t s = in.out;
      if (is_output[s] || reader[s] == kMany) continue;
      bool internal_ok = true;
      for (size_t q = j + 1; q < M.instrs.size() && internal_ok; ++q)
        for (int32_t t : p.instrs[M.instrs[q]].in)
          if (t == s && !in_set[p.instrs[M.instrs[q]].out]) internal_ok = false;
      if (!internal_ok) continue;
      if (reader[s] >= 0) {
        const Kernel& K = p.kernels[reader[s]];
        if (K.kind != KernelKind::kElementwise || p.instrs[K.instrs[0]].shape != in.shape) continue;
        if (target == kNone) target = reader[s];
        if (target != reader[s]) continue;
      }
      // Epilogue operands that do not move with it are dropped after the walk.
      in_set[s] = 1;
      set.push_back(i);
    }
    // Drop members whose epilogue operands stay behind (they would have to be written), until
    // the set is closed.
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t x = 0; x < set.size(); ++x) {
        const Instr& in = p.instrs[set[x]];
        if (!in_set[in.out]) continue;
        for (int32_t t : in.in)
          if (kernel_of[t] == static_cast<int32_t>(m) && t != a && !in_set[t]) {
            in_set[in.out] = 0;
            changed = true;
            break;
          }
        // A member read inside the kernel by a non-member must stay.
        if (in_set[in.out])
          for (int32_t q : M.instrs)
            if (!in_set[p.instrs[q].out])
              for (int32_t t : p.instrs[q].in)
                if (t == in.out && in_set[in.out]) { in_set[in.out] = 0; changed = true; }
      }
    }
    std::vector<int32_t> moving;
    bool saves = false;
    for (auto it = set.rbegin(); it != set.rend(); ++it)
      if (in_set[p.instrs[*it].out]) {
        moving.push_back(*it);
        if (reader[p.instrs[*it].out] >= 0) saves = true;
      }
    for (int32_t i : set) in_set[p.instrs[i].out] = 0;
    if (!saves || target < 0) continue;
    // Move: the target runs after M and after every kernel the moved instructions read, so
    // the moved instructions may lead it.
    std::vector<char> moving_instr(p.instrs.size(), 0);
    for (int32_t i : moving) moving_instr[i] = 1;
    M.instrs.erase(std::remove_if(M.instrs.begin(), M.instrs.end(),
                                  [&](int32_t i) { return moving_instr[i] != 0; }),
                   M.instrs.end());
    Kernel& K = p.kernels[target];
    K.instrs.insert(K.instrs.begin(), moving.begin(), moving.end());
    for (int32_t i : moving) kernel_of[p.instrs[i].out] = target;
    // The GEMM's result is now read by the target as well.
    if (reader[a] != target) reader[a] = kMany;
    moved += static_cast<int>(moving.size());
  }
  if (moved > 0) compute_kernel_outputs(p);
  return moved;
}

}  // namespace sloth::lazy
