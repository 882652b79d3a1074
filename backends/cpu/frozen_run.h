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
//     ElementwiseProgram::run_frozen); a compiled program whose operands are all read in
//     place is one call of its compiled loop over the run's pointers (CompiledCall): none of
//     the program's own state is touched, which for a step of ~30 small kernels was most of
//     the cost of running one;
//   - any other single-instruction step (an index or scatter op, a factory, a copy, a batched
//     matmul) runs as in the normal run, through its slot table entries: its operands are
//     bound there for the call (an arena value as a view of the arena's Storage) and its
//     result keeps the buffer the kernel gave it until the run ends.
// Collectives and row groups keep an executable on the normal path. SLOTH_FROZEN=0 turns
// frozen runs off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "backends/cpu/compiled_call.h"
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
    const std::vector<int32_t>* reads = nullptr;     // slots it reads and does not compute
  };
  // Runs step `index` (of the list given to build) as the normal run does.
  using StepExec = absl::FunctionRef<absl::Status(int32_t index)>;

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
  // A step run as in the normal run can fail (an index out of range): the run stops there,
  // and finish still drops what it holds.
  absl::Status run(Env& env, StepExec exec);
  // After the outputs were handed out: drops the references the run still holds.
  void finish(Env& env);
  int64_t kernels() const { return kernels_; }
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  enum class Kind : uint8_t { kView, kConst, kFresh, kTile, kCall, kGemm, kReduce, kStep };
  struct Thunk {
    Kind kind;
    int32_t out = -1;            // the slot it sets or writes
    int32_t a = -1, b = -1;      // operand slots (kView: a; kGemm: a, b; kReduce: a)
    int64_t delta = 0;           // kView: byte offset from a's data to out's
    const DeviceData* src = nullptr;           // kConst
    const ElementwiseProgram* program = nullptr;  // kTile, kCall
    int32_t index = -1;          // kGemm: gemms_; kReduce: reduces_; kFresh: donors_; kCall: calls_;
                                 // kStep: the step's index; its bound reads are step_reads_
    int32_t reads_begin = 0, reads_end = 0;  // kStep
    bool escapes = false;        // kStep: its result is handed out (an output or viewed by one)
  };
  // A slot a kStep reads, and where its buffer comes from for the call.
  struct StepRead {
    int32_t slot;
    int32_t root;  // the slot whose buffer it is (itself unless a view)
    bool own = false;  // the slot holds its own buffer in the slot table already
    // The slot's offset in the normal run's layouts (Env::layout_gen), put back after the
    // step: bind_read points it into the arena, and a normal run of the same layout
    // generation (constant steps missed, profiling started) trusts the layouts it finds.
    int64_t normal_offset = 0;
    const DeviceData* const_src = nullptr;  // the root is a kept constant: its value
  };
  // The slot table entry a kStep reads: the buffer of its root, at its pointer this run.
  void bind_read(Env& env, const StepRead& r);
  absl::Status run_step(Env& env, const Thunk& t, StepExec exec);

  const Plan* plan_ = nullptr;
  std::vector<Thunk> thunks_;
  std::vector<BoundGemm> gemms_;
  std::vector<BoundReduce> reduces_;
  std::vector<CompiledCall> calls_;
  std::vector<std::vector<int32_t>> donors_;  // kFresh: input slots whose buffer it may take
  std::vector<int32_t> input_slots_;
  std::vector<char*> ptr_;                    // per slot: its data this run
  // Plan outputs that view a value of this run: their slot shares the viewed slot's buffer.
  std::vector<std::pair<int32_t, int32_t>> output_views_;
  std::vector<int32_t> fresh_;                // slots given a buffer per run (kFresh)
  std::vector<StepRead> step_reads_;
  std::vector<int32_t> scrub_;                // slots kSteps write (and scalar slots they read)
  std::vector<char> in_arena_;                // per slot: lives in the arena
  StoragePtr arena_;
  size_t arena_bytes_ = 0;
  int64_t kernels_ = 0;
};

}  // namespace sloth::cpu
