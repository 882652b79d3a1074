// A Plan is a graph lowered to a backend-neutral program: instructions over numbered slots.
// The scheduler builds it once per graph structure and caches the backend's compiled form by
// the graph's structural hash; later graphs of the same structure only bind new data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "core/attrs.h"
#include "core/dims.h"
#include "core/op_table.h"
#include "core/shape.h"

namespace sloth::lazy {

// Where a slot's value comes from.
enum class SlotKind : uint8_t {
  kInput,   // data bound at run time (graph inputs: materialized nodes)
  kScalar,  // a scalar bound at run time (Scalar leaves: step-dependent numbers are data)
  kValue,   // computed by an instruction of the plan
};

// 32 bytes: a 1e5-node plan has 2e5 slots, written by lower() and read by the passes after it
// (an input's strides live in Plan::input_strides, not in every slot).
struct Slot {
  SlotKind kind = SlotKind::kValue;
  DType dtype = DType::kFloat32;
  int32_t index = 0;  // kInput/kScalar: position in the bound arrays
  Dims shape;
};

// An instruction's attributes, kept out of line: most instructions have none (null reads as
// the empty Attrs) and the rest share one immutable copy, so an Instr is ~100 bytes instead of
// ~230 and the planner's passes over 1e5 instructions touch less than half the memory. Reads
// look like an Attrs: `XAttrs::of(in.attrs)` converts, `in.attrs->dims` reads a field.
class InstrAttrs {
 public:
  InstrAttrs() = default;
  InstrAttrs(const Attrs& a);  // NOLINT: an Attrs is an instruction's attributes
  const Attrs& get() const { return p_ ? *p_ : empty(); }
  operator const Attrs&() const { return get(); }  // NOLINT
  const Attrs* operator->() const { return &get(); }
  uint64_t hash() const { return p_ ? p_->hash() : empty_hash(); }
  // A private copy to modify (the shared one stays as it is for the other holders).
  Attrs& mut();
  friend bool operator==(const InstrAttrs& a, const InstrAttrs& b) {
    return a.p_ == b.p_ || a.get() == b.get();
  }
  static const Attrs& empty();
  static uint64_t empty_hash();

 private:
  std::shared_ptr<Attrs> p_;
};

struct Instr {
  OpId op;
  DType dtype;
  Dims shape;
  InstrAttrs attrs;
  absl::InlinedVector<int32_t, 3> in;  // slot ids
  int32_t out;                         // slot id
  // lower(): the plan's number for `shape` (equal numbers: equal shapes), so the passes
  // compare shapes without reading them (a heap line per instruction). -1: not numbered
  // (made by a later pass); only trusted where Plan::shape_ids is set (see same_shape).
  int32_t shape_id = -1;
};

// A fused kernel: a run of instructions the backend executes as one loop nest.
enum class KernelKind : uint8_t {
  kElementwise,  // elementwise instrs over one loop shape (broadcasts folded into indexing)
  kReduce,       // elementwise prologue, one reduction, elementwise epilogue of its shape
  kMatmul,       // GEMM, optionally with an elementwise epilogue
  kView,         // zero-copy layout change when possible
  kOther,        // one instruction with its own kernel (index, scatter, concatenation, factories)
};

struct Kernel {
  KernelKind kind = KernelKind::kOther;
  std::vector<int32_t> instrs;   // indices into Plan::instrs, in order
  std::vector<int32_t> outputs;  // slots written to memory (needed outside the kernel)
};

// The dtype an elementwise instruction reads operand i in: its own dtype, except that
// comparisons compare in attrs.dtype, logical ops read truth values and where's condition is
// bool. Every backend converts operands to this before applying the op.
DType operand_dtype(const Instr& in, int i);

// The dims a reduction instruction reduces over an input of rank `rank`: attrs.dims for
// sum/prod/amax/amin (already normalized by the rule), the single dim i0 for argmax/argmin
// (none for a 0-dim input).
std::vector<int64_t> reduced_dims(const Instr& in, size_t rank);

struct Plan {
  std::vector<Slot> slots;
  std::vector<Instr> instrs;
  std::vector<Kernel> kernels;
  std::vector<int32_t> outputs;         // slot of each graph output, in order
  // Per input (Slot::index): the layout the plan was built for (strided reads). Planning
  // metadata (size provenance, plan instances, miss reasons); no backend reads it.
  std::vector<Strides> input_strides;
  const Strides& strides_of_input(int32_t index) const {
    static const Strides kNone;
    return index >= 0 && static_cast<size_t>(index) < input_strides.size() ? input_strides[index]
                                                                            : kNone;
  }
  std::vector<std::vector<int32_t>> free_after;  // per kernel: slots whose last use it is
  // Per slot, how many instruction operands read it: filled by compute_kernel_outputs with
  // liveness (its walk sees every operand), so split_steps does not walk the instructions
  // again for it. Valid while its size is slots.size(); a pass that changes operands after
  // it clears it (split_steps then counts them itself).
  std::vector<int32_t> read_counts;
  int32_t num_inputs = 0, num_scalars = 0;
  // Set by lower(): slots [0, num_inputs) are the inputs, the next num_scalars the scalars,
  // and every later one a value, so a pass after one kind walks only its range instead of
  // reading every slot's kind (2e5 slots of a 1e5-node graph are 13 MB). Plans built
  // otherwise (tests, copies) leave it false and are walked whole.
  bool slots_ordered = false;
  // The kind of slot s; with ordered slots from its range, without reading the slot (64
  // bytes): passes that ask it of every operand do not walk the slot table.
  SlotKind slot_kind(int32_t s) const {
    if (!slots_ordered) return slots[s].kind;
    return s < num_inputs                ? SlotKind::kInput
           : s < num_inputs + num_scalars ? SlotKind::kScalar
                                          : SlotKind::kValue;
  }
  // Set by lower(): Instr::shape_id numbers this plan's shapes. Plans copied and resized
  // (plan_instance) or built otherwise leave it false and compare shapes themselves.
  bool shape_ids = false;
  // Whether instructions a and b have equal shapes, by number where both have one.
  bool same_shape(const Instr& a, const Instr& b) const {
    if (shape_ids && a.shape_id >= 0 && b.shape_id >= 0) return a.shape_id == b.shape_id;
    return a.shape == b.shape;
  }
  uint64_t key = 0;                     // the graph's structural hash
  std::string describe() const;         // for SLOTH_LOG and dump_ir(kText)
};

}  // namespace sloth::lazy
