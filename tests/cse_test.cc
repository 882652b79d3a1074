// Common-subexpression elimination over hand-built plans: repeats (commutative operands in
// either order) go and their readers read the kept result, different instructions stay,
// and a slot read by many different instructions (past the per-slot chain the pass keeps)
// still has every repeat found.
#include <gtest/gtest.h>

#include "lazy/cse.h"
#include "lazy/plan.h"

namespace sloth::lazy {
namespace {

struct Builder {
  Plan p;
  int32_t input() {
    Slot s;
    s.kind = SlotKind::kInput;
    s.index = p.num_inputs++;
    s.shape = Dims{4};
    p.slots.push_back(s);
    return static_cast<int32_t>(p.slots.size()) - 1;
  }
  int32_t op(OpId op, std::vector<int32_t> in, Shape shape = {4}) {
    Slot s;
    s.shape = shape;
    p.slots.push_back(s);
    const int32_t out = static_cast<int32_t>(p.slots.size()) - 1;
    Instr i{op, DType::kFloat32, shape, {}, {}, out};
    i.in.assign(in.begin(), in.end());
    p.instrs.push_back(i);
    return out;
  }
};

TEST(Cse, CommutativeRepeatGoesAndItsReaderReadsTheKeptValue) {
  Builder b;
  const int32_t x = b.input(), y = b.input();
  const int32_t m1 = b.op(OpId::kMul, {x, y});
  const int32_t m2 = b.op(OpId::kMul, {y, x});  // the same product
  const int32_t s1 = b.op(OpId::kSub, {x, y});
  const int32_t s2 = b.op(OpId::kSub, {y, x});  // not commutative: a different value
  const int32_t r = b.op(OpId::kAdd, {m2, s2});
  b.p.outputs = {r, m2, s1};
  EXPECT_EQ(eliminate_common_subexpressions(b.p), 1);
  ASSERT_EQ(b.p.instrs.size(), 4u);
  EXPECT_EQ(b.p.instrs[0].out, m1);
  EXPECT_EQ(b.p.instrs[1].out, s1);
  EXPECT_EQ(b.p.instrs[2].out, s2);
  EXPECT_EQ(b.p.instrs[3].out, r);
  EXPECT_EQ(b.p.instrs[3].in[0], m1) << "the reader of the repeat reads the kept product";
  EXPECT_EQ(b.p.instrs[3].in[1], s2);
  EXPECT_EQ(b.p.outputs, (std::vector<int32_t>{r, m1, s1}));
}

// 40 different instructions read x (more than the chain kept per slot), each repeated later
// in reverse order: every repeat goes, and so do repeats of their readers (which read the
// aliased slots).
TEST(Cse, ManyDifferentReadersOfOneSlotKeepEveryRepeatFound) {
  Builder b;
  const int32_t x = b.input();
  constexpr int kN = 40;
  std::vector<int32_t> first(kN), again(kN), neg1(kN), neg2(kN);
  for (int i = 0; i < kN; ++i) first[i] = b.op(OpId::kExp, {x}, Shape{i + 1});
  for (int i = kN - 1; i >= 0; --i) again[i] = b.op(OpId::kExp, {x}, Shape{i + 1});
  for (int i = 0; i < kN; ++i) neg1[i] = b.op(OpId::kNeg, {first[i]}, Shape{i + 1});
  for (int i = 0; i < kN; ++i) neg2[i] = b.op(OpId::kNeg, {again[i]}, Shape{i + 1});
  b.p.outputs = neg2;
  EXPECT_EQ(eliminate_common_subexpressions(b.p), 2 * kN);
  ASSERT_EQ(b.p.instrs.size(), 2u * kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(b.p.instrs[i].out, first[i]);
    EXPECT_EQ(b.p.instrs[kN + i].out, neg1[i]);
    EXPECT_EQ(b.p.instrs[kN + i].in[0], first[i]);
    EXPECT_EQ(b.p.outputs[i], neg1[i]);
  }
}

}  // namespace
}  // namespace sloth::lazy
