// DeviceData: a materialized value, i.e. a Storage plus the layout through which it is read.
// Views of materialized data are DeviceData over the same Storage (offset + strides).
#pragma once

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"
#include "core/view_layout.h"

namespace sloth::lazy {

struct DeviceData {
  StoragePtr storage;
  Layout layout;
  DType dtype = DType::kFloat32;

  const Shape& shape() const { return layout.shape; }
  int64_t numel() const { return sloth::numel(layout.shape); }
  bool is_contiguous() const { return sloth::is_contiguous(layout.shape, layout.strides); }
  template <typename T> T* data() const {
    return static_cast<T*>(storage->data()) + layout.offset;
  }
  void* raw() const {
    return static_cast<char*>(storage->data()) + layout.offset * dtype_size(dtype);
  }
};

// dst = src for the short dim vectors of layouts, without a call to memmove when the sizes
// already agree (replays copy the same few dims thousands of times).
// Inlined into the replay loops (dozens of calls per replay); a size change goes out of line.
[[gnu::noinline]] inline void assign_dims_resized(std::vector<int64_t>& dst, IntSpan src) {
  dst.assign(src.begin(), src.end());
}
[[gnu::always_inline]] inline void assign_dims(std::vector<int64_t>& dst, IntSpan src) {
  const size_t n = src.size();
  if (dst.size() != n) [[unlikely]] {
    assign_dims_resized(dst, src);
    return;
  }
  int64_t* d = dst.data();
  for (size_t k = 0; k < n; ++k) d[k] = src[k];
}
// dst = src (storage shared), keeping dst's layout vectors' capacity.
inline void assign_data(DeviceData& dst, const DeviceData& src) {
  dst.storage = src.storage;
  assign_dims(dst.layout.shape, src.layout.shape);
  assign_dims(dst.layout.strides, src.layout.strides);
  dst.layout.offset = src.layout.offset;
  dst.dtype = src.dtype;
}
// dst takes src's storage reference (src's storage is left null) and a copy of its layout;
// both keep their layout vectors' capacity, so neither side allocates.
inline void move_data(DeviceData& dst, DeviceData& src) {
  dst.storage = std::move(src.storage);
  assign_dims(dst.layout.shape, src.layout.shape);
  assign_dims(dst.layout.strides, src.layout.strides);
  dst.layout.offset = src.layout.offset;
  dst.dtype = src.dtype;
}
// The same dims (no call for the few dims of a layout).
inline bool same_dims(IntSpan a, IntSpan b) {
  const size_t n = a.size();
  if (b.size() != n) return false;
  for (size_t k = 0; k < n; ++k)
    if (a[k] != b[k]) return false;
  return true;
}

// `d` seen through another layout over the same storage (zero-copy view).
inline DeviceData with_layout(const DeviceData& d, Layout layout) {
  DeviceData v = d;
  v.layout = std::move(layout);
  return v;
}

// A fresh contiguous value from `alloc`.
inline DeviceData allocate_data(Allocator* alloc, IntSpan shape, DType dtype) {
  DeviceData d;
  size_t bytes = std::max<size_t>(sloth::numel(shape) * dtype_size(dtype), 1);
  d.storage = make_ref<Storage>(alloc, bytes);
  d.layout.shape.assign(shape.begin(), shape.end());
  d.layout.strides = contiguous_strides(shape);
  d.dtype = dtype;
  return d;
}

}  // namespace sloth::lazy
