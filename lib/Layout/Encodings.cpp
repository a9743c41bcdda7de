//===- Encodings.cpp - distributed encodings as linear layouts ------------===//
//
// Each tensor-core factory writes the bases of one instruction's fragment
// (its "atom") for one warp, adds the warps, and lets LinearLayout::resize
// cover the tile. The fragment formulas are the PTX ISA's; docs/layouts.md
// lists them next to the bases they become.
//
//===----------------------------------------------------------------------===//

#include "sage/Layout/Encodings.h"

#include "GF2.h"

#include "llvm/ADT/Twine.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir::sage::layout;
using Bases = LinearLayout::Bases;

[[noreturn]] static void fail(const char *factory, const llvm::Twine &why) {
  llvm::report_fatal_error(llvm::Twine(factory) + ": " + why);
}

static bool isPow2(int64_t v) { return v > 0 && llvm::isPowerOf2_64(v); }

static void checkShape(const char *factory, TileShape shape) {
  if (!isPow2(shape[0]) || !isPow2(shape[1]))
    fail(factory, "tile extents must be powers of two");
}

static void checkPow2Pair(const char *factory, const char *what,
                          std::array<unsigned, 2> v) {
  if (!isPow2(v[0]) || !isPow2(v[1]))
    fail(factory, llvm::Twine(what) + " must be powers of two");
}

static Coord along(unsigned dim, int64_t v) {
  Coord c;
  c[dim] = int32_t(v);
  return c;
}

//===----------------------------------------------------------------------===//
// Blocked and slice
//===----------------------------------------------------------------------===//

LinearLayout mlir::sage::layout::blocked(TileShape shape,
                                         std::array<unsigned, 2> sizePerThread,
                                         std::array<unsigned, 2> threadsPerWarp,
                                         std::array<unsigned, 2> warpsPerCTA,
                                         std::array<unsigned, 2> order) {
  const char *name = "blocked";
  checkShape(name, shape);
  checkPow2Pair(name, "sizePerThread", sizePerThread);
  checkPow2Pair(name, "threadsPerWarp", threadsPerWarp);
  checkPow2Pair(name, "warpsPerCTA", warpsPerCTA);
  if (threadsPerWarp[0] * threadsPerWarp[1] != kWarpSize)
    fail(name, "threadsPerWarp must multiply to 32");
  if (!((order[0] == 1 && order[1] == 0) || (order[0] == 0 && order[1] == 1)))
    fail(name, "order must be a permutation of {0, 1}");

  // A basis at v along d, wrapped: past the extent it is zero (a copy).
  auto wrapped = [&](unsigned d, int64_t v) {
    return v < shape[d] ? along(d, v) : Coord();
  };
  Bases reg, lane, warp;
  // Registers, fastest dimension first: the element within `size`, then the
  // repeats of the layout tile (TileDistribution's slot order).
  for (unsigned d : order) {
    int64_t layoutTile =
        int64_t(sizePerThread[d]) * threadsPerWarp[d] * warpsPerCTA[d];
    for (int64_t v = 1; v < sizePerThread[d] && v < shape[d]; v <<= 1)
      reg.push_back(along(d, v));
    for (int64_t v = layoutTile; v < shape[d]; v <<= 1)
      reg.push_back(along(d, v));
  }
  for (unsigned d : order)
    for (int64_t v = sizePerThread[d];
         v < int64_t(sizePerThread[d]) * threadsPerWarp[d]; v <<= 1)
      lane.push_back(wrapped(d, v));
  for (unsigned d : order) {
    int64_t warpTile = int64_t(sizePerThread[d]) * threadsPerWarp[d];
    for (int64_t v = warpTile; v < warpTile * warpsPerCTA[d]; v <<= 1)
      warp.push_back(wrapped(d, v));
  }
  return LinearLayout::distributed(shape, std::move(reg), std::move(lane),
                                   std::move(warp));
}

int32_t mlir::sage::layout::extractBits(int32_t index, int32_t mask) {
  int32_t out = 0;
  for (int32_t bit = 0, at = 0; bit < 31; ++bit)
    if (mask & (1 << bit))
      out |= ((index >> bit) & 1) << at++;
  return out;
}

LinearLayout mlir::sage::layout::slice(const LinearLayout &parent, unsigned dim,
                                       int32_t groups) {
  if (!parent.isDistributed() || dim > 1 || groups < 0)
    fail("slice", "needs a distributed parent, dim 0 or 1 and groups >= 0");
  TileShape shape = parent.getShape();
  shape[dim] = int64_t(1) << llvm::popcount(uint32_t(groups));
  // PEXT is linear over GF(2): the image of a basis is a basis of the image.
  auto project = [&](Coord c) {
    c[dim] = extractBits(c[dim], groups);
    return c;
  };
  // Keep only register bases that still select new elements, so no value
  // is held twice by one thread.
  detail::Echelon held;
  Bases reg, lane, warp;
  for (Coord c : parent.getBases(InDim::Register))
    if (held.insert(detail::pack(project(c))))
      reg.push_back(project(c));
  for (Coord c : parent.getBases(InDim::Lane))
    lane.push_back(project(c));
  for (Coord c : parent.getBases(InDim::Warp))
    warp.push_back(project(c));
  return LinearLayout::distributed(shape, std::move(reg), std::move(lane),
                                   std::move(warp));
}

//===----------------------------------------------------------------------===//
// Tensor-core fragments
//===----------------------------------------------------------------------===//

/// Lanes of every m16 fragment: lane % 4 picks a group of `quadStride`
/// columns, lane / 4 the row.
static Bases quadLanes(int32_t quadStride) {
  return {{0, quadStride}, {0, 2 * quadStride}, {1, 0}, {2, 0}, {4, 0}};
}

/// Warps at (w / wn, w % wn), the warp tile being `tileRows` x `tileCols`;
/// a dimension whose warps hold copies gets zero bases.
static Bases gridWarps(std::array<unsigned, 2> warpsPerCTA, int32_t tileRows,
                       int32_t tileCols, bool copiesAlongRows,
                       bool copiesAlongCols) {
  Bases warp;
  for (unsigned v = 1; v < warpsPerCTA[1]; v <<= 1)
    warp.push_back(copiesAlongCols ? Coord() : Coord{0, int32_t(v) * tileCols});
  for (unsigned v = 1; v < warpsPerCTA[0]; v <<= 1)
    warp.push_back(copiesAlongRows ? Coord() : Coord{int32_t(v) * tileRows, 0});
  return warp;
}

/// Warps of `numWarpgroups` warpgroups stacked along M: warp w at rows
/// 16 * w (w < 4 within a warpgroup, 64 rows per warpgroup).
static Bases warpgroupWarps(unsigned numWarpgroups) {
  Bases warp;
  for (int64_t v = 16; v < 64 * int64_t(numWarpgroups); v <<= 1)
    warp.push_back({int32_t(v), 0});
  return warp;
}

LinearLayout
mlir::sage::layout::mmaV2Accumulator(TileShape shape,
                                     std::array<unsigned, 2> warpsPerCTA) {
  checkShape("mmaV2Accumulator", shape);
  checkPow2Pair("mmaV2Accumulator", "warpsPerCTA", warpsPerCTA);
  // c0, c1 at (l/4, 2(l%4) + {0,1}); c2, c3 eight rows below.
  LinearLayout atom = LinearLayout::distributed(
      {16 * int64_t(warpsPerCTA[0]), 8 * int64_t(warpsPerCTA[1])},
      {{0, 1}, {8, 0}}, quadLanes(2),
      gridWarps(warpsPerCTA, 16, 8, false, false));
  return atom.resize(shape);
}

LinearLayout mlir::sage::layout::wgmmaAccumulator(TileShape shape,
                                                  unsigned instrN,
                                                  unsigned numWarpgroups) {
  checkShape("wgmmaAccumulator", shape);
  if (!isPow2(instrN) || instrN < 8 || instrN > 256)
    fail("wgmmaAccumulator", "instrN must be a power of two in [8, 256]");
  if (!isPow2(numWarpgroups))
    fail("wgmmaAccumulator", "numWarpgroups must be a power of two");
  // v0 -> n + 1, v1 -> m + 8, v2.. -> n + 8, 16, ...
  Bases reg = {{0, 1}, {8, 0}};
  for (int32_t v = 8; v < int32_t(instrN); v <<= 1)
    reg.push_back({0, v});
  LinearLayout atom = LinearLayout::distributed(
      {64 * int64_t(numWarpgroups), instrN}, std::move(reg), quadLanes(2),
      warpgroupWarps(numWarpgroups));
  return atom.resize(shape);
}

int64_t mlir::sage::layout::sigma16Slot(int64_t token) {
  int64_t t = token & 15;
  return (token & ~int64_t(15)) | (4 * ((t / 2) % 4) + 2 * (t / 8) + t % 2);
}

int64_t mlir::sage::layout::sigma16Token(int64_t slot) {
  int64_t s = slot & 15;
  // Slot bits s3 s2 s1 s0 came from token bits t2 t1 t3 t0.
  int64_t t =
      (s & 1) | ((s >> 2) & 1) << 1 | ((s >> 3) & 1) << 2 | ((s >> 1) & 1) << 3;
  return (slot & ~int64_t(15)) | t;
}

/// The register bases of one warp's fragment for `elementBits`-bit elements:
/// rows are the non-contracted index, columns k. A fragments span 16 rows
/// (a slot bit selects row + 8), B fragments 8 (`hasRow8` false).
static Bases fragmentRegisters(unsigned elementBits, bool hasRow8) {
  Bases reg;
  if (elementBits == 16) {
    // k = 2(l%4) + a0 (+ 8 for the next slot group); row + 8 between.
    reg.push_back({0, 1});
    if (hasRow8)
      reg.push_back({8, 0});
    reg.push_back({0, 8});
  } else {
    // k = 4(l%4) + a0 + 2a1 (+ 16); row + 8 between.
    reg.push_back({0, 1});
    reg.push_back({0, 2});
    if (hasRow8)
      reg.push_back({8, 0});
    reg.push_back({0, 16});
  }
  return reg;
}

static void checkOperandBits(const char *factory, unsigned elementBits) {
  if (elementBits != 8 && elementBits != 16)
    fail(factory, "elementBits must be 8 or 16");
}

/// Columns of every basis renamed from physical slot k to the logical token
/// sigma16Token(k). sigma16 permutes bits, so it maps bases to bases.
static Bases sigma16Columns(llvm::ArrayRef<Coord> bases) {
  Bases out;
  for (Coord c : bases)
    out.push_back({c.row, int32_t(sigma16Token(c.col))});
  return out;
}

static LinearLayout withSigma16(const LinearLayout &atom) {
  return LinearLayout::distributed(
      atom.getShape(), sigma16Columns(atom.getBases(InDim::Register)),
      sigma16Columns(atom.getBases(InDim::Lane)),
      sigma16Columns(atom.getBases(InDim::Warp)));
}

LinearLayout
mlir::sage::layout::mmaV2OperandA(TileShape shape, unsigned elementBits,
                                  std::array<unsigned, 2> warpsPerCTA,
                                  bool sigma16) {
  const char *name = "mmaV2OperandA";
  checkShape(name, shape);
  checkOperandBits(name, elementBits);
  checkPow2Pair(name, "warpsPerCTA", warpsPerCTA);
  if (sigma16 && elementBits != 8)
    fail(name, "sigma16 applies to 8-bit operands only");
  int32_t k = 256 / elementBits;
  LinearLayout atom = LinearLayout::distributed(
      {16 * int64_t(warpsPerCTA[0]), k},
      fragmentRegisters(elementBits, /*hasRow8=*/true),
      quadLanes(elementBits == 16 ? 2 : 4),
      gridWarps(warpsPerCTA, 16, 0, false, /*copiesAlongCols=*/true));
  if (sigma16)
    atom = withSigma16(atom);
  return atom.resize(shape);
}

LinearLayout
mlir::sage::layout::mmaV2OperandB(TileShape shape, unsigned elementBits,
                                  std::array<unsigned, 2> warpsPerCTA) {
  const char *name = "mmaV2OperandB";
  checkShape(name, shape);
  checkOperandBits(name, elementBits);
  checkPow2Pair(name, "warpsPerCTA", warpsPerCTA);
  int32_t k = 256 / elementBits;
  // [N, K]: the warps along N (warpsPerCTA[1]) spread rows of 8; the warps
  // along M hold copies.
  Bases warp;
  for (unsigned v = 1; v < warpsPerCTA[1]; v <<= 1)
    warp.push_back({int32_t(8 * v), 0});
  for (unsigned v = 1; v < warpsPerCTA[0]; v <<= 1)
    warp.push_back({});
  LinearLayout atom = LinearLayout::distributed(
      {8 * int64_t(warpsPerCTA[1]), k},
      fragmentRegisters(elementBits, /*hasRow8=*/false),
      quadLanes(elementBits == 16 ? 2 : 4), std::move(warp));
  return atom.resize(shape);
}

LinearLayout mlir::sage::layout::wgmmaOperandA(TileShape shape,
                                               unsigned elementBits,
                                               unsigned numWarpgroups,
                                               bool sigma16) {
  const char *name = "wgmmaOperandA";
  checkShape(name, shape);
  checkOperandBits(name, elementBits);
  if (!isPow2(numWarpgroups))
    fail(name, "numWarpgroups must be a power of two");
  if (sigma16 && elementBits != 8)
    fail(name, "sigma16 applies to 8-bit operands only");
  int32_t k = 256 / elementBits;
  LinearLayout atom = LinearLayout::distributed(
      {64 * int64_t(numWarpgroups), k},
      fragmentRegisters(elementBits, /*hasRow8=*/true),
      quadLanes(elementBits == 16 ? 2 : 4), warpgroupWarps(numWarpgroups));
  if (sigma16)
    atom = withSigma16(atom);
  return atom.resize(shape);
}

LinearLayout mlir::sage::layout::dotOperand(TileShape shape, MmaVersion version,
                                            unsigned opIdx,
                                            unsigned elementBits,
                                            std::array<unsigned, 2> warpsPerCTA,
                                            bool sigma16) {
  if (opIdx > 1)
    fail("dotOperand", "opIdx must be 0 (A) or 1 (B)");
  if (version == MmaVersion::MmaSync) {
    if (opIdx == 0)
      return mmaV2OperandA(shape, elementBits, warpsPerCTA, sigma16);
    if (sigma16)
      fail("dotOperand", "sigma16 describes the A operand only");
    return mmaV2OperandB(shape, elementBits, warpsPerCTA);
  }
  if (opIdx != 0)
    fail("dotOperand", "wgmma reads B from shared memory");
  if (warpsPerCTA[1] != 1 || warpsPerCTA[0] % kWarpsPerWarpgroup != 0)
    fail("dotOperand", "wgmma needs warpsPerCTA = {4 * warpgroups, 1}");
  return wgmmaOperandA(shape, elementBits, warpsPerCTA[0] / kWarpsPerWarpgroup,
                       sigma16);
}
