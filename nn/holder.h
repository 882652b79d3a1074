// LibTorch's module holder model: `nn::Linear` is a cheap handle (a ModuleHolder) over a
// shared `nn::LinearImpl`, so modules are values that alias, as in LibTorch:
//
//   nn::Linear fc(4, 3);          // makes a LinearImpl
//   fc->weight; fc(x);            // -> reaches the impl; () calls its forward
//   nn::Linear other = fc;        // the same module, not a copy
//   nn::Linear later{nullptr};    // empty until assigned (register_module returns the holder)
//
// A user module is written LibTorch's way, `struct NetImpl : nn::Module {...};
// SLOTH_MODULE(Net);`, with a forward of any signature (`Tensor forward(Tensor x)` included).
//
// Today's spellings keep working: `std::make_shared<nn::Linear>(4, 3)` now makes a
// shared_ptr to a holder, and the holder forwards the Module interface (forward, parameters,
// train, to, ...) so `p->forward(x)`, `p->parameters()` still compile; reaching a member of the
// impl through such a pointer is `(*p)->weight` (or write `std::make_shared<nn::LinearImpl>`,
// which is LibTorch's spelling as well).
//
// AnyModule type-erases a module for Sequential: it is built from the module's static type,
// so whatever forward that type declares is called (no virtual dispatch to
// Module::forward(const Tensor&)), and a module without a forward taking one Tensor is a
// compile error, not a run-time one.
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "sloth/tensor.h"

namespace sloth::nn {

class Module;

// Marks every ModuleHolder, whatever its Impl (a non-template base for traits).
struct ModuleHolderTag {};
template <class T>
inline constexpr bool is_module_holder_v = std::is_base_of_v<ModuleHolderTag, std::remove_cvref_t<T>>;

template <class Impl>
class ModuleHolder : public ModuleHolderTag {
 public:
  using ContainedType = Impl;

  // `nn::ReLU relu;`, `nn::Sequential seq;`: a new Impl made with its default constructor
  // (LibTorch's rule; a holder whose Impl has none must be given arguments or nullptr).
  ModuleHolder()
    requires std::is_default_constructible_v<Impl>
      : impl_(std::make_shared<Impl>()) {}
  // `nn::Linear fc{nullptr}` / `= nullptr`: an empty holder, assigned later.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as LibTorch
  // `nn::Linear(4, 3)`, `nn::Conv2d(nn::Conv2dOptions(1, 10, 5))`: the arguments of an Impl
  // constructor. (Never taken for a copy of this holder type.)
  template <class A, class... Rest>
    requires(!(sizeof...(Rest) == 0 &&
               (std::is_base_of_v<ModuleHolder, std::remove_cvref_t<A>> ||
                std::is_same_v<std::remove_cvref_t<A>, std::shared_ptr<Impl>> ||
                std::is_same_v<std::remove_cvref_t<A>, std::nullptr_t>))) &&
            std::is_constructible_v<Impl, A, Rest...>
  explicit ModuleHolder(A&& a, Rest&&... rest)
      : impl_(std::make_shared<Impl>(std::forward<A>(a), std::forward<Rest>(rest)...)) {}
  // `nn::MLP({784, 256, 10})`, `nn::AdaptiveAvgPool2d({1, 1})`: a braced size list first.
  template <class... Rest>
    requires std::is_constructible_v<Impl, std::initializer_list<int64_t>, Rest...>
  explicit ModuleHolder(std::initializer_list<int64_t> sizes, Rest&&... rest)
      : impl_(std::make_shared<Impl>(sizes, std::forward<Rest>(rest)...)) {}
  // Wraps an existing impl (shares it).
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT: implicit

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  Impl* get() const { return checked(); }
  const std::shared_ptr<Impl>& ptr() const {
    checked();
    return impl_;
  }
  bool is_empty() const noexcept { return impl_ == nullptr; }
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  // Lets a holder go where a std::shared_ptr<nn::Module> or a Module& is expected
  // (nn::save(model, path), functions written for modules).
  operator std::shared_ptr<Module>() const { return ptr(); }  // NOLINT: implicit
  operator Impl&() const { return *checked(); }               // NOLINT: implicit

  // Calls the impl's forward, whatever its signature.
  template <class... Args>
  decltype(auto) forward(Args&&... args) const {
    return checked()->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return checked()->forward(std::forward<Args>(args)...);
  }

  // The Module interface, forwarded, so a std::shared_ptr to a holder (what
  // `std::make_shared<nn::Linear>(...)` makes) works as a module pointer did before holders.
  auto parameters(bool recurse = true) const { return checked()->parameters(recurse); }
  auto named_parameters(bool recurse = true) const { return checked()->named_parameters(recurse); }
  auto buffers(bool recurse = true) const { return checked()->buffers(recurse); }
  auto named_buffers(bool recurse = true) const { return checked()->named_buffers(recurse); }
  auto children() const { return checked()->children(); }
  auto named_children() const { return checked()->named_children(); }
  void train(bool on = true) const { checked()->train(on); }
  void eval() const { checked()->eval(); }
  bool is_training() const { return checked()->is_training(); }
  void zero_grad(bool set_to_none = true) const { checked()->zero_grad(set_to_none); }
  void to(Device device) const { checked()->to(device); }
  void to(DType dtype) const { checked()->to(dtype); }
  void to(DeviceType type) const { checked()->to(Device{type, 0}); }
  const std::string& name() const { return checked()->name(); }
  std::string repr(int indent = 0) const { return checked()->repr(indent); }

 protected:
  Impl* checked() const {
    if (!impl_)
      fail("nn module holder: this holder is empty (it was made from nullptr); assign it a "
           "module first, e.g. `fc = register_module(\"fc\", nn::Linear(4, 3));`");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

// The impl inside a holder, a shared_ptr to one, or an impl pointer, as std::shared_ptr<Module>
// (null for an empty holder: register_module and push_back report it by name).
template <class H>
  requires is_module_holder_v<H>
std::shared_ptr<typename std::remove_cvref_t<H>::ContainedType> holder_impl(const H& h) {
  return h.is_empty() ? nullptr : h.ptr();
}

namespace detail {
// True when M declares no forward of its own and only inherits Module's default (which
// throws): `&M::forward` then names Module::forward. An overloaded forward makes `&M::forward`
// ambiguous, and that counts as declaring one.
template <class M>
constexpr bool only_default_forward() {
  if constexpr (requires { &M::forward; })
    return std::is_same_v<decltype(&M::forward), Tensor (Module::*)(const Tensor&)>;
  else
    return false;
}
}  // namespace detail

// Whether AnyModule / Sequential can call M: it declares a forward taking one Tensor and
// returning something convertible to Tensor.
template <class M>
inline constexpr bool has_tensor_forward_v =
    !detail::only_default_forward<M>() && requires(M& m, const Tensor& x) {
      { m.forward(x) } -> std::convertible_to<Tensor>;
    };

// A type-erased module: the module (shared) and a call of its own forward.
class AnyModule {
 public:
  AnyModule() = default;
  template <class M>
    requires(!is_module_holder_v<M>)
  AnyModule(std::shared_ptr<M> m) : module_(m) {  // NOLINT: implicit, as LibTorch
    static_assert(!detail::only_default_forward<M>(),
                  "nn::AnyModule / nn::Sequential: this module declares no forward(); give it "
                  "one, e.g. `Tensor forward(Tensor x)`");
    static_assert(has_tensor_forward_v<M>,
                  "nn::AnyModule / nn::Sequential: the module's forward must accept one Tensor "
                  "and return a Tensor");
    if (m) forward_ = [p = m.get()](const Tensor& x) -> Tensor { return p->forward(x); };
  }
  template <class H>
    requires is_module_holder_v<H>
  AnyModule(const H& h) : AnyModule(holder_impl(h)) {}  // NOLINT: implicit
  template <class H>
    requires is_module_holder_v<H>
  AnyModule(const std::shared_ptr<H>& h)  // NOLINT: implicit (old make_shared<nn::Linear>)
      : AnyModule(h ? holder_impl(*h) : nullptr) {}

  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  const std::shared_ptr<Module>& ptr() const { return module_; }
  bool is_empty() const { return module_ == nullptr; }

 private:
  std::shared_ptr<Module> module_;
  std::function<Tensor(const Tensor&)> forward_;
};

}  // namespace sloth::nn

// A fluent option: `opts.stride(2)` sets, `opts.stride()` reads (LibTorch's TORCH_ARG).
#define SLOTH_NN_ARG(T, name)                          \
 public:                                               \
  auto& name(const T& v) { name##_ = v; return *this; } \
  const T& name() const { return name##_; }            \
 private:                                              \
  T name##_

// Declares the holder `Name` for `NameImpl` (LibTorch's TORCH_MODULE). Write it after
// NameImpl's definition, in the same namespace.
#define SLOTH_MODULE(Name)                                        \
  class Name : public ::sloth::nn::ModuleHolder<Name##Impl> {      \
   public:                                                        \
    using ::sloth::nn::ModuleHolder<Name##Impl>::ModuleHolder;    \
    using Impl = Name##Impl;                                      \
  }

// LibTorch's spelling: macros are outside any namespace, so the rename torch:: -> sloth::
// does not reach TORCH_MODULE; it is the same macro (not defined if LibTorch's is in scope).
#ifndef TORCH_MODULE
#define TORCH_MODULE(Name) SLOTH_MODULE(Name)
#endif
