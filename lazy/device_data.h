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

// `d` seen through another layout over the same storage (zero-copy view).
inline DeviceData with_layout(const DeviceData& d, Layout layout) {
  DeviceData v = d;
  v.layout = std::move(layout);
  return v;
}

// A fresh contiguous value from `alloc`.
inline DeviceData allocate_data(Allocator* alloc, const Shape& shape, DType dtype) {
  DeviceData d;
  size_t bytes = std::max<size_t>(sloth::numel(shape) * dtype_size(dtype), 1);
  d.storage = make_ref<Storage>(alloc, bytes);
  d.layout.shape = shape;
  d.layout.strides = contiguous_strides(shape);
  d.dtype = dtype;
  return d;
}

}  // namespace sloth::lazy
