// Sizes in plan-cache keys (DESIGN I6: a new batch size or sequence length reuses the plan).
//
// Every size a graph's key covers (input shapes and strides, node shapes, the size attributes
// listed by for_each_size_attr) goes through SizeSymbols::word, which gives two keys:
// - the structure key (Graph::struct_key) sees 0 and 1 as themselves (a size-1 dim
//   broadcasts, which changes fusion) and any other size only as "a size";
// - the symbol stream numbers each size >= 2 by its distinct value in first-occurrence order
//   over the walk; Graph::key is the structure key mixed with the stream, so graphs of one key
//   have the same sizes up to one bijection symbol <-> value (same equalities between sizes).
// The scheduler caches executables per key and sizes, and plans per structure key: a graph
// whose structure key has a plan takes that plan when its sizes are a specialization of the
// plan's (sizes equal there stay equal here; sizes distinct there may coincide here, like a
// batch of 128 with a hidden size of 128): lowering and fusion decide only by shape
// equality, so the plan of the more general sizes is a valid plan for the specialized ones,
// mapped by lazy/plan_instance.h. The other way round (a plan made where two sizes
// coincided, a graph where they differ) is a new plan: never a wrong hit. So that a first
// graph whose sizes coincide by chance does not make such a plan, a miss follows each size's
// provenance through the ops and plans such a graph at stand-in sizes that keep apart what
// no op forces equal (lazy/size_provenance.h); only coincidences it cannot split remain.
//
// Input strides hash as "contiguous from here" (stride = product of the later sizes), as a
// tag for a size-1 dim (whose stride addresses nothing), or else as a size: so contiguity, a
// product relation, is structure too.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/attrs.h"
#include "core/op_attrs.h"
#include "core/op_table.h"

namespace sloth::lazy {

class SizeSymbols {
 public:
  static constexpr uint64_t kLiteral = uint64_t{1} << 40;  // 0, 1, negatives: themselves
  static constexpr uint64_t kSize = uint64_t{0x5A} << 48;        // any size >= 2
  static constexpr uint64_t kContiguous = uint64_t{0xC0} << 48;  // an input stride
  static constexpr uint64_t kUnitDim = uint64_t{0x51} << 48;     // stride of a size-1 dim

  // The structure key's word for size v; records v's symbol in the stream.
  // Inline for the common case, the size just seen (a run of nodes of one shape: every node
  // of a graph walk asks).
  uint64_t word(int64_t v) {
    if (v <= 1) return static_cast<uint64_t>(v) + kLiteral;
    const uint32_t id = v == last_v_ ? last_id_ : symbol(v);
    ids_.push_back(id);
    stream_ ^= id + 0x9e3779b97f4a7c15ull + (stream_ << 6) + (stream_ >> 2);
    return kSize;
  }
  // Room for n sizes >= 2 in the stream without regrowing it.
  void reserve(size_t n) { ids_.reserve(n); }
  // Starts the stream in `spare`'s memory (a previous graph's, emptied).
  void adopt_ids(std::vector<uint32_t>&& spare) {
    ids_ = std::move(spare);
    ids_.clear();
  }
  // The stream's hash (mixed into the structure key to make Graph::key).
  uint64_t stream_hash() const { return stream_ * 0xff51afd7ed558ccdull + ids_.size(); }
  std::vector<int64_t> take_values() { return std::move(values_); }
  std::vector<uint32_t> take_ids() { return std::move(ids_); }

 private:
  // v's symbol (a new one when v is new); v becomes the size just seen.
  [[gnu::noinline]] uint32_t symbol(int64_t v) {
    uint32_t id;
    if (values_.size() < kLinear) {
      size_t i = 0;
      while (i < values_.size() && values_[i] != v) ++i;
      if (i == values_.size()) values_.push_back(v);
      if (values_.size() == kLinear)
        for (size_t j = 0; j < values_.size(); ++j) index_[values_[j]] = static_cast<uint32_t>(j);
      id = static_cast<uint32_t>(i);
    } else {
      auto [it, fresh] = index_.try_emplace(v, static_cast<uint32_t>(values_.size()));
      if (fresh) values_.push_back(v);
      id = it->second;
    }
    last_v_ = v;
    last_id_ = id;
    return id;
  }
  static constexpr size_t kLinear = 16;  // past this many distinct sizes, a hash index
  std::vector<int64_t> values_;          // each symbol's value
  std::vector<uint32_t> ids_;            // the symbol of each size >= 2, in walk order
  absl::flat_hash_map<int64_t, uint32_t> index_;
  uint64_t stream_ = 0x243f6a8885a308d3ull;
  int64_t last_v_ = -1;
  uint32_t last_id_ = 0;
};

// Which attributes of an op hold sizes: none, Attrs::dims (a shape, expand's sizes, a
// factory's shape, max_pool2d_scatter's (H, W)), or a slice's start and end.
enum class SizeAttrs : uint8_t { kNone, kDims, kSliceBounds };
constexpr SizeAttrs size_attrs_of(OpId op) {
  switch (op) {
    case OpId::kReshape: case OpId::kExpand: case OpId::kFull: case OpId::kArange:
    case OpId::kLinspace: case OpId::kEye: case OpId::kRand: case OpId::kRandn:
    case OpId::kRandint: case OpId::kMaxPool2dScatter:
      return SizeAttrs::kDims;
    case OpId::kSlice: case OpId::kSliceScatter: return SizeAttrs::kSliceBounds;
    default: return SizeAttrs::kNone;
  }
}

// Calls f(int64_t&) on each attribute of an instruction of `op` that holds a size. The key
// hashes exactly these as sizes and instantiation maps exactly these, so the two always
// agree. Any other attribute is hashed literally: an op whose attributes depend on a size not
// listed here gets a plan per size (correct, only slower; SLOTH_LOG=plans says so).
template <class F>
void for_each_size_attr(OpId op, Attrs& a, F&& f) {
  switch (size_attrs_of(op)) {
    case SizeAttrs::kNone: return;
    case SizeAttrs::kDims:
      for (int64_t& d : a.dims) f(d);
      return;
    case SizeAttrs::kSliceBounds: {
      SliceAttrs s = SliceAttrs::of(a);
      f(s.start);
      f(s.end);
      s.store(a);
      return;
    }
  }
}

// The attrs' part of a key: size attributes as size words, the rest literally.
inline uint64_t attrs_key(OpId op, const Attrs& a, SizeSymbols& sizes) {
  if (size_attrs_of(op) == SizeAttrs::kNone) return a.hash();
  Attrs c = a;
  uint64_t h = 0x5a5a5a5a5a5a5a5aull;
  for_each_size_attr(op, c, [&](int64_t& v) {
    h ^= sizes.word(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    v = 0;
  });
  return c.hash() ^ (h * 0xff51afd7ed558ccdull);
}

}  // namespace sloth::lazy
