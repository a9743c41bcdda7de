//===- BlockedTest.cpp - #sagegpu.blocked and slices as linear layouts
//-------===//
//
// The reference below restates, independently of the library, what today's
// TileDistribution computes for a `#sagegpu.blocked` tile: per dimension a
// spread / replicated / whole distribution, slot = k0 * count1 + k1, base
// position (warp * threads + lane) * size wrapped modulo the extent, and the
// canonical-owner predicate.
//
//===----------------------------------------------------------------------===//

#include "LayoutTestUtils.h"

#include "sage/Layout/Encodings.h"

#include "llvm/ADT/bit.h"
#include "gtest/gtest.h"

#include <set>

using namespace mlir::sage::layout;
using namespace mlir::sage::layout::test;

namespace {

struct RefDim {
  int64_t extent, size, threads, warps, laneStride, warpStride;

  int64_t layoutTile() const { return size * threads * warps; }
  bool spread() const { return extent >= layoutTile(); }
  bool whole() const { return extent < size; }
  int64_t count() const {
    if (spread())
      return extent / layoutTile() * size;
    return whole() ? extent : size;
  }
  int64_t offset(int64_t k) const {
    return spread() ? k / size * layoutTile() + k % size : k;
  }
  int64_t position(int64_t lane, int64_t warp) const {
    int64_t l = lane / laneStride % threads, w = warp / warpStride % warps;
    return w * threads + l;
  }
  int64_t base(int64_t lane, int64_t warp) const {
    if (whole())
      return 0;
    int64_t first = position(lane, warp) * size;
    return spread() ? first : first % extent;
  }
  bool isOwner(int64_t lane, int64_t warp) const {
    if (spread())
      return true;
    if (whole())
      return position(lane, warp) == 0;
    return position(lane, warp) * size < extent;
  }
};

struct BlockedParams {
  TileShape shape;
  std::array<unsigned, 2> size, threads, warps;
};

void checkAgainstReference(const BlockedParams &p) {
  SCOPED_TRACE(::testing::Message()
               << "shape " << p.shape[0] << "x" << p.shape[1] << " size ["
               << p.size[0] << "," << p.size[1] << "] threads [" << p.threads[0]
               << "," << p.threads[1] << "] warps [" << p.warps[0] << ","
               << p.warps[1] << "]");
  RefDim d0{p.shape[0], p.size[0],    p.threads[0],
            p.warps[0], p.threads[1], p.warps[1]};
  RefDim d1{p.shape[1], p.size[1], p.threads[1], p.warps[1], 1, 1};
  LinearLayout l = blocked(p.shape, p.size, p.threads, p.warps);
  ASSERT_EQ(l.getNumRegisters(), d0.count() * d1.count());
  ASSERT_EQ(l.getNumLanes(), 32);
  ASSERT_EQ(l.getNumWarps(), int64_t(p.warps[0]) * p.warps[1]);
  ASSERT_TRUE(l.isSurjective());
  int32_t laneFree = l.getFreeMask(InDim::Lane);
  int32_t warpFree = l.getFreeMask(InDim::Warp);
  for (int32_t w = 0; w < l.getNumWarps(); ++w) {
    for (int32_t lane = 0; lane < 32; ++lane) {
      bool refOwner = d0.isOwner(lane, w) && d1.isOwner(lane, w);
      ASSERT_EQ(refOwner, (lane & laneFree) == 0 && (w & warpFree) == 0)
          << "lane " << lane << " warp " << w;
      for (int64_t k0 = 0; k0 < d0.count(); ++k0) {
        for (int64_t k1 = 0; k1 < d1.count(); ++k1) {
          Coord ref{int32_t(d0.base(lane, w) + d0.offset(k0)),
                    int32_t(d1.base(lane, w) + d1.offset(k1))};
          ASSERT_EQ(l.apply(int32_t(k0 * d1.count() + k1), lane, w), ref)
              << "lane " << lane << " warp " << w << " k " << k0 << "," << k1;
        }
      }
    }
  }
  // The canonical owners are exactly the owner threads, no copies among them.
  int64_t owners = 0;
  for (int32_t w = 0; w < l.getNumWarps(); ++w)
    for (int32_t lane = 0; lane < 32; ++lane)
      owners += (lane & laneFree) == 0 && (w & warpFree) == 0;
  EXPECT_EQ(owners * l.getNumRegisters(), p.shape[0] * p.shape[1]);
}

TEST(Blocked, MatchesTileDistributionOnASweep) {
  const int64_t extents[] = {1, 4, 16, 64};
  const unsigned sizes[] = {1, 2, 4};
  const std::array<unsigned, 2> threads[] = {
      {1, 32}, {2, 16}, {4, 8}, {8, 4}, {32, 1}};
  const std::array<unsigned, 2> warps[] = {{1, 1}, {4, 1}, {2, 2}, {1, 8}};
  int checked = 0;
  for (int64_t e0 : extents)
    for (int64_t e1 : extents)
      for (unsigned s0 : sizes)
        for (unsigned s1 : sizes)
          for (auto t : threads)
            for (auto w : warps) {
              checkAgainstReference({{e0, e1}, {s0, s1}, t, w});
              ++checked;
              if (::testing::Test::HasFatalFailure())
                return;
            }
  EXPECT_EQ(checked, 4 * 4 * 3 * 3 * 5 * 4);
}

TEST(Blocked, DocumentedExample) {
  // #sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>, 64 x 64:
  // a warp covers 4 x 32, the program 16 x 32; 4 x 2 repeats.
  LinearLayout l = blocked({64, 64}, {1, 4}, {4, 8}, {4, 1});
  EXPECT_EQ(l.toString(),
            "distributed 64x64 {register: [(0,1), (0,2), (0,32), (16,0), "
            "(32,0)], lane: [(0,4), (0,8), (0,16), (1,0), (2,0)], warp: "
            "[(4,0), (8,0)]}");
  // Lane 13 = (13 / 8, 13 % 8) = (1, 5) of warp 2: rows 8 + 1, cols 20..23.
  EXPECT_EQ(l.apply(0, 13, 2), (Coord{9, 20}));
  EXPECT_EQ(l.apply(3, 13, 2), (Coord{9, 23}));
  EXPECT_EQ(l.apply(4, 13, 2), (Coord{9, 52}));
  EXPECT_EQ(l.apply(8, 13, 2), (Coord{25, 20}));
  EXPECT_TRUE(l.isBijective());
}

TEST(Blocked, TransposingLayoutVectorsBothWays) {
  // getTransposingBlockedEncoding for the K/V pre-pass's 64 x 128 tile on 8
  // warps: 8 rows of 4 columns a thread, 4 lanes down the rows. Register
  // bits 0-1 step 1, 2 columns (a row load's vector), bits 2-4 step 1, 2, 4
  // rows (a transposed store's 8-byte vector); lane bits 3-4 step 8 rows, so
  // lanes 0, 8, 16, 24 store one column's 32 consecutive rows: a whole
  // 32-byte sector of INT8 a store instruction.
  LinearLayout l = blocked({64, 128}, {8, 4}, {4, 8}, {2, 4});
  llvm::ArrayRef<Coord> regs = l.getBases(InDim::Register);
  ASSERT_EQ(regs.size(), 5u);
  EXPECT_EQ(regs[0], (Coord{0, 1}));
  EXPECT_EQ(regs[1], (Coord{0, 2}));
  EXPECT_EQ(regs[2], (Coord{1, 0}));
  EXPECT_EQ(regs[3], (Coord{2, 0}));
  EXPECT_EQ(regs[4], (Coord{4, 0}));
  llvm::ArrayRef<Coord> lanes = l.getBases(InDim::Lane);
  EXPECT_EQ(lanes[3], (Coord{8, 0}));
  EXPECT_EQ(lanes[4], (Coord{16, 0}));
  EXPECT_EQ(l.apply(0, 8, 0), (Coord{8, 0}));
  EXPECT_TRUE(l.isBijective());
}

TEST(Blocked, OrderZeroIsTheTransposeOfOrderOne) {
  LinearLayout a = blocked({16, 64}, {2, 1}, {8, 4}, {1, 4}, {0, 1});
  LinearLayout b = blocked({64, 16}, {1, 2}, {4, 8}, {4, 1}, {1, 0});
  EXPECT_EQ(a, b.transpose());
}

TEST(Slice, RowStatisticsShareTheParentsLayout) {
  // `#sagegpu.blocked` already gives an Mx1 statistic the same parameters:
  // slicing the MxN layout must give exactly that layout.
  for (auto t : {std::array<unsigned, 2>{4, 8}, std::array<unsigned, 2>{1, 32},
                 std::array<unsigned, 2>{32, 1}}) {
    for (auto w :
         {std::array<unsigned, 2>{4, 1}, std::array<unsigned, 2>{2, 2}}) {
      LinearLayout parent = blocked({64, 64}, {1, 4}, t, w);
      EXPECT_EQ(slice(parent, 1), blocked({64, 1}, {1, 4}, t, w));
      EXPECT_EQ(slice(parent, 0), blocked({1, 64}, {1, 4}, t, w));
    }
  }
}

/// The (lane, warp)s holding any element of row (dim = 1) or column `i`.
std::set<std::pair<int32_t, int32_t>> threadsOfLine(const LinearLayout &l,
                                                    unsigned dim, int32_t i) {
  std::set<std::pair<int32_t, int32_t>> out;
  forEachIndex(l, [&](HardwareIndex h) {
    Coord c = l.apply(h);
    if ((dim == 1 ? c.row : c.col) == i)
      out.insert({h.lane, h.warp});
  });
  return out;
}

void checkSlice(const LinearLayout &parent, unsigned dim) {
  SCOPED_TRACE(parent.toString());
  LinearLayout s = slice(parent, dim);
  TileShape expected = parent.getShape();
  expected[dim] = 1;
  ASSERT_EQ(s.getShape(), expected);
  EXPECT_TRUE(s.isSurjective());
  // Same owners as the parent's line; each thread holds a value once.
  for (int32_t i = 0; i < parent.getShape()[1 - dim]; ++i) {
    EXPECT_EQ(threadsOfLine(s, dim, i), threadsOfLine(parent, dim, i));
  }
  LinearLayout regsOnly = LinearLayout::distributed(
      s.getShape(),
      LinearLayout::Bases(s.getBases(InDim::Register).begin(),
                          s.getBases(InDim::Register).end()),
      {}, {});
  EXPECT_TRUE(regsOnly.isInjective());
}

TEST(Slice, OfTensorCoreAccumulators) {
  checkSlice(wgmmaAccumulator({128, 64}, 64, 2), 1);
  checkSlice(wgmmaAccumulator({128, 64}, 64, 2), 0);
  checkSlice(mmaV2Accumulator({64, 32}, {2, 2}), 1);
  checkSlice(mmaV2Accumulator({64, 32}, {2, 2}), 0);
  checkSlice(blocked({32, 16}, {2, 2}, {4, 8}, {2, 2}), 1);
  // A wgmma row statistic: lanes of a quad share a row, so the two lane bits
  // that spread columns become copies; one register (row + 8) per 64 rows.
  LinearLayout rows = slice(wgmmaAccumulator({64, 128}, 128, 1), 1);
  EXPECT_EQ(rows.toString(),
            "distributed 64x1 {register: [(8,0)], lane: [(0,0), (0,0), (1,0), "
            "(2,0), (4,0)], warp: [(16,0), (32,0)]}");
  EXPECT_EQ(rows.getFreeMask(InDim::Lane), 0b11);
  EXPECT_EQ(rows.getNumCopies(), 4);
}

/// (lane, warp, row, col) of every element a layout's threads hold.
std::set<std::array<int32_t, 4>> heldBy(const LinearLayout &l, unsigned dim = 0,
                                        int32_t groups = -1) {
  std::set<std::array<int32_t, 4>> out;
  forEachIndex(l, [&](HardwareIndex h) {
    Coord c = l.apply(h);
    if (groups >= 0)
      c[dim] = extractBits(c[dim], groups);
    out.insert({h.lane, h.warp, c.row, c.col});
  });
  return out;
}

TEST(Slice, ExtractBitsPacksTheMaskedBits) {
  EXPECT_EQ(extractBits(0b1010110, 0b1000110), 0b111);
  EXPECT_EQ(extractBits(0b0111001, 0b1000110), 0b000);
  EXPECT_EQ(extractBits(0b1000010, 0b1000110), 0b101);
  EXPECT_EQ(extractBits(0xff, 0), 0);
}

TEST(Slice, GroupsKeepTheMaskedIndexBits) {
  // A thread holds group g = pext(index, groups) of a row exactly when it
  // holds some index of that group in the parent; no mask is the plain slice.
  LinearLayout acc = wgmmaAccumulator({64, 128}, 128, 1);
  for (int32_t groups : {0b110, 0b1000110, 0b1}) {
    SCOPED_TRACE(groups);
    LinearLayout g = slice(acc, 1, groups);
    EXPECT_EQ(g.getShape()[1], int64_t(1) << llvm::popcount(uint32_t(groups)));
    EXPECT_TRUE(g.isSurjective());
    EXPECT_EQ(heldBy(g), heldBy(acc, 1, groups));
  }
  EXPECT_EQ(slice(acc, 1, 0), slice(acc, 1));
  LinearLayout rows =
      slice(blocked({64, 32}, {1, 4}, {4, 8}, {4, 1}), 0, 0b110);
  EXPECT_EQ(heldBy(rows),
            heldBy(blocked({64, 32}, {1, 4}, {4, 8}, {4, 1}), 0, 0b110));
  // The columns of a quad member (2 * (lane % 4) + {0, 1} + 8 j) are one
  // group of 0b110 per row: two rows a thread, one value each, no copies.
  LinearLayout quads = slice(acc, 1, 0b110);
  EXPECT_EQ(quads.getNumRegisters(), 2);
  EXPECT_EQ(quads.getFreeMask(InDim::Lane), 0);
  EXPECT_EQ(quads.getNumCopies(), 1);
}

} // namespace
