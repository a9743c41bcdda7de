//===- TensorCoreLayoutsTest.cpp - mma.sync / wgmma fragments -------------===//
//
// Each fragment is checked element by element against the PTX ISA's
// description, restated here as the instruction tables give it (slot i of
// lane l, groupID g = l / 4, threadID_in_group t = l % 4), not as bases.
//
//===----------------------------------------------------------------------===//

#include "LayoutTestUtils.h"

#include "sage/Layout/Encodings.h"

#include "gtest/gtest.h"

using namespace mlir::sage::layout;
using namespace mlir::sage::layout::test;

namespace {

// mma.sync m16n8 accumulator c0..c3 (f32 and s32 alike).
Coord mmaAccRef(int lane, int i) {
  int g = lane / 4, t = lane % 4;
  return {g + (i >= 2 ? 8 : 0), 2 * t + (i & 1)};
}
// mma.sync m16n8k16 A, f16/bf16 a0..a7.
Coord mmaA16Ref(int lane, int i) {
  int g = lane / 4, t = lane % 4;
  int row = (i == 0 || i == 1 || i == 4 || i == 5) ? g : g + 8;
  int col = i < 4 ? 2 * t + (i & 1) : 2 * t + (i & 1) + 8;
  return {row, col};
}
// mma.sync m16n8k32 A, s8 a0..a15.
Coord mmaA8Ref(int lane, int i) {
  int g = lane / 4, t = lane % 4;
  int row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
  int col = i < 8 ? 4 * t + (i & 3) : 4 * t + (i & 3) + 16;
  return {row, col};
}
// mma.sync m16n8k16 B b0..b3 as (n, k).
Coord mmaB16Ref(int lane, int i) {
  int g = lane / 4, t = lane % 4;
  return {g, i < 2 ? 2 * t + (i & 1) : 2 * t + (i & 1) + 8};
}
// mma.sync m16n8k32 B b0..b7 as (n, k).
Coord mmaB8Ref(int lane, int i) {
  int g = lane / 4, t = lane % 4;
  return {g, i < 4 ? 4 * t + (i & 3) : 4 * t + (i & 3) + 16};
}
// wgmma m64nN accumulator, CUTLASS CLayout_64xN: v = v0 + 2 v1 + 4 v2.
Coord wgmmaAccRef(int warp, int lane, int v) {
  int v0 = v & 1, v1 = (v >> 1) & 1, v2 = v >> 2;
  return {16 * (warp % 4) + lane / 4 + 8 * v1, 2 * (lane % 4) + v0 + 8 * v2};
}
// wgmma m64k32 8-bit A: register v1 + 2 v2, byte v0.
Coord wgmmaA8Ref(int warp, int lane, int slot) {
  int v0 = slot % 4, reg = slot / 4, v1 = reg & 1, v2 = reg >> 1;
  return {16 * (warp % 4) + lane / 4 + 8 * v1, 4 * (lane % 4) + v0 + 16 * v2};
}
// wgmma m64k16 16-bit A: element v0 of register v1 + 2 v2.
Coord wgmmaA16Ref(int warp, int lane, int slot) {
  int v0 = slot & 1, v1 = (slot >> 1) & 1, v2 = slot >> 2;
  return {16 * (warp % 4) + lane / 4 + 8 * v1, 2 * (lane % 4) + v0 + 8 * v2};
}

void expectBijective(const LinearLayout &l) {
  EXPECT_TRUE(l.isSurjective()) << l.toString();
  EXPECT_TRUE(l.isInjective()) << l.toString();
}

TEST(MmaV2Accumulator, OneWarpMatchesPtx) {
  LinearLayout l = mmaV2Accumulator({16, 8}, {1, 1});
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(l.apply(i, lane, 0), mmaAccRef(lane, i)) << lane << " " << i;
  expectBijective(l);
}

TEST(MmaV2Accumulator, WarpsAndRepeats) {
  // 2 x 2 warps: a 32 x 16 atom, repeated 2 x 2 over 64 x 32.
  LinearLayout l = mmaV2Accumulator({64, 32}, {2, 2});
  ASSERT_EQ(l.getNumRegisters(), 16);
  for (int w = 0; w < 4; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 16; ++r) {
        int rep = r / 4, repN = rep % 2, repM = rep / 2;
        Coord c = mmaAccRef(lane, r % 4);
        Coord ref{c.row + 16 * (w / 2) + 32 * repM,
                  c.col + 8 * (w % 2) + 16 * repN};
        ASSERT_EQ(l.apply(r, lane, w), ref) << w << " " << lane << " " << r;
      }
  expectBijective(l);
}

TEST(WgmmaAccumulator, MatchesCutlassFormula) {
  for (unsigned n : {8u, 16u, 64u, 256u}) {
    LinearLayout l = wgmmaAccumulator({64, n}, n, 1);
    ASSERT_EQ(l.getNumRegisters(), int64_t(n) / 2);
    for (int w = 0; w < 4; ++w)
      for (int lane = 0; lane < 32; ++lane)
        for (int v = 0; v < int(n) / 2; ++v)
          ASSERT_EQ(l.apply(v, lane, w), wgmmaAccRef(w, lane, v))
              << n << " " << w << " " << lane << " " << v;
    expectBijective(l);
  }
}

TEST(WgmmaAccumulator, WarpgroupsStackAlongMAndNRepeats) {
  // 2 warpgroups x m64n64 over 256 x 128: 2 N repeats, then 2 M repeats.
  LinearLayout l = wgmmaAccumulator({256, 128}, 64, 2);
  ASSERT_EQ(l.getNumRegisters(), 32 * 2 * 2);
  for (int w = 0; w < 8; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 128; ++r) {
        int v = r % 32, repN = (r / 32) % 2, repM = r / 64;
        Coord c = wgmmaAccRef(w, lane, v);
        Coord ref{c.row + 64 * (w / 4) + 128 * repM, c.col + 64 * repN};
        ASSERT_EQ(l.apply(r, lane, w), ref);
      }
  expectBijective(l);
  // N repeats continue the instruction's own column bits.
  EXPECT_EQ(wgmmaAccumulator({64, 256}, 128, 1),
            wgmmaAccumulator({64, 256}, 256, 1));
}

TEST(MmaV2Operands, AMatchesPtx) {
  LinearLayout a16 = mmaV2OperandA({16, 16}, 16, {1, 1});
  LinearLayout a8 = mmaV2OperandA({16, 32}, 8, {1, 1});
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(a16.apply(i, lane, 0), mmaA16Ref(lane, i)) << lane << " " << i;
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(a8.apply(i, lane, 0), mmaA8Ref(lane, i)) << lane << " " << i;
  }
  expectBijective(a16);
  expectBijective(a8);
}

TEST(MmaV2Operands, BMatchesPtx) {
  LinearLayout b16 = mmaV2OperandB({8, 16}, 16, {1, 1});
  LinearLayout b8 = mmaV2OperandB({8, 32}, 8, {1, 1});
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(b16.apply(i, lane, 0), mmaB16Ref(lane, i)) << lane << " " << i;
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(b8.apply(i, lane, 0), mmaB8Ref(lane, i)) << lane << " " << i;
  }
  expectBijective(b16);
  expectBijective(b8);
}

TEST(MmaV2Operands, WarpsOfTheOtherDimensionHoldCopies) {
  // Warps {2, 2}: warp w at (w / 2, w % 2). A is copied across the N warps
  // (warp bit 0), B across the M warps (warp bit 1).
  LinearLayout a = mmaV2OperandA({32, 64}, 8, {2, 2});
  EXPECT_EQ(a.getFreeMask(InDim::Warp), 0b01);
  EXPECT_EQ(a.getNumCopies(), 2);
  EXPECT_TRUE(a.isSurjective());
  LinearLayout b = mmaV2OperandB({16, 64}, 8, {2, 2});
  EXPECT_EQ(b.getFreeMask(InDim::Warp), 0b10);
  EXPECT_EQ(b.getNumCopies(), 2);
  EXPECT_TRUE(b.isSurjective());
  for (int w = 0; w < 4; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < a.getNumRegisters(); ++r) {
        // K repeats (2 of 32) first, then M (none: 2 warps x 16 = 32 rows).
        Coord c = mmaA8Ref(lane, r % 16);
        ASSERT_EQ(a.apply(r, lane, w),
                  (Coord{c.row + 16 * (w / 2), c.col + 32 * (r / 16)}));
      }
  // The B transposed is the [K, N] fragment.
  LinearLayout kn = mmaV2OperandB({8, 16}, 16, {1, 1}).transpose();
  EXPECT_EQ(kn.apply(2, 5, 0), (Coord{2 * 1 + 8, 1}));
}

TEST(WgmmaOperandA, MatchesCutlassFormula) {
  LinearLayout a8 = wgmmaOperandA({64, 32}, 8, 1);
  LinearLayout a16 = wgmmaOperandA({64, 16}, 16, 1);
  for (int w = 0; w < 4; ++w)
    for (int lane = 0; lane < 32; ++lane) {
      for (int s = 0; s < 16; ++s)
        ASSERT_EQ(a8.apply(s, lane, w), wgmmaA8Ref(w, lane, s));
      for (int s = 0; s < 8; ++s)
        ASSERT_EQ(a16.apply(s, lane, w), wgmmaA16Ref(w, lane, s));
    }
  expectBijective(a8);
  expectBijective(a16);
  // Per warp, the mma.sync fragments.
  for (int lane = 0; lane < 32; ++lane) {
    for (int s = 0; s < 16; ++s)
      EXPECT_EQ(a8.apply(s, lane, 0), mmaA8Ref(lane, s));
    for (int s = 0; s < 8; ++s)
      EXPECT_EQ(a16.apply(s, lane, 0), mmaA16Ref(lane, s));
  }
  // Two warpgroups over 128 x 64: K repeats, rows 64.. in warps 4..7.
  LinearLayout big = wgmmaOperandA({128, 64}, 8, 2);
  EXPECT_EQ(big.apply(16 + 3, 9, 5),
            (Coord{64 + 16 + 9 / 4, 4 * (9 % 4) + 3 + 32}));
  expectBijective(big);
}

TEST(Sigma16, SlotFormulaAndInverse) {
  // token t -> slot 4 * ((t / 2) % 4) + 2 * (t / 8) + t % 2, per 16.
  const int64_t slots[16] = {0, 1, 4, 5, 8,  9,  12, 13,
                             2, 3, 6, 7, 10, 11, 14, 15};
  for (int64_t t = 0; t < 64; ++t) {
    EXPECT_EQ(sigma16Slot(t), (t & ~15) + slots[t % 16]);
    EXPECT_EQ(sigma16Token(sigma16Slot(t)), t);
    EXPECT_EQ(sigma16Slot(sigma16Token(t)), t);
  }
}

TEST(Sigma16, PermutedAHoldsLogicalTokens) {
  // The fragment's physical k holds the token the pre-pass stored there.
  LinearLayout plain = wgmmaOperandA({64, 64}, 8, 1);
  LinearLayout permuted = wgmmaOperandA({64, 64}, 8, 1, /*sigma16=*/true);
  forEachIndex(plain, [&](HardwareIndex i) {
    Coord physical = plain.apply(i);
    EXPECT_EQ(permuted.apply(i),
              (Coord{physical.row, int32_t(sigma16Token(physical.col))}));
  });
  expectBijective(permuted);
  LinearLayout mma = mmaV2OperandA({32, 32}, 8, {2, 1}, /*sigma16=*/true);
  forEachIndex(mma, [&](HardwareIndex i) {
    Coord physical = mmaV2OperandA({32, 32}, 8, {2, 1}).apply(i);
    EXPECT_EQ(mma.apply(i),
              (Coord{physical.row, int32_t(sigma16Token(physical.col))}));
  });
}

TEST(Sigma16, PermutedAIsTheAccumulatorOn32Columns) {
  // Same element-to-thread map; only the register slot order differs.
  LinearLayout acc = wgmmaAccumulator({64, 32}, 32, 1);
  LinearLayout a = wgmmaOperandA({64, 32}, 8, 1, true);
  auto accHolders = holders(acc), aHolders = holders(a);
  for (auto &[element, idx] : aHolders) {
    ASSERT_EQ(idx.size(), 1u);
    ASSERT_EQ(accHolders[element].size(), 1u);
    EXPECT_EQ(idx[0].lane, accHolders[element][0].lane);
    EXPECT_EQ(idx[0].warp, accHolders[element][0].warp);
  }
}

TEST(DotOperand, DispatchesToTheFactories) {
  EXPECT_EQ(dotOperand({64, 64}, MmaVersion::MmaSync, 0, 8, {4, 1}, true),
            mmaV2OperandA({64, 64}, 8, {4, 1}, true));
  EXPECT_EQ(dotOperand({64, 64}, MmaVersion::MmaSync, 1, 16, {2, 2}),
            mmaV2OperandB({64, 64}, 16, {2, 2}));
  EXPECT_EQ(dotOperand({128, 64}, MmaVersion::Wgmma, 0, 8, {8, 1}),
            wgmmaOperandA({128, 64}, 8, 2));
}

TEST(TensorCoreLayouts, SmallTilesReplicate) {
  // A 16-row A operand in a 2-warpgroup program: warpgroup 1 and warps 1..3
  // of each hold copies of warp 0's rows.
  LinearLayout a = wgmmaOperandA({16, 32}, 8, 2);
  EXPECT_EQ(a.getFreeMask(InDim::Warp), 0b111);
  EXPECT_EQ(a.getNumCopies(), 8);
  EXPECT_TRUE(a.isSurjective());
}

} // namespace
