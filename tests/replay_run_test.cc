// The CPU executable run again and again (what sloth::jit's replays do): operand buffers
// donated to outputs (moved, not shared), outputs handed to the caller without a leftover
// reference, donation candidates kept per layout generation and recomputed when a layout
// changes, and owned (donated) inputs. Every run's values are checked against hand-computed
// ones.
#include <cstdint>
#include <vector>

#include "core/op_attrs.h"
#include "core/op_table.h"
#include "core/settings.h"
#include "absl/status/status.h"
#include "core/storage.h"
#include "gtest/gtest.h"
#include "lazy/backend.h"

namespace sloth::lazy {
namespace {

DeviceData make(const Shape& shape, const std::vector<float>& v) {
  DeviceData d = allocate_data(cpu_allocator(), shape, DType::kFloat32);
  for (size_t i = 0; i < v.size(); ++i) d.data<float>()[i] = v[i];
  return d;
}
// A [rows, cols] view of a [cols, rows] buffer holding `rowmajor` transposed.
DeviceData transposed(int64_t rows, int64_t cols, const std::vector<float>& rowmajor) {
  std::vector<float> t(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = rowmajor[i * cols + j];
  DeviceData d = make({cols, rows}, t);
  d.layout.shape = {rows, cols};
  d.layout.strides = {1, rows};
  return d;
}
template <typename T>
std::vector<T> values(const DeviceData& d) {
  std::vector<T> out;
  const Shape& s = d.layout.shape;
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      out.push_back(d.data<T>()[i * d.layout.strides[0] + j * d.layout.strides[1]]);
  return out;
}

struct Builder {
  Plan p;
  int input(DType t, Shape s) {
    p.input_strides.push_back(contiguous_strides(s));
    p.slots.push_back({SlotKind::kInput, t, p.num_inputs++, s});
    return static_cast<int>(p.slots.size()) - 1;
  }
  int scalar(DType t) {
    p.slots.push_back({SlotKind::kScalar, t, p.num_scalars++, {}});
    return static_cast<int>(p.slots.size()) - 1;
  }
  int op(OpId op, std::vector<int> in, Attrs a = {}) {
    std::vector<TensorMeta> metas;
    std::vector<Shape> shapes;  // TensorMeta points at a Shape; slots hold Dims
    shapes.reserve(in.size());
    for (int s : in) shapes.push_back(p.slots[s].shape.to_shape());
    for (int s : in)
      metas.push_back({&shapes[metas.size()], p.slots[s].dtype, p.slots[s].kind == SlotKind::kScalar});
    OutputMeta out;
    EXPECT_TRUE(infer(op, metas, a, &out).ok());
    p.slots.push_back({SlotKind::kValue, out.dtype, 0, out.shape});
    const int slot = static_cast<int>(p.slots.size()) - 1;
    Instr ins{op, out.dtype, out.shape, a, {}, slot};
    for (int s : in) ins.in.push_back(s);
    p.instrs.push_back(ins);
    return slot;
  }
  void kernel(std::vector<int> slots, std::vector<int> outputs) {
    Kernel k;
    k.kind = KernelKind::kElementwise;
    for (int s : slots)
      for (size_t i = 0; i < p.instrs.size(); ++i)
        if (p.instrs[i].out == s) k.instrs.push_back(static_cast<int32_t>(i));
    k.outputs.assign(outputs.begin(), outputs.end());
    p.kernels.push_back(k);
  }
};

// p' = p - lr * (2 g) as an optimizer would write it, in three kernels: t = g * 2 (a dead
// intermediate after kernel 2), u = t + p and w = float64(t) (kernel 2: t and p are dead, so
// u may take either buffer; t is read as two dtypes), v = u * lr (kernel 3, u dead unless an
// output). Outputs: w, v.
struct UpdatePlan {
  static constexpr int64_t R = 4, C = 8;
  Builder b;
  int p, g, lr, t, u, w, v;
  std::unique_ptr<Executable> exe;
  UpdatePlan() {
    p = b.input(DType::kFloat32, {R, C});
    g = b.input(DType::kFloat32, {R, C});
    lr = b.scalar(DType::kFloat32);
    const int two = b.scalar(DType::kFloat32);
    t = b.op(OpId::kMul, {g, two});
    u = b.op(OpId::kAdd, {t, p});
    Attrs f64;
    f64.dtype = DType::kFloat64;
    w = b.op(OpId::kCast, {t}, f64);
    v = b.op(OpId::kMul, {u, lr});
    b.kernel({t}, {t});
    b.kernel({u, w}, {u, w});
    b.kernel({v}, {v});
    b.p.outputs = {w, v};
    b.p.free_after.assign(b.p.kernels.size(), {});
    exe = backend_for(Device::cpu())->compile(b.p);
  }
};

std::vector<float> seq(int64_t n, float start, float step) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

void check(const std::vector<DeviceData>& out, const std::vector<float>& pv,
           const std::vector<float>& gv, float lr) {
  ASSERT_EQ(out.size(), 2u);
  const auto w = values<double>(out[0]);
  const auto v = values<float>(out[1]);
  ASSERT_EQ(w.size(), pv.size());
  for (size_t i = 0; i < pv.size(); ++i) {
    const float t = gv[i] * 2.0f;
    ASSERT_EQ(w[i], static_cast<double>(t)) << i;
    ASSERT_EQ(v[i], (t + pv[i]) * lr) << i;
  }
  // The outputs came out of the run with no reference left behind in the executable.
  EXPECT_EQ(out[0].storage->use_count(), 1);
  EXPECT_EQ(out[1].storage->use_count(), 1);
  EXPECT_NE(out[0].storage, out[1].storage);
}

// Turns frozen runs (backends/cpu/frozen_run.h) on or off for one test: the donation rules of
// the normal path are checked with them off (a frozen run keeps intermediates in its arena).
class FrozenRuns {
 public:
  explicit FrozenRuns(bool on) : saved_(settings_for_test().frozen_runs) {
    settings_for_test().frozen_runs = on;
  }
  ~FrozenRuns() { settings_for_test().frozen_runs = saved_; }

 private:
  bool saved_;
};

TEST(ReplayRun, RepeatedRunsSharedAndOwnedInputs) {
  FrozenRuns normal_path(false);
  UpdatePlan up;
  const int64_t n = UpdatePlan::R * UpdatePlan::C;
  std::vector<DeviceData> out;
  for (int run = 0; run < 6; ++run) {
    const std::vector<float> pv = seq(n, -1.5f + run, 0.25f), gv = seq(n, 3.0f - run, -0.125f);
    const float lr = 0.5f + 0.25f * static_cast<float>(run);
    RunStats st;
    if (run % 2 == 0) {
      // Shared inputs: the caller keeps them, so they are never donated.
      std::vector<DeviceData> in = {make({4, 8}, pv), make({4, 8}, gv)};
      ASSERT_TRUE(up.exe->run(in, {lr, 2.0}, &out, &st).ok());
      check(out, pv, gv, lr);
      // The inputs are unchanged and the run holds no reference to them any more.
      EXPECT_EQ(values<float>(in[0]), pv);
      EXPECT_EQ(values<float>(in[1]), gv);
      EXPECT_EQ(in[0].storage->use_count(), 1);
    } else {
      // Owned inputs (sloth::jit's donating replays): p's buffer may become u's.
      std::vector<DeviceData> in = {make({4, 8}, pv), make({4, 8}, gv)};
      ASSERT_TRUE(up.exe->run_donating(absl::MakeSpan(in), {lr, 2.0}, &out, &st).ok());
      check(out, pv, gv, lr);
    }
    EXPECT_EQ(st.kernels_launched, 3);
    // Shared inputs: t, u (t is read again by w's cast after u is defined, so it cannot
    // give its buffer to u) and w are new buffers, v takes u's: 128 + 128 + 256 bytes.
    // Owned inputs: t takes g's buffer and u takes p's, so only w is new: 256 bytes.
    // (Without donation: 640 bytes.)
    EXPECT_EQ(st.bytes_allocated, run % 2 == 0 ? 512 : 256);
  }
}

// The same plan with frozen runs on: the first run binds every kernel, every later one
// (same layouts) replays the frozen list. t and u live in the frozen run's arena, so only the
// outputs take buffers: w (256 bytes) and v (128: its only dead operand, u, is an arena
// value). Values are exact and the outputs hold no reference left in the executable either
// way, shared or owned inputs.
TEST(ReplayRun, FrozenRunsAllocateOnlyTheirOutputs) {
  FrozenRuns frozen(true);
  UpdatePlan up;
  const int64_t n = UpdatePlan::R * UpdatePlan::C;
  std::vector<DeviceData> out;
  for (int run = 0; run < 6; ++run) {
    const std::vector<float> pv = seq(n, 2.0f - run, 0.5f), gv = seq(n, -1.0f + run, 0.25f);
    const float lr = 0.25f * static_cast<float>(run + 1);
    std::vector<DeviceData> in = {make({4, 8}, pv), make({4, 8}, gv)};
    RunStats st;
    if (run % 2 == 0) {
      ASSERT_TRUE(up.exe->run(in, {lr, 2.0}, &out, &st).ok());
      EXPECT_EQ(values<float>(in[0]), pv);  // shared inputs are never written
      EXPECT_EQ(values<float>(in[1]), gv);
      EXPECT_EQ(in[0].storage->use_count(), 1);
    } else {
      ASSERT_TRUE(up.exe->run_donating(absl::MakeSpan(in), {lr, 2.0}, &out, &st).ok());
    }
    check(out, pv, gv, lr);
    EXPECT_EQ(st.kernels_launched, 3);
    EXPECT_EQ(st.bytes_allocated, run == 0 ? 512 : 384) << "run " << run;
  }
}

// A frozen run writes an output into a dead input's buffer when the normal run would (an
// owned input nothing else holds: a parameter updated in place), and not while a view of that
// input is still to be read (out2 = permute(p) * 3 after the update) or when the caller still
// holds the input (shared inputs). g is broadcast over rows, so p is the only candidate.
TEST(ReplayRun, FrozenRunsWriteInPlaceOnlyIntoDeadUnsharedInputs) {
  FrozenRuns frozen(true);
  constexpr int64_t R = 4, C = 8, n = R * C;
  for (bool view_read_late : {false, true}) {
    Builder b;
    const int p = b.input(DType::kFloat32, {R, C});
    const int g = b.input(DType::kFloat32, {1, C});  // broadcast: never a donor
    const int lr = b.scalar(DType::kFloat32);
    const int three = b.scalar(DType::kFloat32);
    Attrs perm;
    perm.dims = {1, 0};
    const int pt = b.op(OpId::kPermute, {p}, perm);
    const int step = b.op(OpId::kMul, {g, lr});
    const int p2 = b.op(OpId::kSub, {p, step});
    if (view_read_late) {
      b.kernel({pt}, {pt});
      b.p.kernels.back().kind = KernelKind::kView;
    }
    b.kernel({step, p2}, {p2});
    int out2 = -1;
    if (view_read_late) {
      out2 = b.op(OpId::kMul, {pt, three});
      b.kernel({out2}, {out2});
      b.p.outputs = {p2, out2};
    } else {
      b.p.outputs = {p2};
    }
    b.p.free_after.assign(b.p.kernels.size(), {});
    std::unique_ptr<Executable> exe = backend_for(Device::cpu())->compile(b.p);
    std::vector<DeviceData> out;
    for (int run = 0; run < 5; ++run) {
      const std::vector<float> pv = seq(n, 1.0f + run, 0.5f), gv = seq(C, -2.0f, 0.125f * (run + 1));
      const float lrv = 0.5f / static_cast<float>(run + 1);
      std::vector<DeviceData> in = {make({R, C}, pv), make({1, C}, gv)};
      const Storage* p_buffer = in[0].storage.get();
      RunStats st;
      const bool shared = run == 3;
      if (shared) ASSERT_TRUE(exe->run(in, {lrv, 3.0}, &out, &st).ok());
      else ASSERT_TRUE(exe->run_donating(absl::MakeSpan(in), {lrv, 3.0}, &out, &st).ok());
      ASSERT_EQ(out.size(), view_read_late ? 2u : 1u);
      const std::vector<float> pn = values<float>(out[0]);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(pn[i], pv[i] - gv[i % C] * lrv) << run << " " << i;
      if (view_read_late) {
        const std::vector<float> o2 = values<float>(out[1]);
        for (int64_t j = 0; j < C; ++j)
          for (int64_t i = 0; i < R; ++i)
            ASSERT_EQ(o2[j * R + i], pv[i * C + j] * 3.0f) << run << " " << j << "," << i;
      }
      // In place: only owned inputs with no view read after the update.
      const bool in_place = !shared && !view_read_late;
      EXPECT_EQ(out[0].storage.get() == p_buffer, in_place) << "run " << run;
      if (shared) EXPECT_EQ(values<float>(in[0]), pv);
    }
  }
}

// Steps a frozen run has no bound form for run through the slot table: y = index_select(x * 2,
// i) reads an arena value (x * 2) and an input; z = y + 1 reads its result. Both are outputs.
// An out-of-range index fails the run with the kernel's error (the run stops, nothing is
// left held), and the next run is right again.
TEST(ReplayRun, FrozenRunsRunIndexStepsThroughTheSlotTable) {
  FrozenRuns frozen(true);
  constexpr int64_t R = 5, C = 3;
  Builder b;
  const int x = b.input(DType::kFloat32, {R, C});
  const int i = b.input(DType::kInt64, {2});
  const int two = b.scalar(DType::kFloat32);
  const int one = b.scalar(DType::kFloat32);
  const int t = b.op(OpId::kMul, {x, two});
  const int y = b.op(OpId::kIndexSelect, {t, i}, DimAttrs{.dim = 0});
  const int z = b.op(OpId::kAdd, {y, one});
  b.kernel({t}, {t});
  b.kernel({y}, {y});
  b.p.kernels.back().kind = KernelKind::kOther;
  b.kernel({z}, {z});
  b.p.outputs = {y, z};
  b.p.free_after.assign(b.p.kernels.size(), {});
  std::unique_ptr<Executable> exe = backend_for(Device::cpu())->compile(b.p);
  std::vector<DeviceData> out;
  for (int run = 0; run < 6; ++run) {
    const std::vector<float> xv = seq(R * C, 0.5f * run, 1.0f);
    const std::vector<int64_t> iv = run == 3 ? std::vector<int64_t>{1, 9}
                                             : std::vector<int64_t>{run % R, (run + 2) % R};
    DeviceData idx = allocate_data(cpu_allocator(), {2}, DType::kInt64);
    idx.data<int64_t>()[0] = iv[0];
    idx.data<int64_t>()[1] = iv[1];
    std::vector<DeviceData> in = {make({R, C}, xv), idx};
    RunStats st;
    absl::Status s = exe->run(in, {2.0, 1.0}, &out, &st);
    if (run == 3) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(std::string(s.message()).find("index 9 is out of range"), std::string::npos) << s;
      EXPECT_EQ(in[0].storage->use_count(), 1);  // the failed run holds nothing
      continue;
    }
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(out.size(), 2u);
    const std::vector<float> yv = values<float>(out[0]), zv = values<float>(out[1]);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < C; ++c) {
        ASSERT_EQ(yv[r * C + c], 2.0f * xv[iv[r] * C + c]) << run;
        ASSERT_EQ(zv[r * C + c], 2.0f * xv[iv[r] * C + c] + 1.0f) << run;
      }
    EXPECT_EQ(out[0].storage->use_count(), 1);
    EXPECT_EQ(out[1].storage->use_count(), 1);
    EXPECT_EQ(in[0].storage->use_count(), 1);
  }
}

TEST(ReplayRun, LayoutChangeRecomputesDonationCandidates) {
  // A transposed g changes the layout generation: t's candidates are found again, and a
  // later contiguous run finds the original ones again. Values are exact each time.
  UpdatePlan up;
  const int64_t R = UpdatePlan::R, C = UpdatePlan::C, n = R * C;
  std::vector<DeviceData> out;
  for (int run = 0; run < 6; ++run) {
    const std::vector<float> pv = seq(n, 0.75f * run, -0.5f), gv = seq(n, -2.0f + run, 0.375f);
    const float lr = 1.0f / static_cast<float>(run + 1);
    std::vector<DeviceData> in = {make({R, C}, pv),
                                  run % 3 == 1 ? transposed(R, C, gv) : make({R, C}, gv)};
    RunStats st;
    ASSERT_TRUE(up.exe->run_donating(absl::MakeSpan(in), {lr, 2.0}, &out, &st).ok());
    check(out, pv, gv, lr);
  }
}

// A view step replayed: z = permute(x) * 2 with x bound at a different offset into a larger
// buffer on some runs (same shape and strides, so the same layout generation) and transposed
// on others (a new generation). The view's cached output layout must follow the offset, and a
// generation change must recompute it; every run's values are checked.
TEST(ReplayRun, ViewStepsFollowOffsetsAndLayoutChanges) {
  constexpr int64_t R = 4, C = 8, n = R * C;
  Builder b;
  const int x = b.input(DType::kFloat32, {R, C});
  const int two = b.scalar(DType::kFloat32);
  Attrs perm;
  perm.dims = {1, 0};
  const int y = b.op(OpId::kPermute, {x}, perm);
  const int z = b.op(OpId::kMul, {y, two});
  b.kernel({y}, {y});
  b.p.kernels.back().kind = KernelKind::kView;
  b.kernel({z}, {z});
  b.p.outputs = {z};
  b.p.free_after.assign(b.p.kernels.size(), {});
  std::unique_ptr<Executable> exe = backend_for(Device::cpu())->compile(b.p);
  std::vector<DeviceData> out;
  for (int run = 0; run < 8; ++run) {
    const std::vector<float> xv = seq(n, 1.0f + 3.0f * static_cast<float>(run), 0.5f);
    DeviceData in;
    if (run % 4 == 3) {
      in = transposed(R, C, xv);  // x's strides change: a new layout generation
    } else {
      // x at offset `off` into a buffer of 3n floats (offset 0 on the first runs).
      const int64_t off = run < 2 ? 0 : (run % 2 == 0 ? 5 : 17);
      std::vector<float> buf(3 * n, -100.0f);
      for (int64_t i = 0; i < n; ++i) buf[off + i] = xv[i];
      in = make({3 * n}, buf);
      in.layout.shape = {R, C};
      in.layout.strides = {C, 1};
      in.layout.offset = off;
    }
    std::vector<DeviceData> ins = {in};
    RunStats st;
    ASSERT_TRUE(exe->run(ins, {2.0}, &out, &st).ok());
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].layout.shape, (Shape{C, R}));
    const std::vector<float> zv = values<float>(out[0]);
    for (int64_t j = 0; j < C; ++j)
      for (int64_t i = 0; i < R; ++i)
        ASSERT_EQ(zv[j * R + i], 2.0f * xv[i * C + j]) << "run " << run << " at " << j << "," << i;
  }
}

}  // namespace
}  // namespace sloth::lazy
