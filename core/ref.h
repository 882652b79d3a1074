// Intrusive reference counting: one pointer-sized handle, no control block, so copying a
// Tensor or an IR edge costs one increment.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <utility>

namespace sloth {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  int64_t use_count() const { return refs_.load(std::memory_order_relaxed); }

 protected:
  virtual ~RefCounted() = default;
  // Called when the last reference goes; pools override it to recycle the object.
  virtual void release() { delete this; }

 private:
  template <typename T> friend class Ref;
  // The first reference to an object nobody else can see yet (just made, or just taken from
  // a pool): a plain store instead of a locked increment.
  void init_first() const { refs_.store(1, std::memory_order_relaxed); }
  void inc() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void dec() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) const_cast<RefCounted*>(this)->release();
  }
  // Drops the caller's reference when it is the only one, with a plain load and store instead
  // of a locked decrement (which also waits for all of this thread's pending stores: with many
  // live objects, misses). Sound only where no holder-less path can take a new reference
  // (a registry that turns raw pointers into references): types opt in (see Ref::~Ref).
  // Returns false, having done nothing, when there are other holders.
  bool drop_if_sole() const {
    if (refs_.load(std::memory_order_acquire) != 1) return false;
    refs_.store(0, std::memory_order_relaxed);
    const_cast<RefCounted*>(this)->release();
    return true;
  }
  // A new reference unless the count already reached zero (the object is being released):
  // for a registry that holds raw pointers and turns them into references (see
  // Ref::try_acquire).
  bool try_inc() const {
    int64_t n = refs_.load(std::memory_order_relaxed);
    while (n > 0)
      if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
    return false;
  }
  mutable std::atomic<int64_t> refs_{0};
};

template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}
  explicit Ref(T* p) : p_(p) { if (p_) p_->inc(); }
  Ref(const Ref& o) : p_(o.p_) { if (p_) p_->inc(); }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U> Ref(const Ref<U>& o) : p_(o.get()) { if (p_) p_->inc(); }
  // Converting move: the reference changes hands, no increment and decrement pair.
  template <typename U> Ref(Ref<U>&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  // Takes the first reference to `p`, which must be unreferenced and not yet visible to any
  // other thread (fresh from new or from a free list). Saves a locked increment per object
  // made on the trace path.
  // A handle to `p` that owns no reference: the caller guarantees `p` outlives it and calls
  // forget() before it is destroyed (sloth::internal::BorrowedOperands passes a caller's
  // tensors to an op without a locked increment and decrement each). Copies of it are
  // ordinary owning handles.
  static Ref borrow(T* p) {
    Ref r;
    r.p_ = p;
    return r;
  }
  void forget() { p_ = nullptr; }
  // A reference to `p`, found through a raw pointer a registry keeps (under the registry's
  // lock), or null when p's last reference is already gone: its release is under way and
  // will unlink it. A plain increment there would bring it back to life, to be freed a
  // second time by whoever dropped the new reference.
  static Ref try_acquire(T* p) {
    Ref r;
    if (p != nullptr && p->try_inc()) r.p_ = p;
    return r;
  }
  static Ref adopt_new(T* p) {
    Ref r;
    p->init_first();
    r.p_ = p;
    return r;
  }
  // A type with `static bool sole_release_ok(const T*)` lets the last holder drop its
  // reference without a locked instruction where that returns true (RefCounted::drop_if_sole).
  ~Ref() {
    if (p_ == nullptr) return;
    if constexpr (requires(const T* q) { { T::sole_release_ok(q) } -> std::convertible_to<bool>; }) {
      if (T::sole_release_ok(p_) && p_->drop_if_sole()) return;
    }
    p_->dec();
  }
  Ref& operator=(Ref o) noexcept { std::swap(p_, o.p_); return *this; }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() { Ref().swap(*this); }
  void swap(Ref& o) noexcept { std::swap(p_, o.p_); }
  friend bool operator==(const Ref& a, const Ref& b) { return a.p_ == b.p_; }
  friend bool operator==(const Ref& a, std::nullptr_t) { return a.p_ == nullptr; }

 private:
  template <typename U> friend class Ref;
  T* p_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

}  // namespace sloth
