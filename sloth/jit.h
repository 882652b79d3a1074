// sloth::jit: capture a training step once, then replay its cached plan without tracing.
//
//   auto step = sloth::jit([&](const Tensor& x, const Tensor& y) {
//     Tensor loss = sloth::mse_loss(model->forward(x), y);
//     opt.zero_grad();
//     loss.backward();
//     opt.step();
//     return loss;
//   });
//   for (auto& [x, y] : loader) { Tensor loss = step(x, y); total += loss.item(); }
//
// How it works (tinygrad's TinyJit and jax.jit are the models). A traced call flushes what is
// pending, runs the C++ function (recording ops as usual), flushes the step as one graph and
// records what that graph reads and writes: which inputs are the call's tensor arguments,
// which are persistent state (parameters, optimizer state, buffers: tensors that existed
// before the call), which outputs are returned and which become the new values of tensors
// that outlive the call (updated parameters, momentum buffers, .grad). When two consecutive
// traced calls with the same argument shapes record the same thing (same graph, same
// wiring, same host constants), later calls with those shapes replay: they bind the new
// arguments and the state's current data, run the cached executable, rebind the state and
// return the outputs, without running the C++ function.
//
// A call traces (and says why, in stats().last_reason and with SLOTH_LOG=replay) when:
//   - it is the first or second call with these argument shapes, dtypes and layouts (up to
//     8 shape signatures are kept, so a last partial batch does not evict the full one);
//   - the previous trace with these shapes differed (e.g. SGD's momentum buffers are made
//     on the first step: replay starts after two equal traces, here from call 4);
//   - state tensors changed hands since the last call (a .grad dropped by zero_grad outside
//     the step, a parameter replaced), or the plan cache was cleared.
// A step is never replayed (it always traces, with the reason) when it syncs more than once
// (item(), to_vector(), printing or sync() inside the step; call loss.item() outside),
// when a number it passes to the graph changes between traces (a host-computed value such
// as a hand-written schedule: use a tensor argument, or jit_host_value below), when it
// writes to its own arguments in place, or returns a tensor it did not compute.
//
// The contract. The step must be a function of its tensor arguments and of the state it
// reads (module parameters and buffers, optimizer state). Host control flow is frozen at
// trace time: branches on data or on flags (module train()/eval(): jit the training and
// the evaluation step as two functions), and side effects (counters, prints) happen only
// in traced calls. Numbers the step passes into the graph are checked instead: if they
// change between traces, the step traces every call (see above). The standard optimizers
// are jit-aware: their learning rate (set_lr, schedulers) and Adam's bias corrections are
// read again at every replay, and their step counts advance. Random ops in the step
// (dropout, rand, randn, randint) draw new numbers at every replay, the same ones the step
// draws without jit (the generator's offset advances per replay as per traced call).
// Arguments may be views cut from a larger tensor (X.narrow(0, i * b, b)): a replay reads
// each call's batch where it starts. A step that also reads that larger tensor itself must
// take it as an argument too (read beside the batch from a capture, it is taken for part of
// the batch when it lies inside it). Outputs of a replayed call carry no autograd history.
// Tensors the step creates and keeps (e.g. each parameter's .grad) are the same tensor
// objects from replay to replay, refilled with each step's values (a copy kept from an
// earlier step sees the new values: clone() it to keep it); returned tensors are fresh each
// call.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "sloth/tensor.h"

namespace sloth {

// What a jitted step did so far.
struct JitStats {
  int64_t calls = 0;
  int64_t traces = 0;   // calls that ran the C++ function
  int64_t replays = 0;  // calls that ran the recorded plan
  bool last_replayed = false;
  // Why the last traced call traced ("first call with these argument shapes", "argument 0
  // has shape [8, 32], recorded [16, 32]", "the step ran 2 graphs", ...).
  std::string last_reason;
  std::string to_string() const;
};

// ---- hooks for library code that runs inside a step (the optimizers use them) ----------
// True while a sloth::jit call is tracing (recording) a step.
bool jit_recording();
// `t` (a 0-dim tensor holding data, created by the caller for this step) is a host-computed
// value: each replay recomputes it with `value` instead of reusing the traced number.
void jit_host_value(const Tensor& t, std::function<double()> value);
// A host-side effect of the step (an optimizer's step counter) repeated at each replay, in
// trace order with the host values.
void jit_on_replay(std::function<void()> effect);

namespace jit_detail {

class Core {
 public:
  Core();
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;
  // Replays when a verified record matches `args`: fills `outs` and returns true.
  bool try_replay(absl::Span<const Tensor* const> args, std::vector<Tensor>* outs);
  // False when the call must run the function without recording (nested in another trace,
  // or this shape signature was given up on).
  bool begin_trace(absl::Span<const Tensor* const> args);
  void end_trace(const std::vector<Tensor>& returned);
  void abort_trace();
  const JitStats& stats() const;
  void reset();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

template <class R>
struct Returns;
template <>
struct Returns<Tensor> {
  static std::vector<Tensor> to(const Tensor& r) { return {r}; }
  static Tensor from(std::vector<Tensor>& v) { return std::move(v[0]); }
};
template <>
struct Returns<std::vector<Tensor>> {
  static std::vector<Tensor> to(const std::vector<Tensor>& r) { return r; }
  static std::vector<Tensor> from(std::vector<Tensor>& v) { return std::move(v); }
};
template <class... T>
struct Returns<std::tuple<T...>> {
  static_assert((std::is_same_v<T, Tensor> && ...), "sloth::jit: a step returns Tensors");
  static std::vector<Tensor> to(const std::tuple<T...>& r) {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, r);
  }
  static std::tuple<T...> from(std::vector<Tensor>& v) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<T...>{std::move(v[I])...};
    }(std::index_sequence_for<T...>{});
  }
};
template <>
struct Returns<std::pair<Tensor, Tensor>> {
  static std::vector<Tensor> to(const std::pair<Tensor, Tensor>& r) { return {r.first, r.second}; }
  static std::pair<Tensor, Tensor> from(std::vector<Tensor>& v) {
    return {std::move(v[0]), std::move(v[1])};
  }
};

}  // namespace jit_detail

// A jitted step (see the top of this file). Copies share the recordings.
template <class F>
class Jit {
 public:
  explicit Jit(F f) : f_(std::move(f)), core_(std::make_shared<jit_detail::Core>()) {}

  template <class... A>
  auto operator()(const A&... args) {
    static_assert((std::is_same_v<A, Tensor> && ...),
                  "sloth::jit: step arguments must be Tensors; capture other values in the "
                  "lambda (they are frozen when the step is traced)");
    using R = std::invoke_result_t<F&, const A&...>;
    const std::array<const Tensor*, sizeof...(A)> a{&args...};
    if constexpr (std::is_void_v<R>) {
      if (core_->try_replay(a, &outs_)) return;
      if (!core_->begin_trace(a)) return f_(args...);
      try {
        f_(args...);
      } catch (...) {
        core_->abort_trace();
        throw;
      }
      core_->end_trace({});
    } else {
      if (core_->try_replay(a, &outs_)) return jit_detail::Returns<R>::from(outs_);
      if (!core_->begin_trace(a)) return f_(args...);
      std::optional<R> r;
      try {
        r.emplace(f_(args...));
      } catch (...) {
        core_->abort_trace();
        throw;
      }
      core_->end_trace(jit_detail::Returns<R>::to(*r));
      return std::move(*r);
    }
  }

  const JitStats& stats() const { return core_->stats(); }
  // Forgets every recording: the next call traces.
  void reset() { core_->reset(); }

 private:
  F f_;
  std::shared_ptr<jit_detail::Core> core_;
  std::vector<Tensor> outs_;  // reused by replays
};

template <class F>
Jit<F> jit(F step) {
  return Jit<F>(std::move(step));
}

}  // namespace sloth
