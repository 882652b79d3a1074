// max_pool2d's argmax on CUDA (MaxPool2dIndices): pool_source.h's kernel over a contiguous
// input, registered by op id.
#include "backends/cuda/kernel_launch.h"
#include "backends/cuda/op_kernels.h"
#include "backends/cuda/pool_source.h"
#include "core/op_attrs.h"

namespace sloth::cuda {
namespace {

absl::Status run_max_pool_indices(RunEnv& env, const Instr& in) {
  DeviceData x = env.get(in.in[0]);
  if (!x.is_contiguous()) x = make_contiguous(env, x, x.dtype);
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64)
    return absl::InternalError("cuda backend: max_pool2d takes float32 or float64");
  const PoolAttrs a = PoolAttrs::of(in.attrs);
  const Shape& s = x.layout.shape;
  const size_t r = s.size();
  const int64_t h = s[r - 2], w = s[r - 1], ho = in.shape[r - 2], wo = in.shape[r - 1];
  const int64_t planes = h * w > 0 ? x.numel() / (h * w) : 0;
  DeviceData out = env.alloc(in.shape, DType::kInt64);
  const int64_t work = planes * ho * wo;
  if (work > 0) {
    ParamWords p;
    p.p(out.raw());
    p.p(x.raw());
    for (int64_t v : {planes, h, w, ho, wo, a.kernel(0), a.kernel(1), a.stride(0), a.stride(1),
                      a.padding(0), a.padding(1), a.dilation(0), a.dilation(1)})
      p.i(v);
    launch(max_pool_indices_source(x.dtype), p, work);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

template <bool kScatter>
absl::Status run_plane_index(RunEnv& env, const Instr& in) {
  DeviceData v = env.get(in.in[0]), ix = env.get(in.in[1]);
  if (!v.is_contiguous()) v = make_contiguous(env, v, v.dtype);
  if (!ix.is_contiguous()) ix = make_contiguous(env, ix, ix.dtype);
  if (in.dtype != DType::kFloat32 && in.dtype != DType::kFloat64)
    return absl::InternalError("cuda backend: max_pool2d takes float32 or float64");
  const IntSpan big = kScatter ? in.shape.span() : IntSpan(v.layout.shape);
  const int64_t planes = big[0] * big[1], hw = big[2] * big[3];
  const int64_t l = planes > 0 ? ix.numel() / planes : 0;
  DeviceData out = env.alloc(in.shape, in.dtype);
  const int64_t work = kScatter ? planes : planes * l;
  if (work > 0 && hw > 0) {
    ParamWords p;
    p.p(out.raw());
    p.p(v.raw());
    p.p(ix.raw());
    for (int64_t w : {planes, hw, l}) p.i(w);
    launch(max_pool_plane_source(in.dtype, kScatter), p, work);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

}  // namespace

SLOTH_CUDA_OP_KERNEL(kMaxPool2dIndices, run_max_pool_indices);
SLOTH_CUDA_OP_KERNEL(kMaxPool2dGather, run_plane_index<false>);
SLOTH_CUDA_OP_KERNEL(kMaxPool2dScatter, run_plane_index<true>);

}  // namespace sloth::cuda
