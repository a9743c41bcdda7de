//===- LinearLayoutTest.cpp - the algebra of linear layouts ---------------===//

#include "LayoutTestUtils.h"

#include "sage/Layout/Encodings.h"
#include "sage/Layout/SharedLayouts.h"

#include "gtest/gtest.h"

using namespace mlir::sage::layout;
using namespace mlir::sage::layout::test;

namespace {

/// 8 x 8 tile, 4 registers, 4 lanes, 2 warps; lane bit 1 is a copy.
LinearLayout smallLayout() {
  return LinearLayout::distributed({8, 8}, {{0, 1}, {0, 2}}, {{1, 0}, {0, 0}},
                                   {{4, 0}});
}

TEST(LinearLayout, ApplyXorsTheBasesOfSetBits) {
  LinearLayout l = smallLayout();
  EXPECT_EQ(l.apply(0, 0, 0), (Coord{0, 0}));
  EXPECT_EQ(l.apply(3, 0, 0), (Coord{0, 3}));
  EXPECT_EQ(l.apply(2, 1, 1), (Coord{5, 2}));
  EXPECT_EQ(l.apply(2, 3, 1), (Coord{5, 2})); // lane bit 1 changes nothing
  EXPECT_EQ(l.applyDim(InDim::Warp, 1), (Coord{4, 0}));
  // Bases whose coordinates overlap XOR rather than add.
  LinearLayout x = LinearLayout::distributed({4, 4}, {{1, 1}, {0, 1}}, {}, {});
  EXPECT_EQ(x.apply(3, 0, 0), (Coord{1, 0}));
}

TEST(LinearLayout, Getters) {
  LinearLayout l = smallLayout();
  EXPECT_TRUE(l.isDistributed());
  EXPECT_FALSE(l.isShared());
  EXPECT_EQ(l.getShape(), (TileShape{8, 8}));
  EXPECT_EQ(l.getNumRegisters(), 4);
  EXPECT_EQ(l.getNumLanes(), 4);
  EXPECT_EQ(l.getNumWarps(), 2);
  EXPECT_EQ(l.getDomainSize(), 32);
  EXPECT_TRUE(l.hasInDim(InDim::Lane));
  EXPECT_FALSE(l.hasInDim(InDim::Offset));
  EXPECT_EQ(l.getBases(InDim::Offset).size(), 0u);
  EXPECT_STREQ(getInDimName(InDim::Offset), "offset");
}

TEST(LinearLayout, SurjectivityInjectivityAndCopies) {
  LinearLayout l = smallLayout();
  EXPECT_FALSE(l.isSurjective()); // rows 2, 3, 6, 7 are never reached
  EXPECT_FALSE(l.isInjective());
  EXPECT_EQ(l.getRank(), 4u);
  EXPECT_EQ(l.getFreeMask(InDim::Lane), 0b10);
  EXPECT_EQ(l.getFreeMask(InDim::Register), 0);
  EXPECT_EQ(l.getNumCopies(), 2);

  LinearLayout full =
      LinearLayout::distributed({4, 4}, {{0, 1}, {0, 2}}, {{1, 0}, {2, 0}}, {});
  EXPECT_TRUE(full.isBijective());
  EXPECT_EQ(full.getNumCopies(), 1);

  // Dependent non-zero bases are copies too, though no basis is zero.
  LinearLayout dependent =
      LinearLayout::distributed({2, 2}, {{0, 1}, {1, 0}}, {{1, 1}}, {});
  EXPECT_TRUE(dependent.isSurjective());
  EXPECT_EQ(dependent.getFreeMask(InDim::Lane), 0);
  EXPECT_EQ(dependent.getNumCopies(), 2);
}

TEST(LinearLayout, CanonicalOwnerInvertsApply) {
  LinearLayout l = smallLayout();
  for (int32_t r = 0; r < 8; ++r) {
    for (int32_t c = 0; c < 8; ++c) {
      std::optional<HardwareIndex> owner = l.getCanonicalOwner({r, c});
      bool held = (r & 0b010) == 0 && c < 4; // rows 0,1,4,5; cols 0..3
      ASSERT_EQ(owner.has_value(), held) << r << "," << c;
      if (!owner)
        continue;
      EXPECT_EQ(l.apply(*owner), (Coord{r, c}));
      EXPECT_EQ(owner->lane & l.getFreeMask(InDim::Lane), 0);
    }
  }
  // With dependent bases the earlier input bits win: register before lane.
  LinearLayout dependent =
      LinearLayout::distributed({2, 2}, {{0, 1}, {1, 0}}, {{1, 1}}, {});
  EXPECT_EQ(*dependent.getCanonicalOwner({1, 1}), (HardwareIndex{3, 0, 0}));
}

TEST(LinearLayout, SharedOffsetInverse) {
  LinearLayout s =
      LinearLayout::shared({4, 4}, {{0, 1}, {1, 1}, {2, 0}, {0, 2}});
  EXPECT_TRUE(s.isShared());
  EXPECT_TRUE(s.isBijective());
  for (int64_t o = 0; o < 16; ++o)
    EXPECT_EQ(s.getOffset(s.applyOffset(o)), o);
  LinearLayout half = LinearLayout::shared({4, 4}, {{0, 1}, {1, 0}});
  EXPECT_FALSE(half.getOffset({2, 0}).has_value());
}

TEST(LinearLayout, ResizeRepeatsOverRegistersColumnsFirst) {
  // One mma.sync accumulator atom (16 x 8, one warp) over a 32 x 32 tile.
  LinearLayout atom = mmaV2Accumulator({16, 8}, {1, 1});
  LinearLayout big = atom.resize({32, 32});
  EXPECT_EQ(big.getNumRegisters(), 4 * 4 * 2);
  EXPECT_TRUE(big.isBijective());
  EXPECT_EQ(big.getBases(InDim::Lane), atom.getBases(InDim::Lane));
  for (int32_t lane = 0; lane < 32; ++lane) {
    for (int32_t r = 0; r < 32; ++r) {
      int32_t rep = r / 4, repN = rep % 4, repM = rep / 4;
      Coord a = atom.apply(r % 4, lane, 0);
      EXPECT_EQ(big.apply(r, lane, 0),
                (Coord{a.row + 16 * repM, a.col + 8 * repN}));
    }
  }
  // Rows first when asked.
  LinearLayout rowsFirst = atom.resize({32, 16}, {0, 1});
  EXPECT_EQ(rowsFirst.getBases(InDim::Register).back(), (Coord{0, 8}));
}

TEST(LinearLayout, ResizeReplicatesOverSmallerTiles) {
  // 4 warps along M over a 16 x 8 tile: warps 1..3 hold copies.
  LinearLayout atom = mmaV2Accumulator({64, 8}, {4, 1});
  LinearLayout small = atom.resize({16, 8});
  EXPECT_EQ(small.getFreeMask(InDim::Warp), 0b11);
  EXPECT_EQ(small.getNumCopies(), 4);
  EXPECT_TRUE(small.isSurjective());
  // A 4 x 2 tile: the row-8 register disappears; lanes wrap.
  LinearLayout tiny = atom.resize({4, 2});
  EXPECT_EQ(tiny.getNumRegisters(), 2);
  EXPECT_EQ(tiny.getFreeMask(InDim::Lane), 0b10011);
  EXPECT_TRUE(tiny.isSurjective());
  for (int32_t lane = 0; lane < 32; ++lane)
    EXPECT_EQ(tiny.apply(1, lane, 0),
              (Coord{(lane / 4) % 4, (2 * (lane % 4) + 1) % 2}));
}

TEST(LinearLayout, TransposeAndWithBases) {
  LinearLayout l = smallLayout();
  LinearLayout t = l.transpose();
  EXPECT_EQ(t.getShape(), (TileShape{8, 8}));
  forEachIndex(l, [&](HardwareIndex i) {
    Coord a = l.apply(i), b = t.apply(i);
    EXPECT_EQ(a.row, b.col);
    EXPECT_EQ(a.col, b.row);
  });
  EXPECT_EQ(t.transpose(), l);
  LinearLayout w = l.withBases(InDim::Warp, {{2, 0}});
  EXPECT_EQ(w.apply(0, 0, 1), (Coord{2, 0}));
  EXPECT_NE(w, l);
}

TEST(LinearLayout, EqualityAndToString) {
  EXPECT_EQ(smallLayout(), smallLayout());
  EXPECT_NE(smallLayout(),
            smallLayout().transpose().withBases(InDim::Warp, {}));
  EXPECT_EQ(mmaV2Accumulator({16, 8}, {1, 1}).toString(),
            "distributed 16x8 {register: [(0,1), (8,0)], lane: [(0,2), (0,4), "
            "(1,0), (2,0), (4,0)], warp: []}");
  EXPECT_EQ(LinearLayout::shared({2, 2}, {{0, 1}, {1, 0}}).toString(),
            "shared 2x2 {offset: [(0,1), (1,0)]}");
  EXPECT_EQ(LinearLayout().toString(),
            "distributed 1x1 {register: [], lane: [], warp: []}");
}

} // namespace
