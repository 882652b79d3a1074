#include "nn/rnn.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "nn/layers.h"

namespace sloth::nn {
namespace {

using Kind = RNNBase::Kind;

int64_t gates_of(Kind k) { return k == Kind::kLSTM ? 4 : k == Kind::kGRU ? 3 : 1; }

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRNNTanh: case Kind::kRNNReLU: return "RNN";
    case Kind::kLSTM: return "LSTM";
    case Kind::kGRU: return "GRU";
  }
  return "?";
}

// One step of the recurrence. gx: the input's gate pre-activations [N, G*H] (x W_ih^T + b_ih);
// h: [N, H]; c: the LSTM cell state (updated), else unused. Returns h'.
Tensor step(Kind kind, const Tensor& gx, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh,
            Tensor* c) {
  const Tensor gh = linear(h, w_hh, b_hh);
  switch (kind) {
    case Kind::kRNNTanh: return tanh(gx + gh);
    case Kind::kRNNReLU: return relu(gx + gh);
    case Kind::kLSTM: {
      const std::vector<Tensor> g = (gx + gh).chunk(4, -1);  // i, f, g, o
      *c = sigmoid(g[1]) * *c + sigmoid(g[0]) * tanh(g[2]);
      return sigmoid(g[3]) * tanh(*c);
    }
    case Kind::kGRU: {
      const std::vector<Tensor> x = gx.chunk(3, -1), hh = gh.chunk(3, -1);  // r, z, n
      const Tensor r = sigmoid(x[0] + hh[0]), z = sigmoid(x[1] + hh[1]);
      const Tensor n = tanh(x[2] + r * hh[2]);
      return n + z * (h - n);  // (1 - z) n + z h
    }
  }
  return h;
}

}  // namespace

// ---- layers ----------------------------------------------------------------------------------

RNNBase::RNNBase(const char* name, Kind kind, int64_t in, int64_t hidden, int64_t layers,
                 bool with_bias, bool bf, double p, bool bidi)
    : Module(name), input_size(in), hidden_size(hidden), num_layers(layers), bias(with_bias),
      batch_first(bf), bidirectional(bidi), dropout(p), kind_(kind) {
  if (in <= 0 || hidden <= 0 || layers <= 0)
    fail("nn::%s: input_size (%d), hidden_size (%d) and num_layers (%d) must be positive", name,
         in, hidden, layers);
  if (!(p >= 0 && p <= 1))
    fail("nn::%s: dropout should be a number in [0, 1] representing the probability of an "
         "element being zeroed, got %g", name, p);
  const int64_t g = gates_of(kind), dirs = bidi ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = absl::StrFormat("_l%d%s", l, d == 1 ? "_reverse" : "");
      const int64_t layer_in = l == 0 ? in : hidden * dirs;
      Weights w{};
      w.w_ih = &register_parameter("weight_ih" + sfx, detail::uniform_init({g * hidden, layer_in}, bound));
      w.w_hh = &register_parameter("weight_hh" + sfx, detail::uniform_init({g * hidden, hidden}, bound));
      w.b_ih = &register_parameter("bias_ih" + sfx, with_bias ? detail::uniform_init({g * hidden}, bound) : Tensor());
      w.b_hh = &register_parameter("bias_hh" + sfx, with_bias ? detail::uniform_init({g * hidden}, bound) : Tensor());
      weights_.push_back(w);
    }
}

std::vector<Tensor> RNNBase::all_weights() const {
  std::vector<Tensor> r;
  for (const Weights& w : weights_)
    for (const Tensor* t : {w.w_ih, w.w_hh, w.b_ih, w.b_hh})
      if (t->defined()) r.push_back(*t);
  return r;
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, const Tensor& h0_in,
                                                const Tensor& c0_in) const {
  const char* name = kind_name(kind_);
  if (!input.defined()) fail("nn::%s: the input is undefined", name);
  if (input.dim() != 2 && input.dim() != 3)
    fail("nn::%s: expected a 2-D (unbatched) or 3-D (batched) input, got %s", name,
         shape_str(input.shape()));
  if (!is_floating(input.dtype()))
    fail("nn::%s: the input must be floating point, got %s", name, dtype_name(input.dtype()));
  if (input.size(-1) != input_size)
    fail("nn::%s: input.size(-1) must be equal to input_size. Expected %d, got %d (input %s)",
         name, input_size, input.size(-1), shape_str(input.shape()));
  const bool batched = input.dim() == 3;
  // [T, N, in] from here on.
  Tensor x = batched ? (batch_first ? input.transpose(0, 1) : input) : input.unsqueeze(1);
  const int64_t steps = x.size(0), n = x.size(1), dirs = bidirectional ? 2 : 1;
  const Shape state_shape =
      batched ? Shape{num_layers * dirs, n, hidden_size} : Shape{num_layers * dirs, hidden_size};
  const auto state = [&](const Tensor& given, const char* what) {
    if (!given.defined())
      return zeros({num_layers * dirs, n, hidden_size},
                   TensorOptions().dtype(input.dtype()).device(input.device()));
    if (given.shape() != state_shape)
      fail("nn::%s: expected %s size %s, got %s", name, what, shape_str(state_shape),
           shape_str(given.shape()));
    return batched ? given : given.unsqueeze(1);
  };
  const Tensor h0 = state(h0_in, "hidden"), c0 = kind_ == Kind::kLSTM ? state(c0_in, "cell") : Tensor();
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const Weights& w = weights_[static_cast<size_t>(l * dirs + d)];
      const int64_t k = l * dirs + d;
      // The input's gate pre-activations for every step at once: one matmul.
      const Tensor gx = linear(x, *w.w_ih, *w.b_ih);
      Tensor h = h0.select(0, k), c = c0.defined() ? c0.select(0, k) : Tensor();
      std::vector<Tensor> hs(static_cast<size_t>(steps));
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t t = d == 0 ? i : steps - 1 - i;
        h = step(kind_, gx.select(0, t), h, *w.w_hh, *w.b_hh, &c);
        hs[static_cast<size_t>(t)] = h;
      }
      outs.push_back(steps > 0 ? stack(hs, 0) : zeros({0, n, hidden_size}, TensorOptions().dtype(input.dtype())));
      h_n.push_back(h);
      if (c.defined()) c_n.push_back(c);
    }
    x = dirs == 1 ? outs[0] : cat(outs, -1);
    if (l + 1 < num_layers && dropout > 0 && is_training()) x = sloth::dropout(x, dropout, true);
  }
  Tensor out = batched ? (batch_first ? x.transpose(0, 1) : x) : x.squeeze(1);
  Tensor hn = stack(h_n, 0), cn = c_n.empty() ? Tensor() : stack(c_n, 0);
  if (!batched) {
    hn = hn.squeeze(1);
    if (cn.defined()) cn = cn.squeeze(1);
  }
  return {out, hn, cn};
}

std::string RNNBase::extra_repr() const {
  std::string r = absl::StrFormat("%d, %d", input_size, hidden_size);
  if (num_layers != 1) r += absl::StrFormat(", num_layers=%d", num_layers);
  if (!bias) r += ", bias=false";
  if (batch_first) r += ", batch_first=true";
  if (dropout != 0) r += absl::StrFormat(", dropout=%g", dropout);
  if (bidirectional) r += ", bidirectional=true";
  return r;
}

RNNImpl::RNNImpl(const RNNOptions& o)
    : RNNBase("RNN", o.nonlinearity() == kReLU ? Kind::kRNNReLU : Kind::kRNNTanh, o.input_size(),
              o.hidden_size(), o.num_layers(), o.bias(), o.batch_first(), o.dropout(),
              o.bidirectional()),
      options(o) {}
std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, Tensor hx) {
  auto [out, hn, cn] = run(input, hx, Tensor());
  return {out, hn};
}

LSTMImpl::LSTMImpl(const LSTMOptions& o)
    : RNNBase("LSTM", Kind::kLSTM, o.input_size(), o.hidden_size(), o.num_layers(), o.bias(),
              o.batch_first(), o.dropout(), o.bidirectional()),
      options(o) {}
std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(
    const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx) {
  auto [out, hn, cn] = hx ? run(input, std::get<0>(*hx), std::get<1>(*hx))
                          : run(input, Tensor(), Tensor());
  return {out, {hn, cn}};
}

GRUImpl::GRUImpl(const GRUOptions& o)
    : RNNBase("GRU", Kind::kGRU, o.input_size(), o.hidden_size(), o.num_layers(), o.bias(),
              o.batch_first(), o.dropout(), o.bidirectional()),
      options(o) {}
std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, Tensor hx) {
  auto [out, hn, cn] = run(input, hx, Tensor());
  return {out, hn};
}

// ---- cells -----------------------------------------------------------------------------------

namespace {
// The cells' shared checks: input [N, in] or [in], state [N, H] or [H]; returns them batched.
std::pair<Tensor, Tensor> cell_inputs(const char* name, const Tensor& input, const Tensor& hx,
                                      int64_t in, int64_t hidden) {
  if (!input.defined()) fail("nn::%s: the input is undefined", name);
  if (input.dim() != 1 && input.dim() != 2)
    fail("nn::%s: expected input to be 1-D or 2-D, got %s", name, shape_str(input.shape()));
  if (input.size(-1) != in)
    fail("nn::%s: input has inconsistent input_size: got %d expected %d", name, input.size(-1), in);
  const bool batched = input.dim() == 2;
  const Tensor x = batched ? input : input.unsqueeze(0);
  const Shape want = batched ? Shape{input.size(0), hidden} : Shape{hidden};
  if (!hx.defined())
    return {x, zeros({x.size(0), hidden}, TensorOptions().dtype(input.dtype()).device(input.device()))};
  if (hx.shape() != want)
    fail("nn::%s: expected the hidden state of shape %s, got %s", name, shape_str(want),
         shape_str(hx.shape()));
  return {x, batched ? hx : hx.unsqueeze(0)};
}
}  // namespace

#define SLOTH_NN_CELL_CTOR(Name, gates)                                                       \
  Name##Impl::Name##Impl(const Name##Options& o)                                              \
      : Module(#Name), options(o),                                                            \
        weight_ih(register_parameter(                                                         \
            "weight_ih", detail::uniform_init({gates * o.hidden_size(), o.input_size()},      \
                                              1.0 / std::sqrt(double(o.hidden_size()))))),     \
        weight_hh(register_parameter(                                                         \
            "weight_hh", detail::uniform_init({gates * o.hidden_size(), o.hidden_size()},     \
                                              1.0 / std::sqrt(double(o.hidden_size()))))),     \
        bias_ih(register_parameter(                                                           \
            "bias_ih", o.bias() ? detail::uniform_init({gates * o.hidden_size()},             \
                                                       1.0 / std::sqrt(double(o.hidden_size())))\
                                : Tensor())),                                                 \
        bias_hh(register_parameter(                                                           \
            "bias_hh", o.bias() ? detail::uniform_init({gates * o.hidden_size()},             \
                                                       1.0 / std::sqrt(double(o.hidden_size())))\
                                : Tensor())) {                                                \
    if (o.input_size() <= 0 || o.hidden_size() <= 0)                                          \
      fail("nn::" #Name ": input_size (%d) and hidden_size (%d) must be positive",             \
           o.input_size(), o.hidden_size());                                                  \
  }                                                                                           \
  std::string Name##Impl::extra_repr() const {                                                \
    return absl::StrFormat("%d, %d%s", options.input_size(), options.hidden_size(),           \
                           options.bias() ? "" : ", bias=false");                             \
  }
SLOTH_NN_CELL_CTOR(RNNCell, 1)
SLOTH_NN_CELL_CTOR(LSTMCell, 4)
SLOTH_NN_CELL_CTOR(GRUCell, 3)
#undef SLOTH_NN_CELL_CTOR

Tensor RNNCellImpl::forward(const Tensor& input, Tensor hx) {
  auto [x, h] = cell_inputs("RNNCell", input, hx, options.input_size(), options.hidden_size());
  const Tensor r = step(options.nonlinearity() == kReLU ? Kind::kRNNReLU : Kind::kRNNTanh,
                        linear(x, weight_ih, bias_ih), h, weight_hh, bias_hh, nullptr);
  return input.dim() == 1 ? r.squeeze(0) : r;
}

std::tuple<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& input,
                                                 std::optional<std::tuple<Tensor, Tensor>> hx) {
  const Tensor h0 = hx ? std::get<0>(*hx) : Tensor(), c0_in = hx ? std::get<1>(*hx) : Tensor();
  auto [x, h] = cell_inputs("LSTMCell", input, h0, options.input_size(), options.hidden_size());
  Tensor c = cell_inputs("LSTMCell", input, c0_in, options.input_size(), options.hidden_size()).second;
  const Tensor h1 = step(Kind::kLSTM, linear(x, weight_ih, bias_ih), h, weight_hh, bias_hh, &c);
  if (input.dim() == 1) return {h1.squeeze(0), c.squeeze(0)};
  return {h1, c};
}

Tensor GRUCellImpl::forward(const Tensor& input, Tensor hx) {
  auto [x, h] = cell_inputs("GRUCell", input, hx, options.input_size(), options.hidden_size());
  const Tensor r = step(Kind::kGRU, linear(x, weight_ih, bias_ih), h, weight_hh, bias_hh, nullptr);
  return input.dim() == 1 ? r.squeeze(0) : r;
}

}  // namespace sloth::nn
