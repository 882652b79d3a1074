// Tensor::to_string (and operator<<): PyTorch 1.13's repr(tensor), character for character,
// with its default print options (precision 4, summarize above 1000 elements with 3 edge
// items, 80 columns). What a user compares against Python output should read the same.
//
// The rules, from torch/_tensor_str.py:
// - one formatter for the whole tensor, built from the elements shown: integer dtypes print
//   as integers padded to the widest; floating dtypes print in "int mode" (`2.`) when every
//   nonzero finite element is integral, in fixed `%.4f` otherwise, and in `%.4e` when the
//   nonzero finite magnitudes span more than 1000x, exceed 1e8, or (not int mode) go below
//   1e-4; every element is right-aligned to the widest;
// - rows wrap at 80 columns; above 1000 elements each dim shows its first and last 3 entries
//   around "...";
// - suffixes: dtype= unless float32, int64 or bool; device= off the CPU; grad_fn=<...> or
//   requires_grad=True; an empty tensor shows size= unless 1-dim.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "lazy/device_data.h"
#include "sloth/dispatch.h"
#include "sloth/tensor.h"

namespace sloth {
namespace {

constexpr int kPrecision = 4;
constexpr int kEdgeItems = 3;
constexpr int kLineWidth = 80;
constexpr int64_t kThreshold = 1000;

// Python's "{:{width}.4e}": "nan" and "inf" without a sign for nan (printf may write -nan).
std::string sci(double v, int width) {
  char buf[64];
  if (std::isnan(v)) std::snprintf(buf, sizeof buf, "%*s", width, "nan");
  else if (std::isinf(v)) std::snprintf(buf, sizeof buf, "%*s", width, v > 0 ? "inf" : "-inf");
  else std::snprintf(buf, sizeof buf, "%*.*e", width, kPrecision, v);
  return buf;
}
// Python's "{:.Nf}".
std::string fixed(double v, int precision) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

// The tensor's elements, read in place (only those printed are read: a summarized tensor of
// 1e8 elements is not copied): as double for floating dtypes, as exact integers otherwise.
// Indices are storage offsets of the host data.
struct Values {
  const lazy::DeviceData& d;
  bool floating() const { return is_floating(d.dtype); }
  double f(int64_t k) const {
    return visit_dtype(d.dtype, [&](auto z) {
      return static_cast<double>(static_cast<const decltype(z)*>(d.storage->data())[k]);
    });
  }
  int64_t i(int64_t k) const {
    return visit_dtype(d.dtype, [&](auto z) {
      return static_cast<int64_t>(static_cast<const decltype(z)*>(d.storage->data())[k]);
    });
  }
};

class Formatter {
 public:
  // `shown`: the storage offsets of the elements that will be printed.
  Formatter(const Values& v, const std::vector<int64_t>& shown) : floating_(v.floating()) {
    if (!floating_) {
      for (int64_t k : shown) width_ = std::max(width_, static_cast<int>(int_str(v, k).size()));
      return;
    }
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (int64_t k : shown) {
      const double x = v.f(k);
      if (!std::isfinite(x) || x == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(x));
      hi = std::max(hi, std::fabs(x));
      if (x != std::ceil(x)) int_mode_ = false;
    }
    if (!any) return;
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (int64_t k : shown) {
      const double x = v.f(k);
      if (!std::isfinite(x) || x == 0) continue;
      const int w = sci_       ? static_cast<int>(sci(x, 0).size())
                    : int_mode_ ? static_cast<int>(fixed(x, 0).size()) + 1
                                : static_cast<int>(fixed(x, kPrecision).size());
      width_ = std::max(width_, w);
    }
  }
  int width() const { return width_; }
  std::string format(const Values& v, int64_t k) const {
    std::string s;
    if (!floating_) {
      s = int_str(v, k);
    } else if (sci_) {
      s = sci(v.f(k), width_);
    } else if (int_mode_) {
      const double x = v.f(k);
      s = fixed(x, 0);
      if (std::isfinite(x)) s += '.';
    } else {
      s = fixed(v.f(k), kPrecision);
    }
    if (static_cast<int>(s.size()) < width_) s.insert(0, width_ - s.size(), ' ');
    return s;
  }

 private:
  static std::string int_str(const Values& v, int64_t k) {
    if (v.d.dtype == DType::kBool) return v.i(k) != 0 ? "True" : "False";
    return std::to_string(v.i(k));
  }
  bool floating_;
  bool int_mode_ = true;
  bool sci_ = false;
  int width_ = 1;
};

// Walks the printed part of a tensor (PyTorch's summarized view when `summarize`) through its
// data's strides.
class Printer {
 public:
  Printer(const Values& v, bool summarize)
      : v_(v), shape_(v.d.layout.shape), strides_(v.d.layout.strides), summarize_(summarize) {}

  void collect(size_t d, int64_t off, std::vector<int64_t>& out) const {
    if (d == shape_.size()) {
      out.push_back(off);
      return;
    }
    for (int64_t i : indices(d))
      if (i >= 0) collect(d + 1, off + i * strides_[d], out);
  }

  std::string render(const Formatter& f, size_t d, int64_t off, int indent) const {
    const size_t rank = shape_.size();
    if (d == rank) return f.format(v_, off);  // a 0-dim tensor
    std::vector<int64_t> idx = indices(d);
    if (d + 1 == rank) {
      std::vector<std::string> items;
      for (size_t j = 0; j < idx.size(); ++j) {
        if (idx[j] < 0) items.push_back(" ...");
        else items.push_back(f.format(v_, off + idx[j] * strides_[d]));
      }
      const int per_line = std::max(1, (kLineWidth - indent) / (f.width() + 2));
      std::string s = "[";
      for (size_t j = 0; j < items.size(); ++j) {
        if (j > 0) s += j % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        s += items[j];
      }
      return s + "]";
    }
    const std::string sep = "," + std::string(rank - d - 1, '\n') + std::string(indent + 1, ' ');
    std::string s = "[";
    for (size_t j = 0; j < idx.size(); ++j) {
      if (j > 0) s += sep;
      s += idx[j] < 0 ? "..." : render(f, d + 1, off + idx[j] * strides_[d], indent + 1);
    }
    return s + "]";
  }

 private:
  // The entries of dim `d` that are printed; -1 marks the "..." between the edges.
  std::vector<int64_t> indices(size_t d) const {
    const int64_t n = shape_[d];
    std::vector<int64_t> idx;
    if (summarize_ && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }
  const Values& v_;
  const Shape& shape_;
  const Strides& strides_;
  bool summarize_;
};

// PyTorch's dtype spelling: dtype_name's with the module prefix ("torch.float64").
std::string torch_dtype(DType t) { return std::string("torch.") + dtype_name(t); }

std::string py_tuple(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "[ Tensor (undefined) ]";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  const Shape& shape = this->shape();
  const DType dt = dtype();
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  std::string body;
  if (numel() == 0) {
    if (shape.size() != 1) suffixes.push_back("size=" + py_tuple(shape));
    if (dt != DType::kFloat32) suffixes.push_back("dtype=" + torch_dtype(dt));
    body = "[]";
  } else {
    if (dt != DType::kFloat32 && dt != DType::kInt64 && dt != DType::kBool)
      suffixes.push_back("dtype=" + torch_dtype(dt));
    const lazy::DeviceData data = internal::host_data(*this);
    const Values v{data};
    const Printer p(v, numel() > kThreshold);
    std::vector<int64_t> shown;
    p.collect(0, data.layout.offset, shown);
    body = p.render(Formatter(v, shown), 0, data.layout.offset, indent);
  }
  if (!is_leaf()) suffixes.push_back("grad_fn=<" + grad_fn_name() + ">");
  else if (requires_grad()) suffixes.push_back("requires_grad=True");

  // torch._tensor_str._add_suffixes: a suffix that would pass column 80 starts a new line.
  std::string s = prefix + body;
  const size_t nl = s.rfind('\n');
  int64_t last_line = static_cast<int64_t>(s.size()) -
                      (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& x : suffixes) {
    const int64_t n = static_cast<int64_t>(x.size());
    if (last_line + n + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + x;
      last_line = indent + n;
    } else {
      s += ", " + x;
      last_line += n + 2;
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const SizesRef& v) { return os << shape_str(v); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace sloth
