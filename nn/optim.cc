#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "nn/checkpoint.h"

namespace sloth::optim {
namespace {

// A number that changes from step to step (learning rate, bias corrections) as a 0-dim
// float64 data tensor: it is data in the graph, never a constant, and as a 0-dim operand it
// does not promote float32 parameters (PyTorch's rule). A plain double would become an int64
// scalar when it happens to be integral (lr = 1, lr = 0), which would change the graph.
Tensor scalar(double v) { return tensor(v, TensorOptions(kFloat64)); }

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr >= 0)) fail("optimizer: invalid learning rate %g (must be >= 0)", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined()) fail("optimizer: parameter %d is undefined", int64_t(i));
    if (!params_[i].is_leaf())
      fail("optimizer: parameter %d is not a leaf tensor (it has history %s); pass "
           "module->parameters() or leaf tensors with requires_grad",
           int64_t(i), params_[i].grad_fn_name());
  }
  steps_.assign(params_.size(), 0);
  state_.resize(params_.size());
}
Optimizer::~Optimizer() = default;

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard g;
  for (Tensor& p : params_) {
    Tensor gr = p.grad();
    if (!gr.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else gr.zero_();
  }
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) fail("set_lr: invalid learning rate %g (must be >= 0)", lr);
  lr_ = lr;
}

int64_t Optimizer::step_count() const {
  int64_t s = 0;
  for (int64_t v : steps_) s = std::max(s, v);
  return s;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i)
    for (const std::string& n : state_names()) {
      auto it = state_[i].find(n);
      if (it != state_[i].end()) out.emplace_back(std::to_string(i) + "." + n, it->second);
    }
  return out;
}

void Optimizer::save(const std::string& path) const {
  auto tensors = state_tensors();
  tensors.emplace_back("step", from_vector<int64_t>(steps_, {int64_t(steps_.size())}));
  char lr[64];
  snprintf(lr, sizeof lr, "%.17g", lr_);
  nn::save_safetensors(tensors, path,
                       {{"optimizer", name()}, {"lr", lr},
                        {"num_params", std::to_string(params_.size())}});
}

void Optimizer::load(const std::string& path) {
  nn::SafetensorsFile f = nn::load_safetensors(path);
  auto where = [&](const std::string& n) { return "optimizer state " + path + ": tensor '" + n + "'"; };
  auto it = f.metadata.find("optimizer");
  if (it != f.metadata.end() && it->second != name())
    fail("optimizer state %s was saved by %s, cannot load it into %s", path, it->second, name());
  // Validate everything before changing anything.
  const Tensor* step = f.find("step");
  if (!step) fail("optimizer state %s: missing tensor 'step'", path);
  if (step->dtype() != kInt64 || step->shape() != Shape{int64_t(params_.size())})
    fail("%s: expected I64 of shape [%d], got %s of shape %s", where("step"),
         int64_t(params_.size()), dtype_name(step->dtype()), shape_str(step->shape()));
  std::set<std::string> expected = {"step"};
  std::vector<std::map<std::string, Tensor>> state(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const std::string& n : state_names()) {
      std::string key = std::to_string(i) + "." + n;
      const Tensor* t = f.find(key);
      if (!t) continue;
      expected.insert(key);
      if (t->shape() != params_[i].shape() || t->dtype() != params_[i].dtype())
        fail("%s: expected %s of shape %s (like parameter %d), got %s of shape %s", where(key),
             dtype_name(params_[i].dtype()), shape_str(params_[i].shape()), int64_t(i),
             dtype_name(t->dtype()), shape_str(t->shape()));
      state[i][n] = *t;
    }
  }
  for (const auto& [n, t] : f.tensors)
    if (!expected.count(n))
      fail("%s is unexpected (this %s has %d parameters with state %s)", where(n), name(),
           int64_t(params_.size()), state_names().empty() ? "none" : state_names()[0] + ", ...");
  std::vector<int64_t> steps = step->to_vector<int64_t>();
  double lr = lr_;
  if (auto l = f.metadata.find("lr"); l != f.metadata.end()) {
    char* end = nullptr;
    lr = std::strtod(l->second.c_str(), &end);
    if (end == l->second.c_str() || *end) fail("optimizer state %s: bad lr metadata '%s'", path, l->second);
  }
  state_ = std::move(state);
  steps_ = std::move(steps);
  lr_ = lr;
}

// ---- SGD -------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params), o.lr()), options_(o) {
  if (o.momentum() < 0) fail("SGD: invalid momentum %g", o.momentum());
  if (o.weight_decay() < 0) fail("SGD: invalid weight_decay %g", o.weight_decay());
  if (o.nesterov() && (o.momentum() <= 0 || o.dampening() != 0))
    fail("SGD: nesterov momentum requires a momentum > 0 and zero dampening");
}

std::vector<std::string> SGD::state_names() const {
  if (options_.momentum() != 0) return {"momentum_buffer"};
  return {};
}

void SGD::step() {
  NoGradGuard guard;
  Tensor lr = scalar(lr_);
  // Under sloth::jit the learning rate is read again at every replay (set_lr, schedules) and
  // the step counts advance (sloth/jit.h).
  const bool jit = jit_recording();
  if (jit) jit_host_value(lr, [this] { return lr_; });
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor d = p.grad();
    if (!d.defined()) continue;
    ++steps_[i];
    if (jit) jit_on_replay([this, i] { ++steps_[i]; });
    if (o.weight_decay() != 0) d = d + p * o.weight_decay();
    if (o.momentum() != 0) {
      auto it = state_[i].find("momentum_buffer");
      if (it == state_[i].end()) {
        it = state_[i].emplace("momentum_buffer", d.clone().detach()).first;
      } else {
        it->second.mul_(o.momentum());
        it->second.add_(o.dampening() == 0 ? d : d * (1 - o.dampening()));
      }
      d = o.nesterov() ? d + it->second * o.momentum() : it->second;
    }
    p.sub_(d * lr);
  }
}

// ---- Adam / AdamW ------------------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Adam(std::move(params), o, false) {}

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params), o.lr()), options_(o), decoupled_(decoupled) {
  if (!(o.eps() >= 0)) fail("%s: invalid eps %g", name(), o.eps());
  if (!(o.beta1() >= 0 && o.beta1() < 1)) fail("%s: invalid beta1 %g (must be in [0, 1))", name(), o.beta1());
  if (!(o.beta2() >= 0 && o.beta2() < 1)) fail("%s: invalid beta2 %g (must be in [0, 1))", name(), o.beta2());
  if (!(o.weight_decay() >= 0)) fail("%s: invalid weight_decay %g", name(), o.weight_decay());
}

std::vector<std::string> Adam::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

void Adam::step() {
  NoGradGuard guard;
  const AdamOptions& o = options_;
  // The moments start as zeros holding data (one small sync, once), so the first update's
  // graph is the steady one: a loop without mark_step() hits the plan cache from step 3.
  std::vector<Tensor> fresh;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& st = state_[i];
    if (!params_[i].grad().defined() || st.count("exp_avg")) continue;
    st["exp_avg"] = zeros_like(params_[i]).detach();
    st["exp_avg_sq"] = zeros_like(params_[i]).detach();
    fresh.push_back(st["exp_avg"]);
    fresh.push_back(st["exp_avg_sq"]);
  }
  if (!fresh.empty()) sync(fresh);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    auto& st = state_[i];
    const int64_t t = ++steps_[i];
    // Under sloth::jit, the step count advances and every number computed here from the
    // learning rate and the step count is computed again at each replay (sloth/jit.h).
    const bool jit = jit_recording();
    if (jit) jit_on_replay([this, i] { ++steps_[i]; });
    if (o.weight_decay() != 0) {
      if (decoupled_) {
        Tensor decay = scalar(1 - lr_ * o.weight_decay());
        if (jit) jit_host_value(decay, [this] { return 1 - lr_ * options_.weight_decay(); });
        p.mul_(decay);
      } else {
        g = g + p * o.weight_decay();
      }
    }
    Tensor& m = st["exp_avg"];
    Tensor& v = st["exp_avg_sq"];
    m.mul_(o.beta1());
    m.add_(g * (1 - o.beta1()));
    v.mul_(o.beta2());
    v.add_(g * g * (1 - o.beta2()));
    auto step_size_at = [this](int64_t t) {
      return lr_ / (1 - std::pow(options_.beta1(), double(t)));
    };
    auto bc2_sqrt_at = [this](int64_t t) {
      return std::sqrt(1 - std::pow(options_.beta2(), double(t)));
    };
    Tensor step_size = scalar(step_size_at(t));
    Tensor bc2_sqrt = scalar(bc2_sqrt_at(t));
    if (jit) {
      jit_host_value(step_size, [this, i, step_size_at] { return step_size_at(steps_[i]); });
      jit_host_value(bc2_sqrt, [this, i, bc2_sqrt_at] { return bc2_sqrt_at(steps_[i]); });
    }
    Tensor denom = v.sqrt() / bc2_sqrt + o.eps();
    p.sub_(m / denom * step_size);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : Adam(std::move(params), AdamOptions{o.lr(), o.beta1(), o.beta2(), o.eps(), o.weight_decay()}, true) {}

// ---- schedules ---------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt), base_lr_(opt.lr()) {}

void LRScheduler::step() { set_epoch(epoch_ + 1); }

void LRScheduler::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  opt_.set_lr(lr_at(epoch));
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) fail("StepLR: step_size must be positive, got %d", step_size);
}
double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0) fail("CosineAnnealingLR: t_max must be positive, got %d", t_max);
}
double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ +
         (base_lr_ - eta_min_) * (1 + std::cos(std::numbers::pi * double(epoch) / double(t_max_))) / 2;
}

}  // namespace sloth::optim
