// CUDA C source generation for the CUDA backend. Pure host code (no CUDA headers), so the
// generated sources can be compiled with NVRTC and checked on machines without a GPU.
//
// Every generated kernel is `extern "C" __global__ void <name>(const P p)` where P is a
// struct of K 64-bit words; the host packs pointers, int64 values and doubles (bit-cast)
// into the words in the order the generator documents (ParamWords in kernel_launch.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/op_table.h"
#include "lazy/plan.h"

namespace sloth::cuda {

inline constexpr int kMaxDims = 10;  // rank of generic (runtime-rank) kernels after coalescing

// The device type name of a dtype ("float", "long long", ...).
const char* cuda_type(DType t);

// What every kernel source starts with: the element-op semantics (core/ew_semantics.h's text,
// the CPU backend's very functions), Philox (identical to core/philox.h), index math.
const std::string& preamble();

struct KernelSource {
  std::string name;    // entry point
  std::string source;  // complete CUDA C translation unit
  int words = 0;       // 64-bit parameter words the entry point takes
};

// ---- fused elementwise ----------------------------------------------------------------------
// A run of elementwise instructions over one loop shape (printed from its lazy form,
// lazy/ew_form.h), compiled into one grid-stride kernel.
// Words: [0] n, [1] all-linear flag, then per external operand: ptr, nd broadcast strides;
// then per output: ptr; then per scalar operand: the value (double bits).
struct ElementwiseKernel {
  struct Ext { int slot; DType slot_dtype; };  // operand read from memory
  struct Out { int slot; DType dtype; };       // result written to memory (contiguous)
  struct Const { int slot; };                  // operand from a kScalar slot
  Shape shape;
  std::vector<Ext> exts;
  std::vector<Out> outs;
  std::vector<Const> consts;
  KernelSource src;
  std::string error;  // non-empty: the instructions cannot be generated
};
ElementwiseKernel generate_elementwise(const lazy::Plan& plan, const std::vector<int32_t>& instrs,
                                       const std::vector<int32_t>& materialize);

// ---- generic kernels (runtime rank <= kMaxDims) ----------------------------------------------
// Strided converting copy dst[i] (+)= src[i].
// Words: dst, src, n, nd, shape[kMaxDims], dst_strides[kMaxDims], src_strides[kMaxDims].
KernelSource copy_source(DType dst, DType src, bool accumulate);

// Reductions. Sum/Prod/Amax/Amin over the coalesced reduced dims of each kept position.
// `splits` blocks share one output; with splits > 1 the first pass writes accumulators to
// tmp and merge_source combines them.
// Words: in, out, tmp, kn, rn, splits, nk, nr, kshape[M], kin[M], rshape[M], rin[M].
KernelSource reduce_source(OpId op, DType in, DType out);
// Words: tmp, out, kn, splits.
KernelSource reduce_merge_source(OpId op, DType in, DType out);
// Argmax/Argmin over one dim. Words: in, out(int64), kn, rn, rstride, nk, kshape[M], kin[M].
KernelSource arg_reduce_source(OpId op, DType in);

// Factories. Words: out, n, a, b (doubles), i0, i1 (int64: eye rows/cols, randint low/high).
KernelSource factory_source(OpId op, DType t);

// Index checks: err[0] = first bad index + 1 flag, err[1] = the value.
// Words: idx, n, nd, shape[M], strides[M], size, allow_negative, err.
KernelSource check_index_source(DType idx);

// The index primitive (lazy::IndexWalk, lazy::IndexMode) over the positions of a walk's
// `shape` (rank <= M), with v = idx[pos] (+ size when negative) and t = target[pos with
// dim := v] (the walk's strides and dstride):
//   mode 0 (kRead):        other[pos] = t
//   mode 1 (kAccumulate):  t += other[pos]                                   (atomic)
//   mode 2 (kWrite):       t = other[pos] if winner[v] == pos[dim]
// Words: target, other, idx, winner, n, nd, dim, dstride, size, shape[M], tstr[M], ostr[M],
// istr[M].
KernelSource index_source(int mode, DType t, DType idx);
// winner[v] = max i over the indices v = idx[i * istride] (+ size when negative), i < n:
// kWrite's last write wins. Words: idx, n, istride, size, winner.
KernelSource winner_source(DType idx);
// out[i * classes + idx[i]] = 1 (mark_classes). Words: idx, out, n, nd, classes, shape[M],
// strides[M].
KernelSource one_hot_source(DType idx);

// FNV-1a 64 of a string (stable across runs: the on-disk cache key).
uint64_t fnv1a(const std::string& s);

}  // namespace sloth::cuda
