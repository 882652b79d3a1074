#include "backends/cuda/run_env.h"

#include "backends/cuda/codegen.h"
#include "backends/cuda/cuda_allocator.h"
#include "backends/cuda/host_staging.h"
#include "backends/cuda/kernel_launch.h"
#include "core/error.h"
#include "core/view_layout.h"

namespace sloth::cuda {

using lazy::SlotKind;

DeviceData RunEnv::alloc(IntSpan shape, DType dtype) {
  DeviceData d = lazy::allocate_data(&caching_allocator(), shape, dtype);
  stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
  return d;
}

const DeviceData& RunEnv::get(int slot) {
  if (!has(slot) && plan->slots[slot].kind == SlotKind::kScalar) {
    const lazy::Slot& s = plan->slots[slot];
    DeviceData d = alloc({}, s.dtype);
    fill(d, cast_scalar(scalars[s.index], s.dtype));
    vals[slot] = std::move(d);
  }
  return vals[slot];
}

double RunEnv::scalar(int slot) {
  const lazy::Slot& s = plan->slots[slot];
  if (s.kind == SlotKind::kScalar) return cast_scalar(scalars[s.index], s.dtype);
  return read_double(get(slot));
}

double cast_scalar(double v, DType dtype) {
  return visit_dtype(dtype, [&](auto z) { return static_cast<double>(convert_to<decltype(z)>(v)); });
}

void fill(const DeviceData& d, double v) {
  const int64_t n = d.numel();
  if (n == 0) return;
  KernelSource ks = factory_source(OpId::kFull, d.dtype);
  ParamWords w;
  w.p(d.raw());
  w.i(n);
  w.d(v);
  w.d(0);
  w.i(0);
  w.i(0);
  launch(ks, w, n);
}

double read_double(const DeviceData& d) {
  double out = 0;
  visit_dtype(d.dtype, [&](auto z) {
    decltype(z) v{};
    host_staging().to_host(d.raw(), &v, sizeof(v));
    out = static_cast<double>(v);
  });
  return out;
}

void copy_into(const DeviceData& dst, const DeviceData& src, bool accumulate) {
  Shape shape = dst.layout.shape;
  const int64_t n = numel(shape);
  if (n == 0) return;
  Strides ds = dst.layout.strides;
  Strides ss = broadcast_strides(src.layout.shape, src.layout.strides, shape);
  coalesce(shape, {&ds, &ss});
  // A runtime helper with no Status to return (the CPU's copy cannot fail): the run entry
  // turns this into the run's error.
  if (absl::Status st = check_rank("copy", shape.size()); !st.ok())
    throw Error(std::string(st.message()));
  KernelSource ks = copy_source(dst.dtype, src.dtype, accumulate);
  ParamWords w;
  w.p(dst.raw());
  w.p(src.raw());
  w.i(n);
  w.i(static_cast<int64_t>(shape.size()));
  w.arr(shape);
  w.arr(ds);
  w.arr(ss);
  launch(ks, w, n);
}

DeviceData make_contiguous(RunEnv& env, const DeviceData& x, DType dtype) {
  DeviceData out = env.alloc(x.layout.shape, dtype);
  copy_into(out, x);
  return out;
}

DeviceData operand_as(RunEnv& env, int slot, DType t) {
  DeviceData d = env.get(slot);
  return d.dtype == t ? d : make_contiguous(env, d, t);
}

}  // namespace sloth::cuda
