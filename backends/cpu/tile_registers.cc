// Scratch registers of the tile interpreter: each value not read in place from memory lives
// in a tile-sized register while it is live, and registers are reused so a long chain keeps
// its working set in L1.
#include "backends/cpu/tile_program.h"

namespace sloth::cpu {

// Per thread: tiles of one chunk reuse them, chunks on other threads have their own.
char* scratch_registers(size_t bytes) {
  thread_local std::vector<char> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<char*>((p + 63) & ~uintptr_t{63});
}

// Linear scan over the steps: a value holds a register from its defining step to its last
// use. Constants keep theirs for the whole chunk (filled once); outputs need none.
void TileProgram::allocate_registers() {
  std::vector<int> last(vals_.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s)
    for (int i : steps_[s].in)
      if (i >= 0) last[i] = static_cast<int>(s);
  if (sink_ >= 0) last[sink_] = static_cast<int>(steps_.size());  // read after the last step
  std::vector<int> free_regs;
  int next = 0;
  auto take = [&] {
    if (!free_regs.empty()) {
      int r = free_regs.back();
      free_regs.pop_back();
      return r;
    }
    return next++;
  };
  for (const Const& c : consts_) vals_[c.val].reg = take();
  for (size_t s = 0; s < steps_.size(); ++s) {
    Val& out = vals_[steps_[s].out];
    // Loads may turn direct at run time (harmless); outputs get a register too, used when
    // a large run streams its results out with non-temporal stores.
    out.reg = take();
    if (out.out >= 0) last[steps_[s].out] = static_cast<int>(steps_.size());
    for (int i : steps_[s].in)
      if (i >= 0 && last[i] == static_cast<int>(s) && vals_[i].reg >= 0 &&
          !is_const(i)) {
        free_regs.push_back(vals_[i].reg);
        last[i] = -2;  // freed once even if it is read twice by this step
      }
    if (last[steps_[s].out] == -1 && out.reg >= 0) free_regs.push_back(out.reg);
  }
  num_regs_ = next;
}

}  // namespace sloth::cpu
