// Unfold and Fold on CUDA (convolution and pooling): the kernels of window_source.h over a
// contiguous input, registered by op id.
#include "backends/cuda/kernel_launch.h"
#include "backends/cuda/op_kernels.h"
#include "backends/cuda/window_source.h"
#include "core/op_attrs.h"

namespace sloth::cuda {
namespace {

absl::Status run_window(RunEnv& env, const Instr& in, bool unfold) {
  DeviceData x = env.get(in.in[0]);
  if (!x.is_contiguous()) x = make_contiguous(env, x, x.dtype);
  if (in.dtype != DType::kFloat32 && in.dtype != DType::kFloat64)
    return absl::InternalError("cuda backend: unfold/fold take float32 or float64");
  const WindowAttrs a = WindowAttrs::of(in.attrs);
  // The image side: the input of Unfold, the output of Fold ([N, C, H, W] or [C, H, W]).
  const IntSpan img = unfold ? IntSpan(x.layout.shape) : in.shape.span();
  const int64_t r = static_cast<int64_t>(img.size());
  const int64_t n = r == 4 ? img[0] : 1, c = img[r - 3], h = img[r - 2], w = img[r - 1];
  DeviceData out = env.alloc(in.shape, in.dtype);
  const int64_t work = out.numel();
  if (work > 0) {
    ParamWords p;
    p.p(out.raw());
    p.p(x.raw());
    for (int64_t v : {n, c, h, w, a.out_h(h), a.out_w(w), a.kh(), a.kw(), a.dh(), a.dw(), a.ph(),
                      a.pw(), a.sh(), a.sw(), int64_t{a.batch_inner}, a.extra_row})
      p.i(v);
    p.d(a.pad_value);
    launch(unfold ? unfold_source(in.dtype) : fold_source(in.dtype), p, work);
  }
  env.set(in.out, std::move(out));
  return absl::OkStatus();
}

absl::Status run_unfold(RunEnv& env, const Instr& in) { return run_window(env, in, true); }
absl::Status run_fold(RunEnv& env, const Instr& in) { return run_window(env, in, false); }

}  // namespace

SLOTH_CUDA_OP_KERNEL(kUnfold, run_unfold);
SLOTH_CUDA_OP_KERNEL(kFold, run_fold);

}  // namespace sloth::cuda
