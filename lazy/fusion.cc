#include "lazy/fusion.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "lazy/span_hash.h"

namespace sloth::lazy {
namespace {

// A shape as a StrFormat %s argument, printed only if the message is formatted.
struct ShapeText {
  explicit ShapeText(IntSpan s) : shape(s) {}
  IntSpan shape;
  friend absl::FormatConvertResult<absl::FormatConversionCharSet::kString> AbslFormatConvert(
      const ShapeText& t, const absl::FormatConversionSpec&, absl::FormatSink* sink) {
    sink->Append(shape_str(t.shape));
    return {true};
  }
};

// Past this many instructions a kernel is closed: the interpreter's program stays short
// and the per-kernel bookkeeping bounded.
constexpr size_t kMaxKernelInstrs = 128;
// Sibling fusion (independent instructions sharing a kernel) stops earlier: each sibling
// brings its own operands and outputs, and the tile interpreter's scratch registers for them
// should stay within a core's L2 on large loops.
constexpr size_t kMaxSiblingInstrs = 32;

KernelKind kind_of(OpId op) {
  switch (op_info(op).category) {
    case OpCategory::Unary: case OpCategory::Binary: case OpCategory::Ternary:
      return KernelKind::kElementwise;
    case OpCategory::Reduce: return KernelKind::kReduce;
    case OpCategory::Matmul: return KernelKind::kMatmul;
    case OpCategory::View: return KernelKind::kView;
    default: return KernelKind::kOther;
  }
}

const char* kind_name(KernelKind k) {
  static const char* names[] = {"elementwise", "reduce", "matmul", "view", "other"};
  return names[static_cast<int>(k)];
}

struct Group {
  KernelKind kind;
  Dims loop;       // elementwise: the loop shape; reduce: its input shape (the prologue's)
  Dims out_shape;  // reduce/matmul: the shape their epilogue runs over
  int32_t anchor = -1;  // the reduce/matmul instruction
  std::vector<int32_t> instrs;
  // Instr::shape_id of `loop` (elementwise) or `out_shape` (reduce, matmul): -1 when unknown.
  int32_t shape_id = -1;
};

class Fuser {
 public:
  Fuser(Plan& p, std::vector<std::string>* reasons) : p_(p), reasons_(reasons) {
    // producer_ is filled as instructions are placed (place() reads only operands made by
    // earlier instructions), not in a walk of its own over every instruction.
    producer_.assign(p.slots.size(), -1);
    group_of_.assign(p.instrs.size(), -1);
  }

  void run() {
    for (size_t i = 0; i < p_.instrs.size(); ++i) place(static_cast<int32_t>(i));
    p_.kernels.clear();
    p_.kernels.reserve(groups_.size());
    for (Group& g : groups_) {
      if (g.instrs.empty()) continue;  // merged into a later kernel
      Kernel k;
      k.kind = g.kind;
      k.instrs = std::move(g.instrs);
      p_.kernels.push_back(std::move(k));
    }
  }

 private:
  void place(int32_t i) {
    const Instr& in = p_.instrs[i];
    producer_[in.out] = i;
    const KernelKind kind = kind_of(in.op);
    // The newest kernel that produces an operand: the only one this instruction may join
    // (every other operand then comes from an earlier kernel).
    int32_t best = -1, best_slot = -1;
    for (int32_t s : in.in)
      if (producer_[s] >= 0 && group_of_[producer_[s]] > best) {
        best = group_of_[producer_[s]];
        best_slot = s;
      }
    if (best >= 0) {
      FusionDecision d = can_join(groups_[best], best, i, best_slot);
      if (d) {
        // Other operands computed by older elementwise kernels of this loop shape: pull
        // those kernels in too (horizontal fusion), when that keeps the order valid.
        for (int32_t s : in.in) {
          if (producer_[s] < 0) continue;
          int32_t h = group_of_[producer_[s]];
          if (h == best) continue;
          FusionDecision m = can_merge(h, best, in.shape);
          if (m) merge(h, best);
          else note(i, h, m.reason);
        }
        join(best, i);
        return;
      }
      note(i, best, d.reason);
    }
    // An elementwise instruction that reads only graph inputs and scalars may run anywhere
    // before its readers: it joins the newest elementwise kernel of its loop shape (sibling
    // fusion), so a wide program of many small independent ops is a few kernels, not one each.
    if (best < 0 && kind == KernelKind::kElementwise) {
      const int32_t open = open_group(in);
      if (open >= 0) {
        const Group& G = groups_[open];
        if (G.kind == KernelKind::kElementwise && !G.instrs.empty() &&
            G.instrs.size() < kMaxSiblingInstrs) {
          join(open, i);
          return;
        }
      }
    }
    Group g{kind};
    if (kind == KernelKind::kElementwise) {
      g.loop = in.shape;
      g.shape_id = shape_id(in);
    }
    if (kind == KernelKind::kReduce) {
      g.loop = p_.slots[in.in[0]].shape;
      g.out_shape = in.shape;
      g.anchor = i;
      g.shape_id = shape_id(in);
    }
    if (kind == KernelKind::kMatmul) {
      g.out_shape = in.shape;
      g.anchor = i;
      g.shape_id = shape_id(in);
    }
    groups_.push_back(std::move(g));
    readers_.emplace_back();
    const int32_t gi = static_cast<int32_t>(groups_.size()) - 1;
    if (kind == KernelKind::kElementwise) {
      if (auto it = open_by_loop_.find(in.shape.span()); it != open_by_loop_.end()) it->second = gi;
      else open_by_loop_.emplace(in.shape.to_shape(), gi);
      last_loop_ = &in;
      last_open_ = gi;
    }
    // The newest producer could not be joined (a view of a reduction: a bias gradient
    // reshaped to the bias's shape): older elementwise producers of this loop shape still
    // move into the new kernel (an optimizer's update of a bias then runs as one kernel,
    // not one for its momentum decay and one for the rest).
    if (kind == KernelKind::kElementwise && best >= 0)
      for (int32_t s : in.in) {
        if (producer_[s] < 0) continue;
        const int32_t h = group_of_[producer_[s]];
        if (h == gi || groups_[h].kind != KernelKind::kElementwise) continue;
        if (can_merge(h, gi, in.shape)) merge(h, gi);
      }
    join(gi, i);
  }

  // open_by_loop_[shape] or -1, through a one-entry memo of the last shape looked up or
  // opened: a wide program's siblings mostly share one loop shape, so the map is hashed
  // once per shape change instead of once per instruction.
  // The memo compares shape numbers (Plan::same_shape), not the shapes.
  int32_t open_group(const Instr& in) {
    if (last_loop_ != nullptr && p_.same_shape(*last_loop_, in)) return last_open_;
    auto it = open_by_loop_.find(in.shape.span());
    last_loop_ = &in;
    last_open_ = it == open_by_loop_.end() ? -1 : it->second;
    return last_open_;
  }

  // in.shape_id where the plan numbers its shapes, else -1.
  int32_t shape_id(const Instr& in) const { return p_.shape_ids ? in.shape_id : -1; }

  // Kernel h (older than g) may move into g if it is a plain elementwise kernel over `loop`,
  // and no kernel that runs between them reads it (those would then run before their input).
  FusionDecision can_merge(int32_t h, int32_t g, IntSpan loop) const {
    const Group& H = groups_[h];
    if (H.kind != KernelKind::kElementwise || H.loop != loop)
      return no("kernel %d (%s %s) is not an elementwise kernel of loop shape %s", h,
                kind_name(H.kind), ShapeText(H.loop), ShapeText(loop));
    if (H.instrs.size() + groups_[g].instrs.size() >= kMaxKernelInstrs)
      return FusionDecision::no("merged kernel would pass the size limit");
    for (int32_t c : readers_[h])
      if (c != g && c < g)
        return no("kernel %d reads kernel %d's results and runs before kernel %d", c, h, g);
    return FusionDecision::yes();
  }

  void merge(int32_t h, int32_t g) {
    Group& H = groups_[h];
    Group& G = groups_[g];
    // H's instructions depend only on kernels older than H, so they may go anywhere in G
    // before G's first reader of one of their results (a member that started G reading H).
    size_t at = G.instrs.size();
    for (size_t j = 0; j < G.instrs.size() && at == G.instrs.size(); ++j)
      for (int32_t s : p_.instrs[G.instrs[j]].in)
        if (producer_[s] >= 0 && group_of_[producer_[s]] == h) at = j;
    G.instrs.insert(G.instrs.begin() + at, H.instrs.begin(), H.instrs.end());
    for (int32_t i : H.instrs) {
      group_of_[i] = g;
      for (int32_t s : p_.instrs[i].in)
        if (producer_[s] >= 0 && group_of_[producer_[s]] != g) readers_[group_of_[producer_[s]]].push_back(g);
    }
    for (int32_t c : readers_[h])
      if (c != g) readers_[g].push_back(c);
    H.instrs.clear();
    readers_[h].clear();
  }

  void join(int32_t g, int32_t i) {
    Group& G = groups_[g];
    const Instr& in = p_.instrs[i];
    for (int32_t s : in.in)
      if (producer_[s] >= 0 && group_of_[producer_[s]] != g) readers_[group_of_[producer_[s]]].push_back(g);
    if (kind_of(in.op) == KernelKind::kReduce && G.kind == KernelKind::kElementwise) {
      G.kind = KernelKind::kReduce;
      G.out_shape = in.shape;
      G.shape_id = shape_id(in);
      G.anchor = i;
    }
    G.instrs.push_back(i);
    group_of_[i] = g;
  }

  std::string val(int32_t slot) const {
    if (!reasons_) return {};
    const Slot& s = p_.slots[slot];
    int32_t pi = producer_[slot];
    return absl::StrFormat("%%%d (%s %s)", slot, pi >= 0 ? std::string(op_name(p_.instrs[pi].op)) : "input",
                           shape_str(s.shape));
  }

  // A "no" whose reason is formatted only when reasons are collected (SLOTH_LOG=fusion):
  // otherwise a plan formatted a message for nearly every instruction that starts a kernel
  // (1,600 for a 1,700-node graph), and nobody read them.
  template <typename... Args>
  FusionDecision no(const absl::FormatSpec<Args...>& f, const Args&... args) const {
    return FusionDecision::no(reasons_ ? absl::StrFormat(f, args...) : std::string());
  }

  FusionDecision can_join(const Group& G, int32_t gi, int32_t i, int32_t slot) const {
    const Instr& in = p_.instrs[i];
    const KernelKind kind = kind_of(in.op);
    if (kind == KernelKind::kMatmul)
      return no(
          "matmul operands are read from memory by BLAS: %s is materialized by kernel %d",
          val(slot), gi);
    if (kind == KernelKind::kView)
      return no(
          "view ops are zero-copy layout changes of memory: %s is materialized by kernel %d",
          val(slot), gi);
    if (kind == KernelKind::kOther)
      return no("%s has its own kernel (not fusible)", op_name(in.op));
    if (G.kind == KernelKind::kView || G.kind == KernelKind::kOther)
      return no("operand %s comes from a non-fusible %s kernel", val(slot), kind_name(G.kind));
    if (G.instrs.size() >= kMaxKernelInstrs)
      return no("kernel %d reached the size limit of %d instructions", gi, kMaxKernelInstrs);
    if (kind == KernelKind::kReduce) {
      if (G.kind == KernelKind::kReduce)
        return no("kernel %d already has a reduction (%s); one reduction per kernel", gi,
                  op_name(p_.instrs[G.anchor].op));
      if (G.kind == KernelKind::kMatmul)
        return no(
            "a matmul kernel takes only an elementwise epilogue; reducing %s starts a new kernel",
            val(slot));
      if (G.loop != p_.slots[in.in[0]].shape)
        return no("reduction input %s does not match the loop shape %s of kernel %d", val(slot),
                  ShapeText(G.loop), gi);
      return FusionDecision::yes();
    }
    // Elementwise. Its shape is compared by number where both have one (no read of it).
    const Dims& want = G.kind == KernelKind::kElementwise ? G.loop : G.out_shape;
    if (G.shape_id >= 0 && shape_id(in) >= 0 ? G.shape_id == in.shape_id : in.shape == want)
      return FusionDecision::yes();
    if (G.kind == KernelKind::kReduce)
      return no(
          "reduction %%%d (%s) output %s feeds a broadcast to loop shape %s: reduce-then-broadcast "
          "stores the reduced value and a new kernel reads it",
          p_.instrs[G.anchor].out, op_name(p_.instrs[G.anchor].op), ShapeText(G.out_shape),
          ShapeText(in.shape));
    if (G.kind == KernelKind::kMatmul)
      return no(
          "matmul output %s feeds loop shape %s; a matmul epilogue runs over its output shape",
          ShapeText(G.out_shape), ShapeText(in.shape));
    return no(
        "operand %s of loop shape %s is used at loop shape %s (different loop shape)",
        val(slot), ShapeText(want), ShapeText(in.shape));
  }

  void note(int32_t i, int32_t g, const std::string& why) {
    if (!reasons_) return;
    const Instr& in = p_.instrs[i];
    reasons_->push_back(absl::StrFormat("%%%d=%s not fused into kernel %d (%s): %s", in.out,
                                        op_name(in.op), g, kind_name(groups_[g].kind), why));
  }

  Plan& p_;
  std::vector<std::string>* reasons_;
  std::vector<int32_t> producer_;  // slot -> instruction
  std::vector<int32_t> group_of_;  // instruction -> group
  std::vector<Group> groups_;
  std::vector<std::vector<int32_t>> readers_;  // group -> groups that read its values
  // Newest elementwise group per loop shape; looked up by span (no Shape made per lookup).
  absl::flat_hash_map<Shape, int32_t, SpanHash, SpanEq> open_by_loop_;
  const Instr* last_loop_ = nullptr;  // open_group's memo: an instruction (of p_.instrs), its entry
  int32_t last_open_ = -1;
};

}  // namespace

void compute_kernel_outputs(Plan& p, bool liveness) {
  const size_t ns = p.slots.size();
  // Each instruction's result slot in kernel order (what the last loop reads, so it does not
  // visit the instructions a third time).
  size_t total = 0;
  for (const Kernel& k : p.kernels) total += k.instrs.size();
  std::vector<int32_t> out_at(total);
  std::vector<int32_t> kernel_of(ns, -1);
  std::vector<char> needed(ns, 0);
  for (int32_t o : p.outputs) needed[o] = 1;
  std::vector<int32_t> last;  // liveness: the last kernel reading each slot
  if (liveness) last.assign(ns, -1);
  p.read_counts.assign(liveness ? ns : 0, 0);
  int32_t* reads = liveness ? p.read_counts.data() : nullptr;
  // One walk over the instructions in kernel order (a plan of 1e5 instructions is ~10 MB: a
  // second walk reads it from memory again). Kernels run in order and an instruction's
  // operands are made before it, so each operand's kernel is known when its reader is seen.
  {
    size_t at = 0;
    for (size_t k = 0; k < p.kernels.size(); ++k)
      for (int32_t i : p.kernels[k].instrs) {
        const Instr& in = p.instrs[i];
        for (int32_t s : in.in) {
          if (kernel_of[s] >= 0 && kernel_of[s] != static_cast<int32_t>(k)) needed[s] = 1;
          if (liveness) {
            last[s] = static_cast<int32_t>(k);
            ++reads[s];
          }
        }
        out_at[at++] = in.out;
        kernel_of[in.out] = static_cast<int32_t>(k);
      }
  }
  size_t at = 0;
  for (Kernel& k : p.kernels) {
    k.outputs.clear();
    const bool all = k.kind == KernelKind::kView || k.kind == KernelKind::kOther;
    size_t count = 0;  // counted first: one allocation per kernel
    for (size_t j = 0; j < k.instrs.size(); ++j) count += all || needed[out_at[at + j]];
    k.outputs.reserve(count);
    for (size_t j = 0; j < k.instrs.size(); ++j) {
      const int32_t s = out_at[at + j];
      if (all || needed[s]) k.outputs.push_back(s);
    }
    at += k.instrs.size();
  }
  if (!liveness) return;
  // A value slot is released after the last kernel that reads it, unless it is a graph
  // output. Inputs and scalars are owned by the caller.
  for (int32_t o : p.outputs) last[o] = -1;
  p.free_after.assign(p.kernels.size(), {});
  // Value slots only: with ordered slots their range, without reading any slot's kind.
  const size_t first_value = p.slots_ordered ? static_cast<size_t>(p.num_inputs + p.num_scalars) : 0;
  for (size_t s = first_value; s < ns; ++s)
    if (last[s] >= 0 && (p.slots_ordered || p.slots[s].kind == SlotKind::kValue))
      p.free_after[last[s]].push_back(s);
}

void fuse_kernels(Plan& p, std::vector<std::string>* reasons, bool outputs) {
  Fuser(p, reasons).run();
  if (outputs) compute_kernel_outputs(p);
}

void unfused_kernels(Plan& p) {
  p.kernels.clear();
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    Kernel k;
    k.kind = kind_of(p.instrs[i].op);
    k.instrs.push_back(static_cast<int32_t>(i));
    p.kernels.push_back(std::move(k));
  }
  compute_kernel_outputs(p);
  // Unfused: every instruction's result is its kernel's output.
  for (size_t k = 0; k < p.kernels.size(); ++k) p.kernels[k].outputs = {p.instrs[k].out};
}

}  // namespace sloth::lazy
