// The tile interpreter: how the CPU runs a fused elementwise kernel (lazy/ew_form.h), with or
// without a fused reduction. The loop space is cut into tiles of kTile elements that stay in
// L1; per tile each step of the kernel's form runs one tight typed loop chosen when the
// program is built (ew_loops.h), so dispatch costs one indirect call per step per tile and
// intermediates never touch memory. Operands that are contiguous in the loop's order and
// already of the right dtype are read in place, and materialized results are written straight
// into their output buffers. Hot programs switch to a run-time compiled loop (jit.h).
//
// One job per file:
//   tile_program.cc    the program from the lazy form: steps, loops, in-place candidates
//   tile_registers.cc  scratch register allocation
//   tile_bind.cc       binding a run's operands and outputs (prepare, rebind)
//   tile_loop.h        the tile loop (run_chunk)
//   tile_run.cc        whole and row-blocked runs
//   tile_reduce.cc     the fused reduction
//   tile_jit.cc        the hand-off to the run-time compiler
// Internal to the CPU backend.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/ew_dispatch.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/tile_io.h"
#include "lazy/ew_form.h"

namespace sloth::cpu {

// Elements per tile (SLOTH_TILE); scratch registers are kRegStride bytes apart; operands are
// prefetched kPrefetchTiles tiles ahead (SLOTH_PREFETCH_TILES); runs whose outputs total at
// least kStreamBytes are written with streaming stores (SLOTH_STREAM_MB). tile_program.cc says
// why each is what it is.
extern const int64_t kTile;
extern const int64_t kRegStride;
extern const int64_t kPrefetchTiles;
extern const int64_t kStreamBytes;

// This thread's scratch registers: at least `bytes`, 64-byte aligned (tile_registers.cc).
char* scratch_registers(size_t bytes);

class TileProgram final : public ElementwiseProgram {
 public:
  TileProgram(const Plan& plan, const std::vector<int32_t>& instrs,
              const std::vector<int32_t>& materialize, const ProgramOptions& opt);

  absl::Status run(Env& env) const override;
  const Shape& loop_shape() const override { return shape_; }
  bool row_blockable() const override;
  absl::Status begin_rows(Env& env) const override;
  void run_rows(int64_t r0, int64_t r1) const override;
  void make_hot() const override;
  std::unique_ptr<ElementwiseProgram> resized(const Shape& shape,
                                              const Instr* reduce) const override;
  bool frozen_ready(uint64_t layout_gen) const override;
  void frozen_io(std::vector<int32_t>* reads, std::vector<int32_t>* outs,
                 std::vector<std::vector<int32_t>>* donors) const override;
  void run_frozen(Env& env, char* const* slot_ptr) const override;
  bool compiled_call(CompiledCall* call) const override;
  CompiledFn compiled_fn() const override { return n_ > 0 ? jit_fn(n_) : nullptr; }

 private:
  TileProgram(const TileProgram& o, const Shape& shape, const Instr* reduce);  // resized()
  using TileFn = void (*)(void* const*, int64_t);  // a run-time compiled tile kernel (jit.h)
  struct Val {
    DType dtype;
    int reg = -1;  // scratch register, when not in memory
    int out = -1;  // index into outs_: written straight to that output buffer
  };
  struct Ext {     // operand from memory, read as `dtype` into value `val`
    int slot;
    DType dtype;
    int val;
  };
  struct Const {   // operand from a scalar slot: one value broadcast over the tile
    int slot;
    int val;
  };
  struct Out {
    int slot;
    int val;
  };
  enum class Kind : uint8_t { kLoad, kConvert, kOp };
  struct Step {
    Kind kind;
    int out;
    int in[3] = {-1, -1, -1};
    int ext = -1;
    ew::OpFn fn = nullptr;
    ew::ConvFn conv = nullptr;
  };
  struct Bound {
    tile::LoadArgs args;
    bool linear = false, direct = false;
    bool splat = false;  // one element broadcast over the loop (every stride 0)
    // > 0: the operand repeats with this period along the loop (every stride but the
    // innermost dim's is 0: a bias broadcast over rows) and kTile is a multiple of it, so
    // every tile starting at a multiple of it holds the same elements.
    int64_t period = 0;
    size_t src_size = 0;
    tile::LoadFn load = nullptr;
    ew::ConvFn conv = nullptr;
  };
  // What a run binds: the coalesced loop space and how each operand is read. It depends only
  // on the operands' dtypes, shapes and strides (fixed per plan in practice), so it is
  // computed on the first run and recomputed only when a layout changes.
  struct Bind {
    bool valid = false;
    uint64_t gen = 0;  // Env::layout_gen of the last run whose layouts matched the keys
    // Inline Dims, not vectors: a plan's first run rebinds every program (a heap block per
    // operand per vector was a third of the mallocs of planning a model-sized graph).
    std::vector<DType> key_dtype;
    std::vector<Dims> key_shape;
    std::vector<Dims> key_strides;
    Dims geo;
    std::vector<Dims> st;
    std::vector<Bound> bound;  // args.base set per run
    std::vector<double> cv;
    std::vector<char*> outp;
    std::vector<char> donated;
    bool any_donated = false;      // some entry of donated / donor_ptr is set
    std::vector<char*> donor_ptr;  // per operand: its data when its buffer was donated
    // Donation candidates under layout generation cand_gen (prepare): for output o, indices
    // into donors_ cand[cand_begin[o] .. cand_begin[o + 1]).
    std::vector<int32_t> cand, cand_begin;
    uint64_t cand_gen = 0;
    TileFn jit = nullptr;      // the compiled tile kernel for this run, if ready
    char* red_out = nullptr;   // the fused reduction's output
  };
  struct NoSink {
    void operator()(const void*, int64_t, int64_t) {}
  };
  struct Donor {
    int ext;
    int last_read;  // last step reading the operand's loaded value
  };

  // tile_bind.cc
  absl::Status prepare(Env& env, Bind& b, bool donate = true) const;
  void rebind(Env& env, Bind& b) const;
  // tile_reduce.cc
  absl::Status run_reduce(int64_t n, const Bind& b, int64_t row_lo, int64_t row_hi) const;
  template <typename T, typename O, typename Acc>
  void reduce_as(int64_t n, int64_t kn, int64_t rn, const Bind& b, O* o, int64_t row_lo,
                 int64_t row_hi) const;
  // tile_loop.h
  template <typename SinkF>
  void run_chunk(int64_t begin, int64_t end, const Bind& b, SinkF* sink, TileFn jit) const;
  // tile_program.cc
  void build_core(const lazy::EwForm& form, std::string_view key);
  // tile_registers.cc
  void allocate_registers();
  // tile_jit.cc
  TileFn jit_fn(int64_t n) const;
  void request_jit() const;

  bool is_const_val(int v) const { return v >= 0 && is_const(v); }
  bool is_const(int v) const { return v < static_cast<int>(const_val_.size()) && const_val_[v]; }

  // What depends on neither the loop's sizes nor the plan's slots: the program of a form
  // (values, steps, loops, registers). Built once per form and shared by every program of that
  // form (a model's repeated blocks, an automatic flush's equal chain segments: thousands of
  // programs, a handful of forms) and with the copies resized for other sizes (dynamic
  // shapes: a plan instantiated for many sizes keeps one copy of it, which stays in cache
  // while the sizes change from step to step). Immutable once built.
  struct Core {
    int sink = -1;                 // value reduced by red_
    std::vector<int> def_step;     // value -> defining step (-1: none)
    std::vector<char> const_val;   // value -> is a constant (a bound scalar)
    std::vector<int> out_def;      // per output: its defining step
    std::vector<size_t> out_es;    // per output: element size
    std::vector<Val> vals;
    std::vector<Step> steps;
    int num_regs = 0;
    std::vector<int> load_steps;   // the kLoad steps, in order
    std::vector<int> interp_regs, jit_regs;  // value -> scratch register (-1: none)
    int num_jit_regs = 0;
    int64_t compute_steps = 0;     // kOp and kConvert steps
    std::string error;
    std::shared_ptr<jit::Slot> jit;  // the form's compile (jit::shared_slot)
  };
  // The form of a program and its core, found before the program is built (tile_program.cc):
  // `core` is null when no program of this form was built before (the constructor builds it).
  struct Prepared {
    std::shared_ptr<lazy::EwForm> form;
    std::shared_ptr<Core> core;
    std::string_view key;  // the form's key (jit::tile_kernel_key); empty for a form with an error
  };
  static Prepared prepare_form(const Plan& plan, const std::vector<int32_t>& instrs,
                               const std::vector<int32_t>& materialize, const ProgramOptions& opt);
  TileProgram(Prepared p, const ProgramOptions& opt);
  std::shared_ptr<Core> core_;
  // The core's fields under their old names (the constructor fills them, the rest reads).
  int& sink_ = core_->sink;
  std::vector<int>& def_step_ = core_->def_step;
  std::vector<char>& const_val_ = core_->const_val;
  std::vector<int>& out_def_ = core_->out_def;
  std::vector<size_t>& out_es_ = core_->out_es;
  std::vector<Val>& vals_ = core_->vals;
  std::vector<Step>& steps_ = core_->steps;
  int& num_regs_ = core_->num_regs;
  std::vector<int>& load_steps_ = core_->load_steps;
  std::vector<int>& interp_regs_ = core_->interp_regs;
  std::vector<int>& jit_regs_ = core_->jit_regs;
  int& num_jit_regs_ = core_->num_jit_regs;
  int64_t& compute_steps_ = core_->compute_steps;
  std::string& error_ = core_->error;
  // Per program: where its operands, scalars and outputs live in the plan (the same lists for
  // every program of a form but for the slots), and which operands may be overwritten.
  std::vector<Ext> exts_;
  std::vector<Const> consts_;
  std::vector<Out> outs_;
  std::vector<Donor> donors_;
  // Per size.
  std::shared_ptr<const lazy::EwForm> form_;  // what the run-time compiler prints
  Shape shape_;
  Instr red_{};        // fused reduction (sink_ >= 0)
  int64_t n_ = 0;                // numel(shape_)
  int64_t out_bytes_ = 0;        // all outputs together
  mutable Bind bind_;
  std::shared_ptr<jit::Slot> jit_;  // null when SLOTH_JIT=off or the program cannot run
  mutable std::atomic<int64_t> runs_{0};
};

}  // namespace sloth::cpu
