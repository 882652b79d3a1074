// Factories: full, arange, linspace, eye and the Philox-based rand/randn/randint. Random
// element i depends only on (seed, offset + i), so splitting the fill across threads cannot
// change the values.
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/op_attrs.h"
#include "core/philox.h"

namespace sloth::cpu {
namespace {

template <typename F>
void fill_parallel(int64_t n, F&& f) {
  if (n >= kParallelThreshold) parallel_for(n, 8192, f);
  else f(0, n);
}

uint64_t as_u64(double v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

}  // namespace

absl::Status run_factory(Env& env, const Instr& in) {
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);  // no DeviceData per run
  const int64_t n = out.numel();
  absl::Status st = absl::OkStatus();
  visit_dtype(in.dtype, [&](auto z) {
    using T = decltype(z);
    T* o = out.data<T>();
    switch (in.op) {
      case OpId::kFull: {
        T v = convert_to<T>(env.scalar(in.in[0]));
        fill_parallel(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] = v;
        });
        break;
      }
      case OpId::kArange: {
        double start = env.scalar(in.in[0]), step = env.scalar(in.in[1]);
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(start + i * step);
        break;
      }
      case OpId::kLinspace: {
        double start = env.scalar(in.in[0]), end = env.scalar(in.in[1]);
        if (n == 1) {
          o[0] = static_cast<T>(start);
          break;
        }
        // Symmetric from both ends (as PyTorch), so the last element is exactly `end`.
        double step = (end - start) / static_cast<double>(n - 1);
        for (int64_t i = 0; i < n; ++i)
          o[i] = static_cast<T>(i < n / 2 ? start + i * step : end - (n - 1 - i) * step);
        break;
      }
      case OpId::kEye: {
        std::memset(static_cast<void*>(o), 0, n * sizeof(T));
        const int64_t rows = in.shape.size() > 0 ? in.shape[0] : 0;
        const int64_t cols = in.shape.size() > 1 ? in.shape[1] : rows;
        for (int64_t i = 0; i < std::min(rows, cols); ++i) o[i * cols + i] = static_cast<T>(1);
        break;
      }
      case OpId::kRand: case OpId::kRandn: case OpId::kRandint: {
        const uint64_t seed = as_u64(env.scalar(in.in[0]));
        const uint64_t offset = as_u64(env.scalar(in.in[1]));
        const bool f64 = in.dtype == DType::kFloat64;
        const OpId op = in.op;
        const int64_t lo = RandintAttrs::of(in.attrs).low, hi = RandintAttrs::of(in.attrs).high;
        fill_parallel(n, [&](int64_t b, int64_t e) {
          if (op == OpId::kRandint) {
            // Integers go straight to T: a detour through double would round above 2^53.
            for (int64_t i = b; i < e; ++i)
              o[i] = static_cast<T>(philox::integer(seed, offset + i, lo, hi));
          } else if (op == OpId::kRand) {
            for (int64_t i = b; i < e; ++i)
              o[i] = static_cast<T>(philox::uniform(seed, offset + i, f64));
          } else {
            for (int64_t i = b; i < e; ++i) o[i] = static_cast<T>(philox::normal(seed, offset + i));
          }
        });
        break;
      }
      default:
        st = absl::InternalError(
            absl::StrFormat("cpu backend: %s is not a factory", op_name(in.op)));
    }
  });
  return st;
}

}  // namespace sloth::cpu
