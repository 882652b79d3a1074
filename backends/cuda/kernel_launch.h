// Launching generated kernels: packing their parameter words, the launch itself, and the
// stride coalescing every generic (runtime-rank) kernel relies on to stay within kMaxDims.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

#include "backends/cuda/codegen.h"
#include "core/shape.h"

namespace sloth::cuda {

// A generated kernel's parameters: 64-bit words in the order codegen.h documents.
struct ParamWords {
  std::vector<int64_t> w;
  void i(int64_t v) { w.push_back(v); }
  void p(const void* ptr) { w.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr))); }
  void d(double v);  // bit-cast: the kernel reads it back as a double
  // `len` words: v, zero-padded (the kernels take fixed-size kMaxDims arrays).
  void arr(IntSpan v, size_t len = kMaxDims);
};

// Launches `k` (the compiled `ks`) on the context stream with 256-thread blocks. `blocks`
// defaults to one per 256 elements of `work`; it is clamped to [1, 32 per SM] since the
// kernels are grid-stride loops. Throws when the words do not match what `ks` takes.
void launch(cudaKernel_t k, const KernelSource& ks, ParamWords& words, int64_t work,
            int64_t blocks = -1);
// The same, compiling/loading `ks` through the kernel cache first.
void launch(const KernelSource& ks, ParamWords& words, int64_t work, int64_t blocks = -1);

// Merges adjacent dims every stride vector walks contiguously and drops size-1 dims; leaves
// at least one dim.
void coalesce(Shape& shape, std::vector<Strides*> strides);

// An error when `nd` (after coalescing) exceeds what the generic kernels take.
absl::Status check_rank(const char* what, size_t nd);

}  // namespace sloth::cuda
