// The run's slot table (Env, backends/cpu/kernels.h): buffers for kernel results (from the
// executable's pool when it has one, else the caching allocator) and scalar operands read as
// doubles or materialized as 0-dim tensors.
#include <algorithm>

#include "backends/cpu/kernels.h"
#include "lazy/steps.h"

namespace sloth::cpu {

using lazy::SlotKind;

DeviceData Env::alloc(IntSpan shape, DType dtype) {
  DeviceData d = lazy::allocate_data(cpu_allocator(), shape, dtype);
  stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
  return d;
}

DeviceData& Env::alloc_to(int slot, IntSpan shape, DType dtype) {
  DeviceData& d = vals[slot];
  int64_t ne = 1;
  for (int64_t v : shape) ne *= v;
  const size_t bytes = std::max<size_t>(static_cast<size_t>(ne) * dtype_size(dtype), 1);
  if (pool != nullptr) d.storage = pool->take(bytes);
  if (!d.storage) d.storage = make_ref<Storage>(cpu_allocator(), bytes);
  stats->bytes_allocated += static_cast<int64_t>(d.storage->bytes());
  d.dtype = dtype;
  // The slot usually holds this layout from the last run already (a replay).
  if (d.layout.offset == 0 && lazy::same_dims(d.layout.shape, shape) &&
      d.layout.strides.size() == shape.size()) {
    bool contiguous = true;
    int64_t acc = 1;
    for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0 && contiguous; --i) {
      contiguous = d.layout.strides[i] == acc;
      acc *= std::max<int64_t>(shape[i], 1);
    }
    if (contiguous) return d;
  }
  d.layout.shape.assign(shape.begin(), shape.end());
  d.layout.strides.resize(shape.size());
  contiguous_strides_into(shape, absl::MakeSpan(d.layout.strides));
  d.layout.offset = 0;
  d.dtype = dtype;
  return d;
}

double cast_scalar(double v, DType dtype) {
  return visit_dtype(dtype, [&](auto z) {
    return static_cast<double>(static_cast<decltype(z)>(v));
  });
}

double read_double(const DeviceData& d) {
  return visit_dtype(d.dtype, [&](auto z) { return static_cast<double>(*d.data<decltype(z)>()); });
}

double Env::scalar(int slot) {
  const lazy::Slot& s = plan->slots[slot];
  if (s.kind == SlotKind::kScalar) return cast_scalar(scalars[s.index], s.dtype);
  return read_double(vals[slot]);
}

const DeviceData& Env::get_slow(int slot) {
  if (!has(slot) && plan->slots[slot].kind == SlotKind::kScalar) {
    const lazy::Slot& s = plan->slots[slot];
    DeviceData& d = alloc_to(slot, {}, s.dtype);
    double v = scalars[s.index];
    visit_dtype(s.dtype, [&](auto z) { *d.data<decltype(z)>() = convert_to<decltype(z)>(v); });
  }
  return vals[slot];
}

}  // namespace sloth::cpu
