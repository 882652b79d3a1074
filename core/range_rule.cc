#include "core/range_rule.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace sloth {
namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

absl::Status check_step_sign(bool positive, bool negative, bool end_ge_start, bool end_le_start,
                             const Scalar& start, const Scalar& end, const Scalar& step) {
  if ((positive && end_ge_start) || (negative && end_le_start)) return absl::OkStatus();
  return invalid("arange: upper bound and larger bound inconsistent with step sign (start %s, "
                 "end %s, step %s); use a %s step, or swap start and end",
                 start.to_string(), end.to_string(), step.to_string(),
                 positive ? "negative" : "positive");
}

absl::Status nonzero_step(const Scalar& step) {
  return invalid("arange: step must be nonzero (got %s); use a positive step to count up or a "
                 "negative one to count down",
                 step.to_string());
}

// ATen computes integer ranges in int64 (acc_type of int32 and int64) after converting each
// argument with a checked conversion.
absl::StatusOr<int64_t> as_int64(const Scalar& v, const char* what) {
  if (!v.fits(DType::kInt64))
    return invalid("arange: %s (%s) cannot be converted to int64 without overflow; pass a "
                   "finite value in int64's range or ask for a floating dtype",
                   what, v.to_string());
  return v.to<int64_t>();
}

absl::Status integral_range(const Scalar& start, const Scalar& end, const Scalar& step,
                            RangeSpec* r) {
  auto s = as_int64(start, "start");
  if (!s.ok()) return s.status();
  auto e = as_int64(end, "end");
  if (!e.ok()) return e.status();
  auto st = as_int64(step, "step");
  if (!st.ok()) return st.status();
  if (*st == 0) return nonzero_step(step);
  SLOTH_RETURN_IF_ERROR(check_step_sign(*st > 0, *st < 0, *e >= *s, *e <= *s, start, end, step));
  double n;
  if (r->dtype == DType::kInt64) {
    // Exact ceiling division (ATen's int64 special case); 128 bits so end - start cannot wrap.
    const __int128 diff = static_cast<__int128>(*e) - *s;
    __int128 q = diff / *st;
    if (diff % *st != 0) ++q;
    n = static_cast<double>(q);
  } else {
    // int32: ATen sizes it from the arguments as doubles (so arange(0, 3.5, 1) has 4 elements).
    n = std::ceil((end.to<double>() - start.to<double>()) / step.to<double>());
  }
  if (!(n >= 0 && n <= static_cast<double>(kMaxInt64)))
    return invalid("arange: invalid size %g, possible overflow (start %s, end %s, step %s)", n,
                   start.to_string(), end.to_string(), step.to_string());
  r->n = static_cast<int64_t>(n);
  r->start_i = *s;
  r->step_i = *st;
  return absl::OkStatus();
}

absl::Status floating_range(const Scalar& start, const Scalar& end, const Scalar& step,
                            RangeSpec* r) {
  // acc_type of float32 and float64 on the CPU is double.
  const double s = start.to<double>(), e = end.to<double>(), st = step.to<double>();
  if (!(st > 0 || st < 0)) return nonzero_step(step);  // NaN too, as in ATen
  if (!std::isfinite(s) || !std::isfinite(e))
    return invalid("arange: unsupported range %s -> %s; start and end must be finite",
                   start.to_string(), end.to_string());
  SLOTH_RETURN_IF_ERROR(check_step_sign(st > 0, st < 0, e >= s, e <= s, start, end, step));
  const double n = std::ceil((e - s) / st);
  if (!(n >= 0 && n <= static_cast<double>(kMaxInt64)))
    return invalid("arange: invalid size %g, possible overflow (start %s, end %s, step %s)", n,
                   start.to_string(), end.to_string(), step.to_string());
  r->n = static_cast<int64_t>(n);
  r->start_d = s;
  r->step_d = st;
  return absl::OkStatus();
}

}  // namespace

bool RangeSpec::exact_in_double() const {
  if (!integral()) return true;
  // 2^52 bounds keep start, the last element and every i * step within 2^53: the kernel's
  // start + i * step in double is then exact.
  constexpr __int128 k = static_cast<__int128>(1) << 52;
  const __int128 last = static_cast<__int128>(start_i) + static_cast<__int128>(n > 0 ? n - 1 : 0) * step_i;
  auto in = [&](__int128 v) { return v >= -k && v <= k; };
  return in(start_i) && in(step_i) && in(last);
}

absl::StatusOr<RangeSpec> range_rule(const Scalar& start, const Scalar& end, const Scalar& step,
                                     std::optional<DType> dtype) {
  RangeSpec r;
  const bool any_floating = start.is_floating() || end.is_floating() || step.is_floating();
  r.dtype = dtype ? *dtype : any_floating ? kDefaultFloat : DType::kInt64;
  if (r.dtype == DType::kBool)
    return invalid("arange: bool results are not supported (as in PyTorch); ask for kInt64 or "
                   "a floating dtype");
  SLOTH_RETURN_IF_ERROR(r.integral() ? integral_range(start, end, step, &r)
                                     : floating_range(start, end, step, &r));
  return r;
}

}  // namespace sloth
