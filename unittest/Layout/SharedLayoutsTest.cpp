//===- SharedLayoutsTest.cpp - swizzled shared-memory layouts -------------===//
//
// The reference states the layouts as byte addresses, the way TMA and the
// wgmma descriptor define them: a tile stored [inner / S][outer][S bytes]
// (S = 16 with no swizzle), then for a swizzle of S bytes the byte-address
// bits [4, 4 + log2(S/16)) XORed with bits [7, 7 + log2(S/16)).
//
//===----------------------------------------------------------------------===//

#include "LayoutTestUtils.h"

#include "sage/Layout/SharedLayouts.h"

#include "gtest/gtest.h"

#include <set>

using namespace mlir::sage::layout;
using namespace mlir::sage::layout::test;

namespace {

/// The offset of `c`, -1 when the layout does not store it.
int64_t offsetOf(const LinearLayout &l, Coord c) {
  return l.getOffset(c).value_or(-1);
}

int64_t log2i(int64_t v) {
  int64_t l = 0;
  while ((int64_t(1) << l) < v)
    ++l;
  return l;
}

/// Byte address of element (outer, inner) of a tile with `outerExtent` rows.
int64_t refByteAddress(int64_t outer, int64_t inner, int64_t outerExtent,
                       unsigned elementBits, unsigned swizzle) {
  int64_t slabBytes = swizzle == 0 ? 16 : swizzle;
  int64_t byte = inner * elementBits / 8;
  int64_t addr = byte / slabBytes * (outerExtent * slabBytes) +
                 outer * slabBytes + byte % slabBytes;
  if (swizzle == 0)
    return addr;
  int64_t bits = log2i(swizzle / 16);
  int64_t mask = (int64_t(1) << bits) - 1;
  return addr ^ (((addr >> 7) & mask) << 4);
}

struct SharedCase {
  TileShape shape; // (outer, inner) when innerDim = 1
  unsigned elementBits, swizzle;
};

const SharedCase kCases[] = {
    {{64, 128}, 8, 128}, {{64, 64}, 16, 128}, {{128, 256}, 8, 128},
    {{8, 128}, 8, 128},  {{64, 64}, 8, 64},   {{32, 64}, 16, 64},
    {{64, 32}, 8, 32},   {{16, 64}, 16, 32},  {{64, 128}, 8, 0},
    {{64, 64}, 16, 0},   {{2, 16}, 8, 0},     {{64, 32}, 32, 128},
};

TEST(SharedLayouts, MatchTheByteAddressDefinition) {
  for (const SharedCase &c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << c.shape[0] << "x" << c.shape[1] << " " << c.elementBits
                 << "-bit swizzle " << c.swizzle);
    LinearLayout l = shared(c.shape, c.elementBits, c.swizzle);
    ASSERT_TRUE(l.isShared());
    EXPECT_TRUE(l.isBijective());
    for (int32_t r = 0; r < c.shape[0]; ++r) {
      for (int32_t k = 0; k < c.shape[1]; ++k) {
        int64_t byte =
            refByteAddress(r, k, c.shape[0], c.elementBits, c.swizzle);
        ASSERT_EQ(byte % (c.elementBits / 8), 0);
        int64_t offset = byte / (c.elementBits / 8);
        ASSERT_EQ(l.getOffset({r, k}), offset) << r << "," << k;
        ASSERT_EQ(l.applyOffset(offset), (Coord{r, k}));
      }
    }
  }
}

TEST(SharedLayouts, NoSwizzleIsChunkMajorCoreMatrices) {
  // [inner / 16 B][outer][16 B]: 8-row x 16-byte core matrices.
  LinearLayout l = shared({64, 128}, 8, 0);
  for (int32_t r : {0, 1, 7, 8, 63})
    for (int32_t k : {0, 5, 16, 37, 127})
      EXPECT_EQ(offsetOf(l, {r, k}), k / 16 * (64 * 16) + r * 16 + k % 16);
}

TEST(SharedLayouts, Swizzle128ChunkXorRow) {
  LinearLayout l = shared({64, 64}, 16, 128);
  for (int32_t r = 0; r < 64; ++r)
    for (int32_t k = 0; k < 64; ++k) {
      int32_t chunk = k / 8; // 8 halves per 16-byte chunk
      EXPECT_EQ(offsetOf(l, {r, k}), r * 64 + ((chunk ^ (r % 8)) * 8) + k % 8);
    }
}

/// The 16-byte bank group (of 8: 128 bytes of banks) of a byte address.
int64_t bankGroup(int64_t byte) { return byte / 16 % 8; }

TEST(SharedLayouts, SwizzlesMakeChunkColumnsConflictFree) {
  // The access each swizzle exists for: 8 consecutive rows read the same
  // logical 16-byte chunk (ldmatrix, or a TMA/wgmma core matrix). Every
  // 16-byte bank group must be hit exactly once.
  for (unsigned swizzle : {128u, 64u, 32u}) {
    for (unsigned bits : {8u, 16u}) {
      int64_t inner = 2 * int64_t(swizzle) * 8 / bits;
      LinearLayout l = shared({64, inner}, bits, swizzle);
      int64_t chunkElems = 128 / bits;
      for (int32_t chunk = 0; chunk < inner / chunkElems; ++chunk) {
        for (int32_t row0 = 0; row0 < 64; row0 += 8) {
          std::set<int64_t> groups;
          for (int32_t r = row0; r < row0 + 8; ++r)
            groups.insert(bankGroup(
                offsetOf(l, {r, int32_t(chunk * chunkElems)}) * bits / 8));
          EXPECT_EQ(groups.size(), 8u)
              << "swizzle " << swizzle << " bits " << bits << " chunk " << chunk
              << " rows " << row0;
        }
      }
    }
  }
  // Without a swizzle, 128-byte rows would put a chunk column in one group.
  std::set<int64_t> plain;
  for (int64_t r = 0; r < 8; ++r)
    plain.insert(bankGroup(r * 128));
  EXPECT_EQ(plain.size(), 1u);
}

TEST(SharedLayouts, InnerDimZeroIsTheTranspose) {
  EXPECT_EQ(shared({64, 32}, 16, 128, /*innerDim=*/0),
            shared({32, 64}, 16, 128).transpose());
  EXPECT_EQ(shared({128, 8}, 8, 0, 0), shared({8, 128}, 8, 0).transpose());
}

TEST(SharedLayouts, ParameterChecks) {
  EXPECT_EQ(checkSharedParams({64, 128}, 8, 128, 1), "");
  EXPECT_NE(checkSharedParams({64, 64}, 8, 128, 1), ""); // 64 B < 128 B
  EXPECT_NE(checkSharedParams({4, 128}, 8, 128, 1), ""); // < 8 rows
  EXPECT_NE(checkSharedParams({64, 8}, 8, 0, 1), "");    // half a chunk
  EXPECT_NE(checkSharedParams({64, 128}, 8, 96, 1), "");
  EXPECT_NE(checkSharedParams({64, 128}, 12, 0, 1), "");
  EXPECT_NE(checkSharedParams({48, 128}, 8, 0, 1), "");
  EXPECT_NE(checkSharedParams({64, 128}, 8, 0, 2), "");
  EXPECT_TRUE(isValidSwizzle(0));
  EXPECT_TRUE(isValidSwizzle(64));
  EXPECT_FALSE(isValidSwizzle(16));
}

TEST(SharedLayouts, WidestSwizzleFitsRowsAndAtoms) {
  EXPECT_EQ(widestSwizzle(128, 64), 128u); // INT8 D = 128, bf16 D = 64
  EXPECT_EQ(widestSwizzle(256, 64), 128u); // bf16 D = 128: two slabs
  EXPECT_EQ(widestSwizzle(64, 64), 64u);   // INT8 D = 64
  EXPECT_EQ(widestSwizzle(96, 64), 32u);
  EXPECT_EQ(widestSwizzle(16, 64), 0u); // one chunk per row
  EXPECT_EQ(widestSwizzle(128, 4), 0u); // half an atom of rows
  EXPECT_EQ(widestSwizzle(128, 12), 0u);
  // Whatever it picks, the shared layout accepts.
  for (int64_t bytes : {32, 64, 128, 256, 512})
    for (int64_t rows : {8, 16, 64, 256}) {
      unsigned s = widestSwizzle(bytes, rows);
      EXPECT_NE(s, 0u);
      EXPECT_EQ(checkSharedParams({rows, bytes}, 8, s, 1), "");
    }
}

TEST(SharedLayouts, DescriptorFields) {
  EXPECT_EQ(getWgmmaSwizzleMode(0), 0u);
  EXPECT_EQ(getWgmmaSwizzleMode(128), 1u);
  EXPECT_EQ(getWgmmaSwizzleMode(64), 2u);
  EXPECT_EQ(getWgmmaSwizzleMode(32), 3u);
  EXPECT_EQ(getTmaSwizzleMode(0), 0u);
  EXPECT_EQ(getTmaSwizzleMode(32), 1u);
  EXPECT_EQ(getTmaSwizzleMode(64), 2u);
  EXPECT_EQ(getTmaSwizzleMode(128), 3u);

  // No swizzle: K-adjacent core matrices one chunk column (rows x 16 B)
  // apart, 8-row groups 128 B apart: the strides MatmulToNVVM uses today.
  WgmmaStrides none = getWgmmaKMajorStrides({64, 128}, 8, 0);
  EXPECT_EQ(none.leadingByteOffset, 64 * 16);
  EXPECT_EQ(none.strideByteOffset, 128);
  // They agree with the layout: offsets of (0, 16) and (8, 0), in bytes.
  LinearLayout l = shared({64, 128}, 8, 0);
  EXPECT_EQ(offsetOf(l, {0, 16}), none.leadingByteOffset);
  EXPECT_EQ(offsetOf(l, {8, 0}), none.strideByteOffset);
  // 128 B swizzle: 8-row groups 1024 B apart; LBO unused (encoded 1).
  WgmmaStrides sw = getWgmmaKMajorStrides({64, 64}, 16, 128);
  EXPECT_EQ(sw.strideByteOffset, 1024);
  EXPECT_EQ(offsetOf(shared({64, 64}, 16, 128), {8, 0}) * 2,
            sw.strideByteOffset);
  EXPECT_EQ(getWgmmaKMajorStrides({64, 64}, 8, 64).strideByteOffset, 512);
  EXPECT_EQ(getWgmmaKMajorStrides({64, 32}, 8, 32).strideByteOffset, 256);
  // MN-major (V as it is: [keys][D], D inner): slabs of 64 D elements
  // rows x 128 B apart, 8-key groups 1024 B apart; both from the layout.
  WgmmaStrides mn = getWgmmaMNMajorStrides({128, 128}, 16, 128);
  LinearLayout v = shared({128, 128}, 16, 128);
  EXPECT_EQ(mn.leadingByteOffset, 128 * 128);
  EXPECT_EQ(offsetOf(v, {0, 64}) * 2, mn.leadingByteOffset);
  EXPECT_EQ(mn.strideByteOffset, 1024);
  EXPECT_EQ(offsetOf(v, {8, 0}) * 2, mn.strideByteOffset);
  WgmmaStrides mn64 = getWgmmaMNMajorStrides({64, 64}, 16, 64);
  EXPECT_EQ(mn64.leadingByteOffset, 64 * 64);
  EXPECT_EQ(offsetOf(shared({64, 64}, 16, 64), {0, 32}) * 2,
            mn64.leadingByteOffset);
  EXPECT_EQ(mn64.strideByteOffset, 512);

  uint64_t desc = encodeWgmmaDescriptor(0x1400, 16, 1024, 128);
  EXPECT_EQ(desc & 0x3FFF, 0x1400u >> 4);
  EXPECT_EQ((desc >> 16) & 0x3FFF, 1u);
  EXPECT_EQ((desc >> 32) & 0x3FFF, 64u);
  EXPECT_EQ((desc >> 49) & 0x7, 0u);
  EXPECT_EQ(desc >> 62, 1u);
  EXPECT_EQ(encodeWgmmaDescriptor(0, 1024, 128, 0),
            (uint64_t(64) << 16) | (uint64_t(8) << 32));
}

} // namespace
