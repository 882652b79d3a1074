// Autograd, LibTorch style: grad mode guards, autograd::grad, custom functions, gradcheck.
#pragma once

#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sloth/tensor.h"

namespace sloth {

struct NoGradGuard {
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};
struct EnableGradGuard {
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;
 private:
  bool prev_;
};
bool is_grad_enabled();

namespace autograd {

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// A value kept by a custom function for its backward (saved_data["k"] = 2.5 or = int64).
class SavedValue {
 public:
  SavedValue() = default;
  SavedValue(double v) : d_(v), is_int_(false) {}
  SavedValue(int v) : i_(v), is_int_(true) {}
  SavedValue(int64_t v) : i_(v), is_int_(true) {}
  double toDouble() const { return is_int_ ? static_cast<double>(i_) : d_; }
  int64_t toInt() const { return is_int_ ? i_ : static_cast<int64_t>(d_); }
 private:
  double d_ = 0;
  int64_t i_ = 0;
  bool is_int_ = false;
};

namespace detail { class CustomNode; }

class AutogradContext {
 public:
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> get_saved_variables() const;
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  void mark_dirty(const std::vector<Tensor>& inputs);
  bool needs_input_grad(size_t i) const;
  std::unordered_map<std::string, SavedValue> saved_data;

 private:
  friend class detail::CustomNode;
  friend struct CustomFunctionCall;
  std::vector<Tensor> saved_;
  std::vector<int64_t> saved_versions_;
  std::unordered_set<const void*> non_differentiable_;
  std::unordered_set<const void*> dirty_;
  std::vector<bool> needs_input_grad_;
  bool released_ = false;
};

// Type-erased driver behind Function<T>::apply (sloth/autograd_api.cc).
struct CustomFunctionCall {
  using Backward = std::function<std::vector<Tensor>(AutogradContext*, std::vector<Tensor>)>;
  static std::vector<Tensor> run(const std::string& name, const std::vector<Tensor>& inputs,
                                 const std::function<std::vector<Tensor>(AutogradContext*)>& forward,
                                 Backward backward);
};

// struct Square : autograd::Function<Square> {
//   static Tensor forward(AutogradContext* ctx, Tensor x) { ctx->save_for_backward({x}); return x * x; }
//   static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
//     auto x = ctx->get_saved_variables()[0]; return {2 * x * g[0]}; } };
template <class T>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    using Out = decltype(T::forward(std::declval<AutogradContext*>(), std::forward<Args>(args)...));
    auto fwd = [&](AutogradContext* ctx) -> std::vector<Tensor> {
      if constexpr (std::is_same_v<Out, Tensor>) return {T::forward(ctx, std::forward<Args>(args)...)};
      else return T::forward(ctx, std::forward<Args>(args)...);
    };
    std::vector<Tensor> out = CustomFunctionCall::run(typeid(T).name(), inputs, fwd, &T::backward);
    if constexpr (std::is_same_v<Out, Tensor>) return out[0];
    else return out;
  }

 private:
  template <typename A>
  static void collect(std::vector<Tensor>& v, const A& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) v.push_back(a);
  }
};

struct GradcheckOptions {
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
};
// Compares autograd's gradients of f with central finite differences (inputs should be
// float64 and require grad). Returns false, printing the first mismatch, when they differ.
bool gradcheck(std::function<Tensor(const std::vector<Tensor>&)> f,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {});
// Second order: gradcheck of the gradients themselves (create_graph).
bool gradgradcheck(std::function<Tensor(const std::vector<Tensor>&)> f,
                   const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace autograd
}  // namespace sloth
