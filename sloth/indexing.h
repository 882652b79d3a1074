// LibTorch's tensor indexing (torch::indexing), Python's x[...] written in C++:
//   using namespace torch::indexing;            // sloth::indexing after the rename
//   x.index({Slice(), 0});                       // x[:, 0]
//   x.index({"...", None, Slice(1, None, 2)});   // x[..., None, 1::2]
//   x.index({idx});  x.index({mask});            // advanced: int64 index or bool mask tensors
//   x.index_put_({Slice(), 0}, 1.5);             // x[:, 0] = 1.5 (through the view)
//   x.index_put_({rows, cols}, values);          // x[rows, cols] = values
// Integers select (the dim goes away), slices narrow with a step, None adds a size-1 dim,
// Ellipsis ("...") stands for the dims not named. Index tensors follow NumPy's advanced
// indexing: int64 tensors broadcast together and their result dims go where the first one
// was when they are adjacent, else first; negative indices count from the end; a bool mask
// selects its true positions (it reads the mask: a sync, as its result size depends on it).
// Basic indices give views, so index_put_ writes the original tensor and autograd flows.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>

#include "sloth/tensor.h"

namespace sloth::indexing {

struct EllipsisIndexType {};
inline constexpr EllipsisIndexType Ellipsis{};
inline constexpr std::nullopt_t None = std::nullopt;

// start:stop:step; each defaults as in Python (0, the end, 1).
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step) {}
  const std::optional<int64_t>& start() const { return start_; }
  const std::optional<int64_t>& stop() const { return stop_; }
  const std::optional<int64_t>& step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_, step_;
};

class TensorIndex {
 public:
  enum class Kind : uint8_t { kNone, kEllipsis, kInteger, kBoolean, kSlice, kTensor };
  TensorIndex(std::nullopt_t) : kind_(Kind::kNone) {}         // NOLINT: implicit, as LibTorch
  TensorIndex(EllipsisIndexType) : kind_(Kind::kEllipsis) {}  // NOLINT
  TensorIndex(const char* s);                                 // NOLINT: "..." only
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  TensorIndex(I i) : kind_(Kind::kInteger), integer_(static_cast<int64_t>(i)) {}  // NOLINT
  TensorIndex(bool b) : kind_(Kind::kBoolean), boolean_(b) {}        // NOLINT
  TensorIndex(Slice s) : kind_(Kind::kSlice), slice_(std::move(s)) {}  // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }
  std::string to_string() const;  // Python's spelling: ":", "1:5:2", "None", "...", "tensor"

 private:
  Kind kind_;
  int64_t integer_ = 0;
  bool boolean_ = false;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace sloth::indexing
