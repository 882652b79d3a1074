// Sequence kernels on the CPU: cumsum (a scan), argsort (stable, as torch.sort on the CPU) and
// topk's indices (PyTorch 1.13's CPU algorithm, so ties come out in the same order). Each
// works on rows along `dim` of a contiguous copy viewed as [outer, n, inner]; rows run in
// the thread pool.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  // Element offset of position j of row r.
  int64_t at(int64_t r, int64_t j) const { return (r / inner) * n * inner + r % inner + j * inner; }
};

Rows rows_of(const Shape& s, int64_t dim) {
  Rows r;
  if (s.empty()) return r;
  for (int64_t d = 0; d < dim; ++d) r.outer *= s[d];
  r.n = s[dim];
  for (size_t d = dim + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

const DeviceData& contiguous_operand(Env& env, const Instr& in, DeviceData& keep) {
  const DeviceData& x = env.get(in.in[0]);
  if (x.is_contiguous()) return x;
  keep = make_contiguous(env, x, x.dtype);
  return keep;
}

void for_rows(const Rows& r, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_for(r.count(), std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(r.n, 1)), fn);
}

// ---- cumsum: floats accumulate in double and integers in int64 (PyTorch's acc_type) --------
absl::Status run_cumsum(Env& env, const Instr& in) {
  DeviceData keep;
  const DeviceData& x = contiguous_operand(env, in, keep);
  const Rows r = rows_of(x.layout.shape, DimAttrs::of(in.attrs).dim);
  DeviceData& out = env.alloc_to(in.out, x.layout.shape, in.dtype);
  visit_dtype(x.dtype, [&](auto xt) {
    using X = decltype(xt);
    visit_dtype(in.dtype, [&](auto ot) {
      using O = decltype(ot);
      using Acc = std::conditional_t<std::is_floating_point_v<O>, double, int64_t>;
      const X* px = x.data<X>();
      O* po = out.data<O>();
      for_rows(r, [&](int64_t r0, int64_t r1) {
        for (int64_t row = r0; row < r1; ++row) {
          Acc acc = 0;
          for (int64_t j = 0; j < r.n; ++j) {
            const int64_t o = r.at(row, j);
            acc += static_cast<Acc>(px[o]);
            po[o] = static_cast<O>(acc);
          }
        }
      });
    });
  });
  return absl::OkStatus();
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// ---- argsort: stable; NaN sorts as the largest value (after +inf), as in PyTorch ----------
absl::Status run_argsort(Env& env, const Instr& in) {
  DeviceData keep;
  const DeviceData& x = contiguous_operand(env, in, keep);
  const SortAttrs at = SortAttrs::of(in.attrs);
  const Rows r = rows_of(x.layout.shape, at.dim);
  DeviceData& out = env.alloc_to(in.out, x.layout.shape, DType::kInt64);
  int64_t* po = out.data<int64_t>();
  visit_dtype(x.dtype, [&](auto xt) {
    using T = decltype(xt);
    const T* px = x.data<T>();
    for_rows(r, [&](int64_t r0, int64_t r1) {
      std::vector<std::pair<T, int64_t>> row(static_cast<size_t>(r.n));
      for (int64_t rr = r0; rr < r1; ++rr) {
        for (int64_t j = 0; j < r.n; ++j) row[j] = {px[r.at(rr, j)], j};
        using E = std::pair<T, int64_t>;
        if (at.descending)
          std::stable_sort(row.begin(), row.end(), [](const E& a, const E& b) {
            return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first;
          });
        else
          std::stable_sort(row.begin(), row.end(), [](const E& a, const E& b) {
            return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first;
          });
        for (int64_t j = 0; j < r.n; ++j) po[r.at(rr, j)] = row[j].second;
      }
    });
  });
  return absl::OkStatus();
}

// ---- topk: at::native's topk_impl_loop (1.13) step for step, so ties match -----------------
// partial_sort when k * 64 <= n, else nth_element then a sort of the first k - 1 (the k-th is
// already in place); libstdc++'s algorithms decide the order of equal values, as in PyTorch.
absl::Status run_topk(Env& env, const Instr& in) {
  DeviceData keep;
  const DeviceData& x = contiguous_operand(env, in, keep);
  const TopkAttrs at = TopkAttrs::of(in.attrs);
  const Rows r = rows_of(x.layout.shape, at.dim);
  DeviceData& out = env.alloc_to(in.out, in.shape, DType::kInt64);
  const int64_t k = at.k;
  if (k == 0 || r.count() == 0) return absl::OkStatus();
  int64_t* po = out.data<int64_t>();
  visit_dtype(x.dtype, [&](auto xt) {
    using T = decltype(xt);
    using E = std::pair<T, int64_t>;
    const T* px = x.data<T>();
    auto greater = [](const E& a, const E& b) {
      return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first;
    };
    auto less = [](const E& a, const E& b) {
      return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first;
    };
    for_rows(r, [&](int64_t r0, int64_t r1) {
      std::vector<E> q(static_cast<size_t>(r.n));
      for (int64_t rr = r0; rr < r1; ++rr) {
        for (int64_t j = 0; j < r.n; ++j) q[j] = {px[r.at(rr, j)], j};
        if (k * 64 <= r.n) {
          if (at.largest) std::partial_sort(q.begin(), q.begin() + k, q.end(), greater);
          else std::partial_sort(q.begin(), q.begin() + k, q.end(), less);
        } else if (at.largest) {
          std::nth_element(q.begin(), q.begin() + k - 1, q.end(), greater);
          if (at.sorted) std::sort(q.begin(), q.begin() + k - 1, greater);
        } else {
          std::nth_element(q.begin(), q.begin() + k - 1, q.end(), less);
          if (at.sorted) std::sort(q.begin(), q.begin() + k - 1, less);
        }
        // Output row rr of [outer, k, inner].
        const int64_t o = (rr / r.inner) * k * r.inner + rr % r.inner;
        for (int64_t j = 0; j < k; ++j) po[o + j * r.inner] = q[j].second;
      }
    });
  });
  return absl::OkStatus();
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kCumsum, run_cumsum);
SLOTH_CPU_OP_KERNEL(kArgsort, run_argsort);
SLOTH_CPU_OP_KERNEL(kTopk, run_topk);

}  // namespace sloth::cpu
