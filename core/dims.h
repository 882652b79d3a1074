// Dims: a shape stored inline (no heap block for up to kInline dims), for IR nodes.
//
// A recorded op's node holds its result's shape. As a std::vector that is a heap block of its
// own: with 1e5 live results, one more cache line written (a miss) per op, and a pointer load
// before it. Dims keeps up to kInline dims inside the node; longer shapes spill to a heap block
// that the object keeps (a pooled node reuses it).
//
// It reads like a Shape (size, [], begin/end, data, ==) and converts implicitly to IntSpan,
// which most shape helpers take. Converting to a Shape is explicit (to_shape(), or Shape's
// iterator constructor): an implicit conversion would hide a malloc where a `const Shape&`
// is wanted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "core/shape.h"

namespace sloth {

class Dims {
 public:
  static constexpr uint32_t kInline = 4;

  Dims() = default;
  Dims(IntSpan s) { assign(s.begin(), s.end()); }  // NOLINT: implicit, like a Shape
  Dims(const Shape& s) { assign(s.begin(), s.end()); }  // NOLINT
  Dims(std::initializer_list<int64_t> l) { assign(l.begin(), l.end()); }
  Dims(const Dims& o) { assign(o.begin(), o.end()); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Dims& operator=(IntSpan s) {
    assign(s.begin(), s.end());
    return *this;
  }
  Dims& operator=(const Shape& s) {
    assign(s.begin(), s.end());
    return *this;
  }
  ~Dims() {
    if (cap_) delete[] heap_;
  }

  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(last - first);
    int64_t* d = reserve_for(n);
    std::copy(first, last, d);
    size_ = static_cast<uint32_t>(n);
  }
  void resize(size_t n, int64_t value = 0) {
    const size_t old = size_;
    int64_t* d = reserve_keep(n);
    for (size_t i = old; i < n; ++i) d[i] = value;
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    int64_t* d = reserve_keep(size_ + 1u);
    d[size_++] = v;
  }
  void clear() { size_ = 0; }  // keeps a spilled block for the next shape

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return cap_ ? heap_ : inline_; }
  int64_t* data() { return cap_ ? heap_ : inline_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t front() const { return data()[0]; }
  int64_t back() const { return data()[size_ - 1]; }

  IntSpan span() const { return IntSpan(data(), size_); }
  operator IntSpan() const { return span(); }  // NOLINT: implicit, free
  Shape to_shape() const { return Shape(begin(), end()); }

  friend bool operator==(const Dims& a, const Dims& b) { return eq(a, b.data(), b.size()); }
  friend bool operator==(const Dims& a, const Shape& b) { return eq(a, b.data(), b.size()); }
  friend bool operator==(const Shape& b, const Dims& a) { return eq(a, b.data(), b.size()); }
  friend bool operator==(const Dims& a, IntSpan b) { return eq(a, b.data(), b.size()); }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
  friend bool operator!=(const Dims& a, const Shape& b) { return !(a == b); }
  friend bool operator!=(const Shape& b, const Dims& a) { return !(a == b); }
  friend bool operator!=(const Dims& a, IntSpan b) { return !(a == b); }

 private:
  static bool eq(const Dims& a, const int64_t* b, size_t n) {
    return a.size_ == n && (n == 0 || std::memcmp(a.data(), b, n * sizeof(int64_t)) == 0);
  }
  // Room for n dims, contents not kept (assign overwrites them).
  int64_t* reserve_for(size_t n) {
    if (n > capacity()) {
      if (cap_) delete[] heap_;
      heap_ = new int64_t[n];
      cap_ = static_cast<uint32_t>(n);
    }
    return data();
  }
  // Room for n dims, the first size_ kept.
  int64_t* reserve_keep(size_t n) {
    if (n > capacity()) {
      const uint32_t cap = static_cast<uint32_t>(std::max<size_t>(n, 2 * size_t{capacity()}));
      int64_t* h = new int64_t[cap];
      std::copy(begin(), end(), h);
      if (cap_) delete[] heap_;
      heap_ = h;  // after the copy: heap_ shares its bytes with inline_
      cap_ = cap;
    }
    return data();
  }
  uint32_t capacity() const { return cap_ ? cap_ : kInline; }

  uint32_t size_ = 0;
  uint32_t cap_ = 0;  // 0: the dims are in inline_; else heap_'s capacity (kept once spilled)
  union {
    int64_t* heap_;
    int64_t inline_[kInline];
  };
};
static_assert(sizeof(Dims) == 40);

}  // namespace sloth
