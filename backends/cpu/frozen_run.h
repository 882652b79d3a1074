// A frozen run: an executable's kernels as a flat list bound once to the layouts of a run, for
// the runs that repeat them (a replayed training step, a loop whose graph comes from the plan
// cache). When an executable runs again with every input of the same dtype, shape and strides
// (Env::layout_gen unchanged), every slot's layout, every kernel's read paths and every view's
// offset are what they were; only the data pointers of the inputs change. So the run is
// replayed from a list built once:
//   - intermediates live in an arena owned by the frozen run, packed by their lifetimes (the
//     executable's release lists), at fixed addresses: no buffer is taken or released, no
//     reference counted, and the kernels' bound pointers into them never change;
//   - the values the run hands out (plan outputs and what outputs view) get a buffer per run,
//     taken over from a dead input when the normal run would (the in-place update of a
//     parameter: nothing else holds its buffer) or from the executable's pool;
//   - a view is a pointer offset; a matmul, a reduction and an elementwise program get their
//     operands' pointers and nothing else (kernels.h: BoundGemm, BoundReduce,
//     ElementwiseProgram::run_frozen).
// Steps of other kinds (factories, collectives, copies, row groups) keep an executable on the
// normal path. SLOTH_FROZEN=0 turns frozen runs off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/run_state.h"
#include "lazy/steps.h"

namespace sloth::cpu {

class FrozenRun {
 public:
  // One step of the executable, in run order, as the builder needs it.
  struct StepRef {
    lazy::StepKind kind = lazy::StepKind::kIndex;
    int32_t kernel = 0;                              // plan kernel it belongs to
    int32_t end_pos = 0;                             // execution position of its last instruction
    const Instr* instr = nullptr;                    // single-instruction steps, a fused reduction
    const ElementwiseProgram* program = nullptr;     // elementwise and fused-reduce steps
    bool true_view = false;                          // kView: its last run shared its input's buffer
    int64_t view_delta = 0;                          // ... at this byte offset from the input's data
    const std::vector<int32_t>* const_outs = nullptr;       // a constant step (kept values):
    const std::vector<DeviceData>* const_vals = nullptr;    // its slots and their buffers
  };

  // The frozen form of a run whose layouts env.vals holds (those of the executable's last
  // completed run, under layout generation `layout_gen`), or null with the reason in `why`.
  // `last_read`: per slot, the execution position of its last reader (lazy::split_steps).
  static std::unique_ptr<FrozenRun> build(Env& env, uint64_t layout_gen,
                                          absl::Span<const StepRef> steps,
                                          const RunReleases& releases,
                                          const std::vector<int32_t>& last_read,
                                          std::string* why);

  // Runs every kernel. The inputs are bound in env.vals; afterwards every plan output's slot
  // holds its value (as the normal run leaves it) for the executable to hand out.
  void run(Env& env);
  // After the outputs were handed out: drops the references the run still holds.
  void finish(Env& env);
  int64_t kernels() const { return kernels_; }
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  enum class Kind : uint8_t { kView, kConst, kFresh, kTile, kGemm, kReduce };
  struct Thunk {
    Kind kind;
    int32_t out = -1;            // the slot it sets or writes
    int32_t a = -1, b = -1;      // operand slots (kView: a; kGemm: a, b; kReduce: a)
    int64_t delta = 0;           // kView: byte offset from a's data to out's
    const DeviceData* src = nullptr;           // kConst
    const ElementwiseProgram* program = nullptr;  // kTile
    int32_t index = -1;          // kGemm: gemms_; kReduce: reduces_; kFresh: donors_
  };
  struct AlignedFree {
    void operator()(char* p) const;
  };

  const Plan* plan_ = nullptr;
  std::vector<Thunk> thunks_;
  std::vector<BoundGemm> gemms_;
  std::vector<BoundReduce> reduces_;
  std::vector<std::vector<int32_t>> donors_;  // kFresh: input slots whose buffer it may take
  std::vector<int32_t> input_slots_;
  std::vector<char*> ptr_;                    // per slot: its data this run
  // Plan outputs that view a value of this run: their slot shares the viewed slot's buffer.
  std::vector<std::pair<int32_t, int32_t>> output_views_;
  std::vector<int32_t> fresh_;                // slots given a buffer per run (kFresh)
  std::unique_ptr<char, AlignedFree> arena_;
  size_t arena_bytes_ = 0;
  int64_t kernels_ = 0;
};

}  // namespace sloth::cpu
