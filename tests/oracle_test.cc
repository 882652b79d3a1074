// The PyTorch oracle: thousands of random programs (views, in-place writes through views and
// detach() aliases of saved values, no_grad blocks, syncs, backward, retain_graph, create_graph, func::grad), each run
// by PyTorch 1.13 with every value, grad and error it produced committed beside this file
// (tests/oracle/*.json, made by tools/oracle/gen.py). Each program is replayed here through
// sloth's public API and must behave exactly as PyTorch did: same values (1e-4 + 1e-3*|x|),
// same defined/undefined grads, requires_grad and is_leaf, an error exactly where PyTorch
// raised one (after which the program goes on as if the statement had not run), no error
// elsewhere, and never an internal error.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "sloth/func.h"
#include "sloth/sloth.h"

namespace sloth {
namespace {

using json = nlohmann::json;

struct Difference {
  std::string where;
  std::string what;
};

Shape shape_of(const json& j) {
  Shape s;
  for (const auto& d : j) s.push_back(d.get<int64_t>());
  return s;
}

double number(const json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  return j.get<double>();
}

bool close(double expected, double got) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= 1e-4 + 1e-3 * std::fabs(expected);
}

std::string compare_values(const json& expected, const std::vector<double>& got) {
  if (expected.size() != got.size())
    return "expected " + std::to_string(expected.size()) + " values, got " + std::to_string(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double e = number(expected[i]);
    if (!close(e, got[i])) {
      std::ostringstream os;
      os << "element " << i << ": expected " << e << ", got " << got[i];
      return os.str();
    }
  }
  return "";
}

Tensor binary(const std::string& op, const Tensor& a, const Tensor& b, const json& st) {
  if (op == "add") return st.contains("alpha") ? add(a, b, st["alpha"].get<double>()) : add(a, b);
  if (op == "sub") return sub(a, b);
  if (op == "mul") return mul(a, b);
  if (op == "div") return div(a, b);
  if (op == "maximum") return maximum(a, b);
  if (op == "minimum") return minimum(a, b);
  throw std::logic_error("oracle: unknown binary op " + op);
}

Tensor unary(const std::string& op, const Tensor& x) {
  if (op == "neg") return neg(x);
  if (op == "abs") return abs(x);
  if (op == "exp") return exp(x);
  if (op == "log") return log(x);
  if (op == "sqrt") return sqrt(x);
  if (op == "rsqrt") return rsqrt(x);
  if (op == "tanh") return tanh(x);
  if (op == "sigmoid") return sigmoid(x);
  if (op == "relu") return relu(x);
  if (op == "sin") return sin(x);
  if (op == "cos") return cos(x);
  if (op == "square") return square(x);
  if (op == "silu") return silu(x);
  if (op == "sign") return sign(x);
  if (op == "floor") return floor(x);
  if (op == "gelu") return gelu(x);
  if (op == "erf") return erf(x);
  throw std::logic_error("oracle: unknown unary op " + op);
}

Tensor reduce(const Tensor& x, const json& st) {
  const std::string op = st["op"];
  const bool keep = st.value("keep", false);
  const bool all = !st.contains("dims") || st["dims"].is_null();
  const Shape dims = all ? Shape{} : shape_of(st["dims"]);
  if (op == "sum") return all ? sum(x) : sum(x, dims, keep);
  if (op == "mean") return all ? mean(x) : mean(x, dims, keep);
  if (op == "amax") return amax(x, dims, keep);
  if (op == "amin") return amin(x, dims, keep);
  if (op == "prod") return all ? x.prod() : x.prod(dims, keep);
  if (op == "logsumexp") return logsumexp(x, dims, keep);
  if (op == "var") return var(x, dims, st.value("unb", true), keep);
  if (op == "std") return x.std(dims, st.value("unb", true), keep);
  throw std::logic_error("oracle: unknown reduction " + op);
}

Tensor view(const Tensor& x, const json& st) {
  const std::string v = st["v"];
  const json p = st.value("p", json::array());
  auto i = [&](size_t k) { return p[k].get<int64_t>(); };
  if (v == "view") return x.view(shape_of(p));
  if (v == "reshape") return x.reshape(shape_of(p));
  if (v == "flatten") return x.flatten(i(0), i(1));
  if (v == "transpose") return x.transpose(i(0), i(1));
  if (v == "t") return x.t();
  if (v == "permute") return x.permute(shape_of(p));
  if (v == "slice") return x.slice(i(0), i(1), i(2), i(3));
  if (v == "narrow") return x.narrow(i(0), i(1), i(2));
  if (v == "select") return x.select(i(0), i(1));
  if (v == "expand") return x.expand(shape_of(p));
  if (v == "squeeze") return p.empty() ? x.squeeze() : x.squeeze(i(0));
  if (v == "unsqueeze") return x.unsqueeze(i(0));
  if (v == "diagonal") return x.diagonal(i(0), i(1), i(2));
  if (v == "as_strided") return x.as_strided(shape_of(st["size"]), shape_of(st["stride"]), i(0));
  if (v == "detach") return x.detach();
  if (v == "split") return x.split(i(0), i(1)).at(i(2));
  if (v == "chunk") return x.chunk(i(0), i(1)).at(i(2));
  if (v == "contiguous") return x.contiguous();
  if (v == "clone") return x.clone();
  throw std::logic_error("oracle: unknown view " + v);
}

// One program's interpreter; mirrors exec_stmt in tools/oracle/gen.py.
class Replay {
 public:
  Replay(std::string id, std::vector<Difference>* diffs) : id_(std::move(id)), diffs_(diffs) {}

  // Runs the statements; returns false after the first difference (the states diverged).
  bool run(const json& stmts, std::vector<Tensor>& vars) {
    for (size_t n = 0; n < stmts.size(); ++n) {
      const json& st = stmts[n];
      const bool expect_error = st.value("err", 0) != 0;
      std::string error;
      bool internal = false;
      if (std::getenv("SLOTH_ORACLE_TRACE")) std::fprintf(stderr, "  %zu\n", n);
      try {
        exec(st, vars);
      } catch (const Error& e) {
        error = e.what();
      } catch (const std::exception& e) {
        error = std::string("non-sloth exception: ") + e.what();
        internal = true;
      }
      if (error.find("internal") != std::string::npos) internal = true;
      if (!error.empty() && (internal || !expect_error)) {
        differ(n, st, "sloth raised where PyTorch did not: " + error);
        return false;
      }
      if (error.empty() && expect_error) {
        differ(n, st, "PyTorch raised (" + st.value("msg", std::string()) + "), sloth did not");
        return false;
      }
      if (!mismatch_.empty()) {
        differ(n, st, mismatch_);
        return false;
      }
    }
    return true;
  }

 private:
  void differ(size_t n, const json& st, std::string what) {
    std::string s = st.dump();
    if (s.size() > 400) s = s.substr(0, 400) + "...";
    diffs_->push_back({id_ + " statement " + std::to_string(n) + " " + s, std::move(what)});
  }

  // null or absent: LibTorch's default (retain_graph = create_graph).
  static std::optional<bool> retain(const json& st) {
    if (!st.contains("retain") || st["retain"].is_null()) return std::nullopt;
    return st["retain"].get<bool>();
  }

  static Tensor& slot(std::vector<Tensor>& vars, int64_t o) {
    if (static_cast<size_t>(o) >= vars.size()) vars.resize(o + 1);
    return vars[o];
  }

  void exec(const json& st, std::vector<Tensor>& vars) {
    const std::string k = st["k"];
    std::vector<Tensor> a;
    if (st.contains("a"))
      for (const auto& i : st["a"]) a.push_back(vars.at(i.get<int64_t>()));
    const int64_t o = st.value("o", int64_t{-1});
    if (k == "leaf") {
      std::vector<float> vals;
      for (const auto& v : st["val"]) vals.push_back(static_cast<float>(v.get<double>()));
      Tensor t = from_vector<float>(vals, shape_of(st["shape"]));
      if (st.value("rg", false)) t.requires_grad_();
      slot(vars, o) = t;
    } else if (k == "un") {
      slot(vars, o) = unary(st["op"], a[0]);
    } else if (k == "bin") {
      slot(vars, o) = binary(st["op"], a[0], a[1], st);
    } else if (k == "sc") {
      const std::string op = st["op"];
      const double s = st["s"];
      slot(vars, o) = op == "add" ? a[0] + s : op == "sub" ? a[0] - s : op == "mul" ? a[0] * s
                    : op == "div" ? a[0] / s : pow(a[0], s);
    } else if (k == "cmp") {
      const std::string op = st["op"];
      const double s = st.value("s", 0.0);
      slot(vars, o) = op == "gt" ? a[0] > s : op == "lt" ? a[0] < s : op == "ge" ? a[0] >= s : a[0] <= s;
    } else if (k == "where") {
      slot(vars, o) = where(a[0], a[1], a[2]);
    } else if (k == "mfill") {
      slot(vars, o) = masked_fill(a[0], a[1], st["s"].get<double>());
    } else if (k == "clamp") {
      slot(vars, o) = clamp(a[0], st["lo"].get<double>(), st["hi"].get<double>());
    } else if (k == "red") {
      slot(vars, o) = reduce(a[0], st);
    } else if (k == "mm") {
      slot(vars, o) = matmul(a[0], a[1]);
    } else if (k == "sm") {
      const int64_t dim = st["dim"];
      slot(vars, o) = st["op"] == "softmax" ? softmax(a[0], dim) : log_softmax(a[0], dim);
    } else if (k == "view") {
      slot(vars, o) = view(a[0], st);
    } else if (k == "inp") {
      inplace(st, a);
    } else if (k == "nograd") {
      if (st["on"].get<bool>()) no_grad_.emplace();
      else no_grad_.reset();
    } else if (k == "sync") {
      mark_step();
    } else if (k == "read") {
      read(st, a[0]);
    } else if (k == "grad") {
      Tensor g = a[0].grad();
      const json& x = st["x"];
      if (x["v"].is_null() != !g.defined())
        mismatch_ = std::string("grad is ") + (g.defined() ? "defined" : "undefined") +
                    " but PyTorch's is " + (x["v"].is_null() ? "None" : "defined");
      else if (g.defined())
        if (std::string m = compare_values(x["v"], g.to_vector<double>()); !m.empty())
          mismatch_ = "grad " + m;
    } else if (k == "rg") {
      a[0].requires_grad_(st.value("on", true));
    } else if (k == "bw") {
      EnableGradGuard on;
      a[0].backward({}, retain(st), st.value("cg", false));
    } else if (k == "agrad") {
      std::vector<Tensor> ins(a.begin() + 1, a.end());
      std::vector<Tensor> gs;
      {
        EnableGradGuard on;
        gs = autograd::grad({a[0]}, ins, {}, retain(st), st.value("cg", false), true);
      }
      const json def = st.contains("x") ? st["x"]["def"] : json::array();
      for (size_t j = 0; j < gs.size(); ++j) {
        if (j < def.size() && def[j].get<bool>() != gs[j].defined())
          mismatch_ = "autograd::grad result " + std::to_string(j) + " is " +
                      (gs[j].defined() ? "defined" : "undefined") + " but PyTorch's is not";
        slot(vars, o + j) = gs[j];
      }
    } else if (k == "del") {
      vars.at(st["a"][0].get<int64_t>()) = Tensor();
    } else if (k == "fgrad") {
      const json& body = st["body"];
      const int64_t ret = st["ret"];
      auto f = [this, &body, ret](const Tensor& x) -> Tensor { return run_body(body, ret, x); };
      slot(vars, o) = func::grad(f)(a[0]);
    } else {
      throw std::logic_error("oracle: unknown statement " + k);
    }
  }

  // A func::grad body: its own variables, x first. Its statements never raise in PyTorch.
  Tensor run_body(const json& body, int64_t ret, const Tensor& x) {
    std::vector<Tensor> vars{x};
    for (const auto& st : body) exec(st, vars);
    return vars.at(ret);
  }

  void inplace(const json& st, std::vector<Tensor>& a) {
    const std::string op = st["op"];
    Tensor& x = a[0];
    if (op == "zero_") x.zero_();
    else if (op == "relu_") x.relu_();
    else if (op == "clamp_") x.clamp_(st["lo"].get<double>(), st["hi"].get<double>());
    else if (op == "fill_") x.fill_(st["s"].get<double>());
    else if (a.size() > 1) {
      if (op == "add_") x.add_(a[1]);
      else if (op == "sub_") x.sub_(a[1]);
      else if (op == "mul_") x.mul_(a[1]);
      else if (op == "div_") x.div_(a[1]);
      else if (op == "copy_") x.copy_(a[1]);
      else throw std::logic_error("oracle: unknown in-place op " + op);
    } else {
      const double s = st["s"];
      if (op == "add_") x.add_(s);
      else if (op == "sub_") x.sub_(s);
      else if (op == "mul_") x.mul_(s);
      else if (op == "div_") x.div_(s);
      else throw std::logic_error("oracle: unknown in-place op " + op);
    }
  }

  void read(const json& st, const Tensor& x) {
    const json& e = st["x"];
    if (x.shape() != shape_of(e["shape"])) {
      mismatch_ = "shape " + shape_str(x.shape()) + ", PyTorch's " + e["shape"].dump();
      return;
    }
    if (x.requires_grad() != e["rg"].get<bool>()) {
      mismatch_ = std::string("requires_grad is ") + (x.requires_grad() ? "true" : "false") +
                  " but PyTorch's is not";
      return;
    }
    if (!e["leaf"].is_null() && x.is_leaf() != e["leaf"].get<bool>()) {
      mismatch_ = std::string("is_leaf is ") + (x.is_leaf() ? "true" : "false") +
                  " but PyTorch's is not";
      return;
    }
    std::vector<double> got = x.to_vector<double>();
    if (std::string m = compare_values(e["v"], got); !m.empty()) mismatch_ = "value " + m;
  }

  std::string id_;
  std::vector<Difference>* diffs_;
  std::optional<NoGradGuard> no_grad_;
  std::string mismatch_;
};

json load(const std::string& name) {
  // SLOTH_ORACLE_DIR: replay another directory's programs (for triage).
  const char* dir = std::getenv("SLOTH_ORACLE_DIR");
  std::ifstream f((dir ? std::string(dir) : std::string("tests/oracle")) + "/" + name + ".json");
  if (!f) throw std::runtime_error("cannot open tests/oracle/" + name + ".json");
  return json::parse(f);
}

void replay_all(const std::string& name) {
  const json programs = load(name);
  if (!std::getenv("SLOTH_ORACLE_DIR")) ASSERT_GE(programs.size(), 500u);
  std::vector<Difference> diffs;
  size_t statements = 0, failed_programs = 0;
  const bool trace = std::getenv("SLOTH_ORACLE_TRACE") != nullptr;  // names each program first
  for (const auto& p : programs) {
    if (trace) std::fprintf(stderr, "%s\n", p["id"].get<std::string>().c_str());
    const size_t before = diffs.size();
    {
      std::vector<Tensor> vars;
      Replay r(p["id"], &diffs);
      r.run(p["s"], vars);
    }
    statements += p["s"].size();
    if (diffs.size() != before) ++failed_programs;
  }
  std::printf("oracle %s: %zu programs, %zu statements, %zu programs differ from PyTorch\n",
              name.c_str(), programs.size(), statements, failed_programs);
  // SLOTH_ORACLE_ALL=1 prints every difference (for triage); the failure lists the first 40.
  if (std::getenv("SLOTH_ORACLE_ALL"))
    for (const auto& d : diffs) std::printf("DIFF %s\n  %s\n", d.where.c_str(), d.what.c_str());
  for (size_t i = 0; i < diffs.size() && i < 40; ++i)
    ADD_FAILURE() << diffs[i].where << "\n  " << diffs[i].what;
  EXPECT_EQ(failed_programs, 0u);
}

TEST(Oracle, SimplePrograms) { replay_all("simple"); }
TEST(Oracle, HarderPrograms) { replay_all("harder"); }
TEST(Oracle, SecondOrderPrograms) { replay_all("second_order"); }
TEST(Oracle, VersionCounterPrograms) { replay_all("versions"); }

}  // namespace
}  // namespace sloth
