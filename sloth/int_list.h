// LibTorch's integer-list parameter types, so ported calls pass what LibTorch accepts:
//  - IntArrayRef: a size list parameter that takes one number (max_pool2d(x, 3): c10's
//    ArrayRef has a one-element constructor), a braced list, a Shape or an ExpandingArray.
//    Unlike c10::IntArrayRef it owns its values (sloth records lazily; a view of a temporary
//    would dangle).
//  - SizesRef: what Tensor::sizes() returns. A view of the tensor's sizes, as c10's
//    IntArrayRef is, so that LibTorch code works unchanged: t.sizes().vec(), .size(), [i],
//    front/back, begin()/end() (of two sizes() calls too), ==, .equals({...}) and printing;
//    it converts to a const Shape& without a copy. Valid while the tensor lives and keeps
//    its shape (as in LibTorch); .vec() copies.
//  - ExpandingArray<D>: D sizes given as one value for all or D values
//    (torch::ExpandingArray<2>({2, 2}), ExpandingArray<2>(3)); converts to a Shape and an
//    IntArrayRef.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace sloth {

template <size_t D>
class ExpandingArray {
 public:
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  ExpandingArray(I v) {  // NOLINT: implicit, as LibTorch
    values_.fill(static_cast<int64_t>(v));
  }
  ExpandingArray(std::initializer_list<int64_t> l) {  // NOLINT
    if (l.size() != D)
      fail("ExpandingArray<%d>: expected %d values, got %d", D, D, l.size());
    std::copy(l.begin(), l.end(), values_.begin());
  }
  ExpandingArray(const Shape& v) {  // NOLINT
    if (v.size() != D) fail("ExpandingArray<%d>: expected %d values, got %d", D, D, v.size());
    std::copy(v.begin(), v.end(), values_.begin());
  }
  int64_t operator[](size_t i) const { return values_[i]; }
  int64_t& operator[](size_t i) { return values_[i]; }
  static constexpr size_t size() { return D; }
  const int64_t* data() const { return values_.data(); }
  const int64_t* begin() const { return values_.data(); }
  const int64_t* end() const { return values_.data() + D; }
  operator Shape() const { return Shape(values_.begin(), values_.end()); }  // NOLINT
  // LibTorch's operator* gives the underlying std::array.
  const std::array<int64_t, D>& operator*() const { return values_; }

 private:
  std::array<int64_t, D> values_{};
};

class SizesRef {
 public:
  explicit SizesRef(const Shape& s) : s_(&s) {}
  operator const Shape&() const { return *s_; }  // NOLINT: implicit, where a Shape is taken
  Shape vec() const { return *s_; }
  size_t size() const { return s_->size(); }
  bool empty() const { return s_->empty(); }
  int64_t operator[](size_t i) const { return (*s_)[i]; }
  // c10's bounds-checked element access.
  int64_t at(size_t i) const {
    if (i >= s_->size()) fail("sizes().at(%d): out of range for a tensor with %d dims", i, s_->size());
    return (*s_)[i];
  }
  int64_t front() const { return at(0); }
  int64_t back() const { return at(s_->size() - 1); }
  const int64_t* data() const { return s_->data(); }
  auto begin() const { return s_->begin(); }
  auto end() const { return s_->end(); }
  bool equals(const Shape& o) const { return *s_ == o; }
  friend bool operator==(const SizesRef& a, const SizesRef& b) { return *a.s_ == *b.s_; }
  friend bool operator==(const SizesRef& a, const Shape& b) { return *a.s_ == b; }

 private:
  const Shape* s_;
};

// "[2, 3]", as c10 prints an IntArrayRef.
std::ostream& operator<<(std::ostream& os, const SizesRef& v);

class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(SizesRef v) : v_(v.vec()) {}                     // NOLINT
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  IntArrayRef(I v) : v_{static_cast<int64_t>(v)} {}          // NOLINT: implicit, as c10
  IntArrayRef(std::initializer_list<int64_t> l) : v_(l) {}   // NOLINT
  IntArrayRef(Shape v) : v_(std::move(v)) {}                  // NOLINT
  template <size_t D>
  IntArrayRef(const ExpandingArray<D>& a) : v_(a.begin(), a.end()) {}  // NOLINT
  operator const Shape&() const { return v_; }  // NOLINT
  const Shape& vec() const { return v_; }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  int64_t operator[](size_t i) const { return v_[i]; }
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }

 private:
  Shape v_;
};

}  // namespace sloth
