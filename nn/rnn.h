// Recurrent layers with LibTorch's names, options, parameters and results: RNN, LSTM, GRU
// (multi-layer, bidirectional, batch_first, dropout between layers) and the cells RNNCell,
// LSTMCell, GRUCell.
//   nn::LSTM lstm(nn::LSTMOptions(32, 64).num_layers(2).batch_first(true));
//   auto [out, state] = lstm->forward(x);          // out [N, T, 64]; state = (h_n, c_n)
//   auto [h_n, c_n] = state;
// Parameters are PyTorch's, so a state dict maps one to one: weight_ih_l{k}[_reverse]
// [gates * H, in], weight_hh_l{k} [gates * H, H], bias_ih_l{k}, bias_hh_l{k} [gates * H]
// (gates: LSTM i, f, g, o; GRU r, z, n; RNN 1), all ~ U(-1/sqrt(H), 1/sqrt(H)).
// Shapes: input [T, N, in] ([N, T, in] batch_first) or unbatched [T, in]; states
// [layers * directions, N, H] (unbatched [layers * directions, H]); output [T, N, directions * H].
// The recurrence is unrolled into the lazy graph: the input projection of all steps is one
// matmul per layer and direction, each step one [N, H] x [H, gates * H] matmul plus the gate
// math, which fusion joins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn/enum.h"  // RNNNonlinearity: torch::kTanh, torch::kReLU
#include "nn/module.h"

namespace sloth::nn {

#define SLOTH_NN_RNN_OPTIONS(Name)                                             \
  class Name##Options {                                                        \
   public:                                                                     \
    Name##Options(int64_t input_size, int64_t hidden_size)                     \
        : input_size_(input_size), hidden_size_(hidden_size) {}                \
    SLOTH_NN_ARG(int64_t, input_size);                                         \
    SLOTH_NN_ARG(int64_t, hidden_size);                                        \
    SLOTH_NN_ARG(int64_t, num_layers) = 1;                                     \
    SLOTH_NN_ARG(bool, bias) = true;                                           \
    SLOTH_NN_ARG(bool, batch_first) = false;                                   \
    SLOTH_NN_ARG(double, dropout) = 0.0;                                       \
    SLOTH_NN_ARG(bool, bidirectional) = false;
SLOTH_NN_RNN_OPTIONS(RNN)
  SLOTH_NN_ARG(RNNNonlinearity, nonlinearity) = kTanh;
};
SLOTH_NN_RNN_OPTIONS(LSTM)
};
SLOTH_NN_RNN_OPTIONS(GRU)
};
#undef SLOTH_NN_RNN_OPTIONS

#define SLOTH_NN_CELL_OPTIONS(Name)                                            \
  class Name##Options {                                                        \
   public:                                                                     \
    Name##Options(int64_t input_size, int64_t hidden_size)                     \
        : input_size_(input_size), hidden_size_(hidden_size) {}                \
    SLOTH_NN_ARG(int64_t, input_size);                                         \
    SLOTH_NN_ARG(int64_t, hidden_size);                                        \
    SLOTH_NN_ARG(bool, bias) = true;
SLOTH_NN_CELL_OPTIONS(RNNCell)
  SLOTH_NN_ARG(RNNNonlinearity, nonlinearity) = kTanh;
};
SLOTH_NN_CELL_OPTIONS(LSTMCell)
};
SLOTH_NN_CELL_OPTIONS(GRUCell)
};
#undef SLOTH_NN_CELL_OPTIONS

// What the three layer types share: the options, the parameters per layer and direction,
// the shape checks and the loop over layers and directions.
class RNNBase : public Module {
 public:
  enum class Kind : uint8_t { kRNNTanh, kRNNReLU, kLSTM, kGRU };
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first, bidirectional;
  double dropout;
  // LibTorch's flatten_parameters (a cuDNN layout step): nothing to do here.
  void flatten_parameters() {}
  // Every weight and bias, in PyTorch's order (per layer and direction: w_ih, w_hh, b_ih, b_hh).
  std::vector<Tensor> all_weights() const;

 protected:
  RNNBase(const char* name, Kind kind, int64_t input_size, int64_t hidden_size,
          int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional);
  // output, h_n (and c_n for LSTM; undefined otherwise).
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& h0,
                                         const Tensor& c0) const;
  std::string extra_repr() const override;

 private:
  struct Weights {
    const Tensor *w_ih, *w_hh, *b_ih, *b_hh;
  };
  Kind kind_;
  std::vector<Weights> weights_;  // layer * directions + direction
};

class RNNImpl : public RNNBase {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
  // (output, h_n); hx: h_0, zeros when undefined.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  RNNOptions options;
};

class LSTMImpl : public RNNBase {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  // (output, (h_n, c_n)); hx: (h_0, c_0), zeros when not given.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx = std::nullopt);
  LSTMOptions options;
};

class GRUImpl : public RNNBase {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  GRUOptions options;
};

// One step: input [N, in] (or [in]), state [N, H] (or [H]).
class RNNCellImpl : public Module {
 public:
  RNNCellImpl(int64_t input_size, int64_t hidden_size)
      : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RNNCellOptions& options);
  Tensor forward(const Tensor& input, Tensor hx = {});
  RNNCellOptions options;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;
 protected:
  std::string extra_repr() const override;
};

class LSTMCellImpl : public Module {
 public:
  LSTMCellImpl(int64_t input_size, int64_t hidden_size)
      : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const LSTMCellOptions& options);
  // (h_1, c_1).
  std::tuple<Tensor, Tensor> forward(const Tensor& input,
                                     std::optional<std::tuple<Tensor, Tensor>> hx = std::nullopt);
  LSTMCellOptions options;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;
 protected:
  std::string extra_repr() const override;
};

class GRUCellImpl : public Module {
 public:
  GRUCellImpl(int64_t input_size, int64_t hidden_size)
      : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const GRUCellOptions& options);
  Tensor forward(const Tensor& input, Tensor hx = {});
  GRUCellOptions options;
  Tensor &weight_ih, &weight_hh, &bias_ih, &bias_hh;
 protected:
  std::string extra_repr() const override;
};

SLOTH_MODULE(RNN);
SLOTH_MODULE(LSTM);
SLOTH_MODULE(GRU);
SLOTH_MODULE(RNNCell);
SLOTH_MODULE(LSTMCell);
SLOTH_MODULE(GRUCell);

}  // namespace sloth::nn
