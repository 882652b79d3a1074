// Internal to the CPU backend: the per-run state every kernel reads and writes, and the
// kernel entry points cpu_backend.cc dispatches to.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/storage.h"
#include "lazy/backend.h"
#include "lazy/plan.h"
#include "lazy/structural.h"

namespace sloth::cpu {

using lazy::DeviceData;
using lazy::Instr;
using lazy::Plan;

// Slot values of one run. A slot holds a DeviceData once it is bound (inputs), computed, or
// asked for (a scalar slot read by a kernel that wants memory).
// A result still being written by someone else after its kernel returned: a non-blocking
// collective (backends/cpu/collectives.cc) that moves data while later steps compute. The
// executor polls it between steps (MPI moves data only inside MPI calls), finishes it before
// any step reads one of its slots (a cached view of it joins its slots instead: a view reads
// no data), and finishes every pending one before the run returns, failed or not.
struct PendingWrite {
  virtual ~PendingWrite() = default;
  virtual void poll() = 0;
  // Waits for the data; an error fails the run.
  virtual absl::Status finish() = 0;
};
struct Pending {
  std::vector<int32_t> slots;  // the result and views of it
  std::unique_ptr<PendingWrite> write;
};

// An executable's private pool of small buffers: what a run released is kept for the next
// run of the same executable, so a replayed step (the same shapes every time) takes no
// buffer from the shared allocator (no lock, no Storage object allocated). Exact byte sizes
// match; buffers above kMaxBuffer, and beyond kBudget bytes in all, go back to the
// allocator, so big graphs keep sharing memory across executables.
class BufferPool {
 public:
  static constexpr size_t kMaxBuffer = size_t{64} << 10;
  static constexpr size_t kBudget = size_t{1} << 20;
  // A buffer of exactly `bytes`, or null.
  StoragePtr take(size_t bytes) {
    for (size_t i = free_.size(); i-- > 0;)
      if (sizes_[i] == bytes) {  // sizes kept inline: no Storage touched while searching
        StoragePtr s = std::move(free_[i]);
        if (i + 1 != free_.size()) {
          free_[i] = std::move(free_.back());
          sizes_[i] = sizes_.back();
        }
        free_.pop_back();
        sizes_.pop_back();
        held_ -= bytes;
        return s;
      }
    return nullptr;
  }
  // Keeps `s` (and resets it) when nothing else references it and it fits; else just resets.
  void give(StoragePtr& s) {
    if (s && s->use_count() == 1 && !s->external() && s->device().is_cpu() &&
        s->bytes() <= kMaxBuffer && held_ + s->bytes() <= kBudget) {
      held_ += s->bytes();
      sizes_.push_back(s->bytes());
      free_.push_back(std::move(s));
    }
    s.reset();
  }
  size_t held_bytes() const { return held_; }

 private:
  std::vector<StoragePtr> free_;
  std::vector<size_t> sizes_;  // free_[i]->bytes()
  size_t held_ = 0;
};

struct Env {
  const Plan* plan = nullptr;
  // The executable's pool (see BufferPool), or null (a concurrent run of one executable).
  BufferPool* pool = nullptr;
  // ---- distributed ----
  std::vector<Pending> pending;  // in start order
  absl::Span<const double> scalars;
  std::vector<DeviceData> vals;  // storage == nullptr: not available
  lazy::RunStats* stats = nullptr;
  // Slot layouts are a function of the plan and its inputs' dtypes, shapes and strides: two
  // runs with the same `layout_gen` (non-zero) see every slot with the same dtype, shape and
  // strides, so a program's operand binding made in one holds in the other (only the data
  // pointers change). 0: unknown (a concurrent run's own table). Set by the executable.
  uint64_t layout_gen = 0;
  // The executable whose run last used this table (its input slots' layouts are that run's).
  const void* last_run_by = nullptr;
  // The run holds its executable's run state (busy flag): the programs' own per-run state
  // (TileProgram::bind_) is used by no other run, so they skip their own busy flag.
  bool exclusive = false;
  // Runs of compiled elementwise kernels in this run, added to the global count once at its
  // end (one atomic add per run instead of one per kernel).
  int64_t compiled_runs = 0;
  int64_t direct_calls = 0;  // ... of them, frozen runs' direct calls (compiled_call.h)

  bool has(int slot) const { return vals[slot].storage != nullptr; }
  // Every buffer of the backend comes from here (the caching allocator), so the stats count it.
  DeviceData alloc(IntSpan shape, DType dtype);
  // The same, written straight into slot `slot` (its layout vectors keep their capacity from
  // earlier runs, so steady-state runs allocate nothing but the Storage).
  DeviceData& alloc_to(int slot, IntSpan shape, DType dtype);
  // The slot's data; scalar slots become a 0-dim buffer the first time they are asked for.
  const DeviceData& get(int slot) {
    const DeviceData& d = vals[slot];
    return d.storage ? d : get_slow(slot);
  }
  const DeviceData& get_slow(int slot);
  // The value of a 0-dim operand (scalar slot or data), cast to the slot's dtype, as double.
  double scalar(int slot);
  void set(int slot, DeviceData d) { vals[slot] = std::move(d); }
  // Slot `slot` becomes a view of `src`'s storage with `src`'s layout (copy-assigned: no
  // allocation once the slot's vectors have capacity).
  void set_view(int slot, const DeviceData& src) {
    lazy::assign_data(vals[slot], src);
  }
};

// A bound scalar as a value of `dtype` (what a 0-dim tensor of that dtype would hold).
double cast_scalar(double v, DType dtype);
// Element 0 of `d` as double.
double read_double(const DeviceData& d);

// A fresh contiguous copy of `x` converted to `dtype`.
DeviceData make_contiguous(Env& env, const DeviceData& x, DType dtype);

// A frozen run's direct call of a program's compiled loop (compiled_call.h).
struct CompiledCall;
using CompiledFn = void (*)(void* const*, int64_t);

// A compiled run of elementwise instructions over one loop shape (the tile interpreter).
class ElementwiseProgram {
 public:
  virtual ~ElementwiseProgram() = default;
  virtual absl::Status run(Env& env) const = 0;

  // Row-blocked runs (cpu_backend.cc runs several programs over the same rows block by block,
  // so what one writes is still in cache when the next reads it): the loop space, whether
  // each row of its dim 0 can run on its own (no reduction over dim 0), then begin_rows once
  // per run and run_rows for each block of rows [r0, r1) of dim 0 (any thread).
  virtual const Shape& loop_shape() const = 0;
  virtual bool row_blockable() const = 0;
  virtual absl::Status begin_rows(Env& env) const = 0;
  virtual void run_rows(int64_t r0, int64_t r1) const = 0;
  // The same program over a new loop shape (its plan instantiated for new sizes): `reduce` is
  // the fused reduction's instruction in the new plan (null when none). Everything that does
  // not depend on sizes (steps, registers, the compiled kernel) is shared or copied.
  virtual std::unique_ptr<ElementwiseProgram> resized(const Shape& shape,
                                                      const Instr* reduce) const = 0;
  // The program will run many times (its executable is replayed by sloth::jit): compile it
  // now (in the background) even if a single run is too small to pay for a compile.
  virtual void make_hot() const {}

  // Frozen runs (frozen_run.h). Whether the binding of the program's last run (its operands'
  // read paths, its outputs' donation candidates) holds for runs of layout generation
  // `layout_gen` (Env::layout_gen), so a run may skip binding.
  virtual bool frozen_ready(uint64_t layout_gen) const { return false; }
  // The slots the program reads from memory, the slots it writes and, per written slot, the
  // operand slots whose buffer it may take over (as the last run found them).
  virtual void frozen_io(std::vector<int32_t>* reads, std::vector<int32_t>* outs,
                         std::vector<std::vector<int32_t>>* donors) const {}
  // A run with every operand and output (the fused reduction's too) at slot_ptr[slot]; only
  // the scalars are read from `env`. Needs frozen_ready.
  virtual void run_frozen(Env& env, char* const* slot_ptr) const {}
  // Whether frozen runs of the binding frozen_ready accepted may call the compiled loop
  // directly (`call` says how; its fn is compiled_fn()). compiled_call.h says which programs.
  virtual bool compiled_call(CompiledCall* call) const { return false; }
  // The compiled loop, once compiled (null before, and with SLOTH_JIT=off).
  virtual CompiledFn compiled_fn() const { return nullptr; }
};
struct ProgramOptions {
  // A fused reduction (sum/prod/amax/amin over the trailing dims of its input) whose input is
  // computed by the program: the program runs over the input's shape and reduces on the fly.
  const Instr* reduce = nullptr;
  // Operand slots dead after this program: an output may take over such a buffer (in place)
  // when the layouts match and nothing else references the storage.
  std::vector<int32_t> donatable;
};
// `instrs`: indices into plan.instrs, all elementwise with the same shape (may be empty with
// options.reduce: a reduction reading its input from memory). `materialize`: slots among
// their outputs that must be written to memory.
std::unique_ptr<ElementwiseProgram> compile_elementwise(const Plan& plan,
                                                        const std::vector<int32_t>& instrs,
                                                        const std::vector<int32_t>& materialize,
                                                        const ProgramOptions& options = {});

// Single-instruction kernels; each writes env.vals[in.out].
absl::Status run_reduce(Env& env, const Instr& in);
absl::Status run_matmul(Env& env, const Instr& in);

// The same kernels bound once to their operands' layouts as env.vals holds them (a frozen run,
// frozen_run.h): each later run passes the data pointers only (operands at their offsets, the
// output contiguous). False: a layout or kind the bound form does not take (the kernel then
// runs as above).
struct BoundGemm {  // a plain 2-D float product BLAS (or the small kernel) reads in place
  DType dtype;
  bool ta, tb;
  int64_t m, n, k, lda, ldb;
  // How it runs: decided per call (gemm), the small kernel, or one BLAS call.
  enum Path : uint8_t { kAny, kSmall, kBlas } path = kAny;
};
bool bind_gemm(Env& env, const Instr& in, BoundGemm* g);
void run_gemm(const BoundGemm& g, const char* a, const char* b, char* c);
struct BoundReduce {  // sum, prod, amax or amin (reduce.cc)
  void (*fn)(const void* geometry, const char* x, char* out) = nullptr;
  std::shared_ptr<const void> geometry;
};
bool bind_reduce(Env& env, const Instr& in, BoundReduce* r);
// View, Scatter, Index and Shape categories (structural.cc: lazy/structural.h's rules
// with the index primitives of index.cc).
absl::Status run_structural(Env& env, const Instr& in);
extern const lazy::IndexPrimitives<Env> kIndexPrimitives;
absl::Status run_factory(Env& env, const Instr& in);

}  // namespace sloth::cpu
