//===- LayoutConversionTest.cpp - classifying and planning conversions ----===//
//
// Every plan is checked by brute force: for every dst (register, lane,
// warp), the src index the plan names must hold the same element.
//
//===----------------------------------------------------------------------===//

#include "LayoutTestUtils.h"

#include "sage/Layout/Encodings.h"
#include "sage/Layout/LayoutConversion.h"

#include "gtest/gtest.h"

using namespace mlir::sage::layout;
using namespace mlir::sage::layout::test;

namespace {

void checkInThreadMap(const LinearLayout &src, const LinearLayout &dst) {
  SCOPED_TRACE(src.toString() + " -> " + dst.toString());
  ASSERT_EQ(classifyConversion(src, dst), ConversionKind::InThread);
  std::optional<llvm::SmallVector<int32_t>> map =
      getInThreadRegisterMap(src, dst);
  ASSERT_TRUE(map.has_value());
  ASSERT_EQ(int64_t(map->size()), dst.getNumRegisters());
  forEachIndex(dst, [&](HardwareIndex i) {
    ASSERT_EQ(src.apply((*map)[i.reg], i.lane, i.warp), dst.apply(i));
  });
  EXPECT_FALSE(getWarpShufflePlan(src, dst).has_value());
}

/// `expectedSelectMask` < 0: any mask.
void checkShufflePlan(const LinearLayout &src, const LinearLayout &dst,
                      int32_t expectedSelectMask = -1) {
  SCOPED_TRACE(src.toString() + " -> " + dst.toString());
  ASSERT_EQ(classifyConversion(src, dst), ConversionKind::WarpShuffle);
  EXPECT_FALSE(getInThreadRegisterMap(src, dst).has_value());
  std::optional<WarpShufflePlan> plan = getWarpShufflePlan(src, dst);
  ASSERT_TRUE(plan.has_value());
  if (expectedSelectMask >= 0) {
    EXPECT_EQ(plan->getRegisterSelectMask(), expectedSelectMask);
  }
  forEachIndex(dst, [&](HardwareIndex i) {
    int32_t lane = plan->getSrcLane(i.reg, i.lane);
    int32_t reg = plan->getSrcRegister(i.reg, i.lane);
    ASSERT_LT(lane, 32);
    ASSERT_LT(reg, src.getNumRegisters());
    ASSERT_EQ(src.apply(reg, lane, i.warp), dst.apply(i))
        << "dst reg " << i.reg << " lane " << i.lane;
  });
}

void checkComposeInverse(const LinearLayout &src, const LinearLayout &dst) {
  std::optional<HardwareIndexMap> map = composeInverse(src, dst);
  ASSERT_TRUE(map.has_value());
  forEachIndex(dst, [&](HardwareIndex i) {
    ASSERT_EQ(src.apply(map->apply(i)), dst.apply(i));
  });
}

TEST(LayoutConversion, SameLayoutIsInThreadIdentity) {
  for (const LinearLayout &l :
       {blocked({64, 64}, {1, 4}, {4, 8}, {4, 1}),
        wgmmaAccumulator({128, 128}, 128, 2),
        slice(blocked({64, 64}, {1, 4}, {4, 8}, {4, 1}), 1)}) {
    checkInThreadMap(l, l);
    std::optional<llvm::SmallVector<int32_t>> map =
        getInThreadRegisterMap(l, l);
    ASSERT_TRUE(map.has_value());
    for (int32_t r = 0; r < int32_t(map->size()); ++r)
      EXPECT_EQ((*map)[r], r);
  }
}

TEST(LayoutConversion, WgmmaAccumulatorToInt8A) {
  // Without sigma16 each quad must exchange bytes: a warp shuffle whose
  // source register depends on lane bit 1 (k = 4t + .. vs n = 2t + ..).
  LinearLayout acc = wgmmaAccumulator({64, 32}, 32, 1);
  LinearLayout a = wgmmaOperandA({64, 32}, 8, 1);
  checkShufflePlan(acc, a, /*expectedSelectMask=*/0b10);
  // Shuffles stay inside quads: the source lane differs in the low 2 bits.
  std::optional<WarpShufflePlan> plan = getWarpShufflePlan(acc, a);
  ASSERT_TRUE(plan.has_value());
  for (int32_t r = 0; r < a.getNumRegisters(); ++r)
    for (int32_t l = 0; l < 32; ++l)
      EXPECT_EQ(plan->getSrcLane(r, l) >> 2, l >> 2);
  // With sigma16 the pack is in-thread.
  LinearLayout aPermuted = wgmmaOperandA({64, 32}, 8, 1, /*sigma16=*/true);
  checkInThreadMap(acc, aPermuted);
  // Which accumulator slot each A byte takes: slot a = a0 + 2 a1 + 4 a2 + 8 a3
  // of A holds logical column a0 + 8 a1 (+ row 8 a2, col 16 a3), accumulator
  // slot v0 + 2 v1 + 4 v2 + 8 v3 holds column v0 + 8 v2 (row 8 v1, col 16 v3).
  std::optional<llvm::SmallVector<int32_t>> map =
      getInThreadRegisterMap(acc, aPermuted);
  ASSERT_TRUE(map.has_value());
  const int32_t expected[16] = {0, 1, 4,  5,  2,  3,  6,  7,
                                8, 9, 12, 13, 10, 11, 14, 15};
  for (int32_t s = 0; s < 16; ++s)
    EXPECT_EQ((*map)[s], expected[s]) << s;
}

TEST(LayoutConversion, LargerTilesAndMmaSync) {
  // Full tiles: 2 warpgroups, 128 x 128, instrN 128.
  checkInThreadMap(wgmmaAccumulator({128, 128}, 128, 2),
                   wgmmaOperandA({128, 128}, 8, 2, true));
  checkShufflePlan(wgmmaAccumulator({128, 128}, 128, 2),
                   wgmmaOperandA({128, 128}, 8, 2), 0b10);
  // mma.sync: the same holds per warp when warps only split M.
  checkInThreadMap(mmaV2Accumulator({64, 64}, {4, 1}),
                   mmaV2OperandA({64, 64}, 8, {4, 1}, true));
  checkShufflePlan(mmaV2Accumulator({64, 64}, {4, 1}),
                   mmaV2OperandA({64, 64}, 8, {4, 1}), 0b10);
  // 16-bit: the accumulator already is the A fragment (FA2's P).
  checkInThreadMap(mmaV2Accumulator({64, 64}, {4, 1}),
                   mmaV2OperandA({64, 64}, 16, {4, 1}));
  checkInThreadMap(wgmmaAccumulator({64, 64}, 64, 1),
                   wgmmaOperandA({64, 64}, 16, 1));
  // Warps splitting N: A needs every column in every N warp.
  EXPECT_EQ(classifyConversion(mmaV2Accumulator({64, 64}, {2, 2}),
                               mmaV2OperandA({64, 64}, 16, {2, 2})),
            ConversionKind::SharedMemory);
}

TEST(LayoutConversion, BlockedAndMmaAreNotInThread) {
  LinearLayout b = blocked({64, 64}, {1, 4}, {4, 8}, {4, 1});
  LinearLayout mma = mmaV2Accumulator({64, 64}, {4, 1});
  EXPECT_NE(classifyConversion(b, mma), ConversionKind::InThread);
  EXPECT_NE(classifyConversion(mma, b), ConversionKind::InThread);
  // The warps cover rows 4w.. in the blocked layout, 16w.. in the mma one.
  EXPECT_EQ(classifyConversion(b, mma), ConversionKind::SharedMemory);
  checkComposeInverse(b, mma);
  checkComposeInverse(mma, b);
  // With the same rows per warp, only lanes move.
  LinearLayout rows16 = blocked({64, 64}, {2, 4}, {8, 4}, {4, 1});
  checkShufflePlan(rows16, mma);
  checkShufflePlan(mma, rows16);
}

TEST(LayoutConversion, DifferentWarpsNeedSharedMemory) {
  LinearLayout a = mmaV2Accumulator({64, 64}, {4, 1});
  LinearLayout b = mmaV2Accumulator({64, 64}, {2, 2});
  EXPECT_EQ(classifyConversion(a, b), ConversionKind::SharedMemory);
  EXPECT_EQ(classifyConversion(b, a), ConversionKind::SharedMemory);
  EXPECT_FALSE(getInThreadRegisterMap(a, b).has_value());
  EXPECT_FALSE(getWarpShufflePlan(a, b).has_value());
  checkComposeInverse(a, b);
  // Same registers and lanes, warps swapped: each thread's registers hold
  // other rows, so even this needs shared memory.
  LinearLayout rows = blocked({64, 64}, {1, 4}, {4, 8}, {4, 1});
  LinearLayout swapped = rows.withBases(InDim::Warp, {{8, 0}, {4, 0}});
  EXPECT_EQ(classifyConversion(rows, swapped), ConversionKind::SharedMemory);
  checkComposeInverse(rows, swapped);
}

TEST(LayoutConversion, ShufflePlansWithinOneWarp) {
  // A transpose of the thread grid inside one warp.
  LinearLayout rowsOfLanes = blocked({32, 32}, {1, 4}, {4, 8}, {1, 1});
  LinearLayout colsOfLanes = blocked({32, 32}, {4, 1}, {8, 4}, {1, 1});
  checkShufflePlan(rowsOfLanes, colsOfLanes);
  checkShufflePlan(colsOfLanes, rowsOfLanes);
  // Lane bits 0 and 1 swapped: one shfl per register.
  LinearLayout xorLanes = rowsOfLanes.withBases(
      InDim::Lane, {{0, 8}, {0, 4}, {0, 16}, {1, 0}, {2, 0}});
  checkShufflePlan(rowsOfLanes, xorLanes, 0);
  // From a replicated source (every lane holds the whole 4 x 4 tile).
  LinearLayout everywhere = LinearLayout::distributed(
      {4, 4}, {{0, 1}, {0, 2}, {1, 0}, {2, 0}}, {{}, {}, {}, {}, {}}, {});
  LinearLayout spread = blocked({4, 4}, {1, 1}, {4, 8}, {1, 1});
  EXPECT_EQ(classifyConversion(spread, everywhere),
            ConversionKind::WarpShuffle);
  checkShufflePlan(spread, everywhere, /*expectedSelectMask=*/0);
  // The other way every thread already has its element, but which register
  // depends on the lane: not a renaming, so a (degenerate) shuffle.
  EXPECT_EQ(classifyConversion(everywhere, spread),
            ConversionKind::WarpShuffle);
  checkShufflePlan(everywhere, spread, /*expectedSelectMask=*/0b11011);
}

TEST(LayoutConversion, ComposeInverseNeedsEveryElement) {
  LinearLayout full = blocked({8, 8}, {1, 1}, {4, 8}, {2, 1});
  LinearLayout half = LinearLayout::distributed(
      {8, 8}, {}, {{0, 1}, {0, 2}, {0, 4}, {1, 0}, {2, 0}}, {{}});
  EXPECT_FALSE(composeInverse(half, full).has_value());
  checkComposeInverse(full, half);
  EXPECT_EQ(classifyConversion(half, full), ConversionKind::SharedMemory);
}

TEST(LayoutConversion, KindNames) {
  EXPECT_STREQ(getConversionKindName(ConversionKind::InThread), "in_thread");
  EXPECT_STREQ(getConversionKindName(ConversionKind::WarpShuffle),
               "warp_shuffle");
  EXPECT_STREQ(getConversionKindName(ConversionKind::SharedMemory),
               "shared_memory");
}

} // namespace
