// sloth::optim: SGD, Adam, AdamW with PyTorch 1.13's update rules, and learning-rate
// schedules.
//
// The update is recorded lazily, as in-place ops under NoGradGuard, into the same graph as
// forward and backward: step() never reads values (no item(), no sync). The learning rate and
// every step-dependent number (Adam's bias corrections) enter the graph as data (0-dim
// float64 tensors), so set_lr(), schedules and the step count never change the graph and a
// training loop plans once.
//
// zero_grad(set_to_none = true) follows PyTorch 2: gradients become undefined and the next
// backward creates them afresh (no zero-fill kernel). set_to_none = false zeroes them in place.
//
// State save/load: save(path) writes the optimizer's state to its own safetensors file
// ("<i>.momentum_buffer", "<i>.exp_avg", "<i>.exp_avg_sq" for parameter i, an I64 tensor
// "step" with each parameter's step count, and "__metadata__" with the optimizer's name and
// learning rate). load(path) validates everything first and restores the state exactly
// (including the learning rate), so a resumed run continues bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sloth/sloth_core.h"

namespace sloth::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer();
  // Records one update of every parameter that has a gradient.
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);
  void set_lr(double lr);
  double lr() const { return lr_; }
  const std::vector<Tensor>& params() const { return params_; }
  // Number of steps taken (the largest per-parameter step count).
  int64_t step_count() const;

  // State: tensors by name ("<i>.<state>") plus the per-parameter step counts.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  void save(const std::string& path) const;
  void load(const std::string& path);
  virtual std::string name() const = 0;

 protected:
  // The per-parameter state tensors this optimizer keeps (e.g. {"exp_avg", "exp_avg_sq"}).
  virtual std::vector<std::string> state_names() const = 0;
  std::vector<Tensor> params_;
  double lr_;
  std::vector<int64_t> steps_;                         // per parameter
  std::vector<std::map<std::string, Tensor>> state_;   // per parameter
};

// Options are written either way (both spellings set the same fields):
//   SGDOptions{.lr = 0.1, .momentum = 0.9}            designated initializers
//   SGDOptions(0.1).momentum(0.9).nesterov(true)      LibTorch's builder
// and read as `o.momentum` (converts to double) or `o.momentum()`. Each field is an
// OptionField: a value that converts to and from its type, and whose call `o.momentum(0.9)`
// sets it and returns the options object holding it (found from the field's offset, the
// options structs being standard-layout aggregates).
template <class Owner, class T, size_t (*Offset)()>
struct OptionField {
  T value;
  OptionField(T v) : value(v) {}  // NOLINT: implicit, for `.momentum = 0.9`
  template <class O2, size_t (*F2)()>
  OptionField(const OptionField<O2, T, F2>& o) : value(o.value) {}  // NOLINT: another options'
  operator T() const { return value; }  // NOLINT: implicit
  T operator()() const { return value; }
  Owner& operator()(T v) {
    value = v;
    return *reinterpret_cast<Owner*>(reinterpret_cast<char*>(this) - Offset());
  }
};

#define SLOTH_OPTION_FIELD(Owner, T, name)                                  \
  static size_t name##_offset();                                           \
  ::sloth::optim::OptionField<Owner, T, &Owner::name##_offset> name
#define SLOTH_OPTION_OFFSET(Owner, name) \
  inline size_t Owner::name##_offset() { return offsetof(Owner, name); }

struct SGDOptions {
  SLOTH_OPTION_FIELD(SGDOptions, double, lr) = 0.01;
  SLOTH_OPTION_FIELD(SGDOptions, double, momentum) = 0;
  SLOTH_OPTION_FIELD(SGDOptions, double, dampening) = 0;
  SLOTH_OPTION_FIELD(SGDOptions, double, weight_decay) = 0;
  SLOTH_OPTION_FIELD(SGDOptions, bool, nesterov) = false;
};
SLOTH_OPTION_OFFSET(SGDOptions, lr)
SLOTH_OPTION_OFFSET(SGDOptions, momentum)
SLOTH_OPTION_OFFSET(SGDOptions, dampening)
SLOTH_OPTION_OFFSET(SGDOptions, weight_decay)
SLOTH_OPTION_OFFSET(SGDOptions, nesterov)

// PyTorch's SGD: d = g + wd*p; buf = d (first step) else buf = momentum*buf + (1-dampening)*d;
// d = nesterov ? d + momentum*buf : buf; p -= lr*d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<Tensor> params, double lr) : SGD(std::move(params), SGDOptions(lr)) {}
  void step() override;
  std::string name() const override { return "SGD"; }
  const SGDOptions& options() const { return options_; }
 protected:
  std::vector<std::string> state_names() const override;
 private:
  SGDOptions options_;
};

struct AdamOptions {
  SLOTH_OPTION_FIELD(AdamOptions, double, lr) = 1e-3;
  SLOTH_OPTION_FIELD(AdamOptions, double, beta1) = 0.9;
  SLOTH_OPTION_FIELD(AdamOptions, double, beta2) = 0.999;
  SLOTH_OPTION_FIELD(AdamOptions, double, eps) = 1e-8;
  // Adam: L2 (added to the gradient); AdamW: decoupled
  SLOTH_OPTION_FIELD(AdamOptions, double, weight_decay) = 0;
  // LibTorch's `.betas({0.9, 0.999})`.
  AdamOptions& betas(std::tuple<double, double> b) {
    beta1 = std::get<0>(b);
    beta2 = std::get<1>(b);
    return *this;
  }
  std::tuple<double, double> betas() const { return {beta1, beta2}; }
};
SLOTH_OPTION_OFFSET(AdamOptions, lr)
SLOTH_OPTION_OFFSET(AdamOptions, beta1)
SLOTH_OPTION_OFFSET(AdamOptions, beta2)
SLOTH_OPTION_OFFSET(AdamOptions, eps)
SLOTH_OPTION_OFFSET(AdamOptions, weight_decay)

// PyTorch's Adam (amsgrad = false): g += wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<Tensor> params, double lr) : Adam(std::move(params), AdamOptions(lr)) {}
  void step() override;
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return options_; }
 protected:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled);
  std::vector<std::string> state_names() const override;
 private:
  AdamOptions options_;
  bool decoupled_;
};

// PyTorch's AdamW: p *= 1 - lr*wd, then Adam's update without L2. Default weight_decay 1e-2.
struct AdamWOptions {
  SLOTH_OPTION_FIELD(AdamWOptions, double, lr) = 1e-3;
  SLOTH_OPTION_FIELD(AdamWOptions, double, beta1) = 0.9;
  SLOTH_OPTION_FIELD(AdamWOptions, double, beta2) = 0.999;
  SLOTH_OPTION_FIELD(AdamWOptions, double, eps) = 1e-8;
  SLOTH_OPTION_FIELD(AdamWOptions, double, weight_decay) = 1e-2;
  AdamWOptions& betas(std::tuple<double, double> b) {
    beta1 = std::get<0>(b);
    beta2 = std::get<1>(b);
    return *this;
  }
  std::tuple<double, double> betas() const { return {beta1, beta2}; }
};
SLOTH_OPTION_OFFSET(AdamWOptions, lr)
SLOTH_OPTION_OFFSET(AdamWOptions, beta1)
SLOTH_OPTION_OFFSET(AdamWOptions, beta2)
SLOTH_OPTION_OFFSET(AdamWOptions, eps)
SLOTH_OPTION_OFFSET(AdamWOptions, weight_decay)
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<Tensor> params, double lr) : AdamW(std::move(params), AdamWOptions(lr)) {}
};

// ---- learning-rate schedules: call step() once per epoch (or per iteration) ----
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& opt);
  virtual ~LRScheduler() = default;
  // Advances one period and sets the optimizer's learning rate.
  void step();
  // Jumps to period `epoch` (used when resuming).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }
  virtual double lr_at(int64_t epoch) const = 0;
 protected:
  Optimizer& opt_;
  double base_lr_;
  int64_t epoch_ = 0;
};

// lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch) const override;
 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2 (closed form).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0);
  double lr_at(int64_t epoch) const override;
 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace sloth::optim
