//===- LinearLayout.h - GF(2)-linear maps, hardware to tile ---*- C++ -*-===//
//
// A linear layout says where each element of a rank-2 tile lives. Its input
// is a hardware index, split into named dimensions:
//
//   - distributed layouts (values in registers): `register` (the element's
//     slot among the values a thread holds), `lane` (0..31) and `warp`;
//   - shared layouts (values in shared memory): `offset`, in elements.
//
// Every input dimension has one *basis* per bit: the (row, col) that bit
// alone selects. The layout of an index is the XOR of the bases of its set
// bits, so the map is linear over GF(2) and a handful of coordinates
// describes every encoding: blocked, slices, tensor-core fragments and the
// swizzled shared-memory layouts. Tile extents are powers of two.
//
// A zero basis means that bit does not change the element: the threads (or
// registers) that differ in it hold copies. docs/layouts.md gives the
// algebra and every encoding's formula.
//
// This header has no MLIR dependency, so that it compiles fast and can be
// unit-tested alone; the SageGPU attributes wrap it.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_LAYOUT_LINEARLAYOUT_H
#define SAGE_LAYOUT_LINEARLAYOUT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace mlir::sage::layout {

/// Extents (rows, cols) of a rank-2 tile; both powers of two.
using TileShape = std::array<int64_t, 2>;

/// A position in a rank-2 tile, or a basis of a layout. Adding two positions
/// of a linear layout is XOR.
struct Coord {
  int32_t row = 0;
  int32_t col = 0;

  int32_t operator[](unsigned dim) const { return dim == 0 ? row : col; }
  int32_t &operator[](unsigned dim) { return dim == 0 ? row : col; }
  Coord operator^(Coord o) const { return {row ^ o.row, col ^ o.col}; }
  Coord &operator^=(Coord o) { return *this = *this ^ o; }
  bool isZero() const { return row == 0 && col == 0; }
  bool operator==(Coord o) const { return row == o.row && col == o.col; }
  bool operator!=(Coord o) const { return !(*this == o); }
};

/// The input dimensions. A distributed layout has Register, Lane and Warp; a
/// shared layout has Offset only.
enum class InDim : unsigned { Register = 0, Lane = 1, Warp = 2, Offset = 3 };

/// "register", "lane", "warp" or "offset".
const char *getInDimName(InDim dim);

/// A point of a distributed layout's domain: register slot `reg` of lane
/// `lane` of warp `warp`.
struct HardwareIndex {
  int32_t reg = 0;
  int32_t lane = 0;
  int32_t warp = 0;

  int32_t operator[](InDim dim) const;
  int32_t &operator[](InDim dim);
  HardwareIndex operator^(HardwareIndex o) const {
    return {reg ^ o.reg, lane ^ o.lane, warp ^ o.warp};
  }
  bool operator==(HardwareIndex o) const {
    return reg == o.reg && lane == o.lane && warp == o.warp;
  }
  bool operator!=(HardwareIndex o) const { return !(*this == o); }
};

/// A GF(2)-linear map from a hardware index to a (row, col) of a tile.
class LinearLayout {
public:
  using Bases = llvm::SmallVector<Coord, 8>;

  /// The empty distributed layout of a 1x1 tile (one register, one lane, one
  /// warp). Mostly useful as a placeholder.
  LinearLayout();

  /// A distributed layout of a `shape` tile. Every basis must lie inside
  /// `shape`; lanes and warps are 2^lane.size() and 2^warp.size(). Fatal error
  /// on a malformed layout (a bug in the caller, not a user error).
  static LinearLayout distributed(TileShape shape, Bases reg, Bases lane,
                                  Bases warp);
  /// A shared-memory layout of a `shape` tile: element offset -> (row, col).
  static LinearLayout shared(TileShape shape, Bases offset);

  //===--------------------------------------------------------------------===//
  // Getters
  //===--------------------------------------------------------------------===//

  bool isDistributed() const { return !isSharedLayout; }
  bool isShared() const { return isSharedLayout; }
  TileShape getShape() const { return {rows, cols}; }
  int64_t getNumTileElements() const { return rows * cols; }
  /// Whether `dim` is one of this layout's input dimensions.
  bool hasInDim(InDim dim) const;
  /// The bases of `dim` (empty when the dimension is absent).
  llvm::ArrayRef<Coord> getBases(InDim dim) const;
  /// log2 of the size of `dim`.
  unsigned getNumBits(InDim dim) const { return getBases(dim).size(); }
  /// 2^getNumBits(dim): registers per thread, lanes, warps or offsets.
  int64_t getInDimSize(InDim dim) const {
    return int64_t(1) << getNumBits(dim);
  }
  int64_t getNumRegisters() const { return getInDimSize(InDim::Register); }
  int64_t getNumLanes() const { return getInDimSize(InDim::Lane); }
  int64_t getNumWarps() const { return getInDimSize(InDim::Warp); }
  /// Total size of the domain (registers x lanes x warps, or offsets).
  int64_t getDomainSize() const;

  //===--------------------------------------------------------------------===//
  // Application
  //===--------------------------------------------------------------------===//

  /// The element that `index` holds (distributed layouts).
  Coord apply(HardwareIndex index) const;
  Coord apply(int32_t reg, int32_t lane, int32_t warp) const {
    return apply(HardwareIndex{reg, lane, warp});
  }
  /// The element stored at `offset` (shared layouts).
  Coord applyOffset(int64_t offset) const;
  /// The contribution of `value` along input dimension `dim` alone.
  Coord applyDim(InDim dim, int64_t value) const;

  //===--------------------------------------------------------------------===//
  // Structure
  //===--------------------------------------------------------------------===//

  /// Every tile element is reached by some index.
  bool isSurjective() const;
  /// No two indices reach the same element (no copies).
  bool isInjective() const;
  bool isBijective() const { return isSurjective() && isInjective(); }
  /// Dimension of the image (log2 of the number of distinct elements held).
  unsigned getRank() const;
  /// The bits of `dim` whose basis is zero: indices differing only there hold
  /// the same elements. For lanes and warps this is replication; a thread is
  /// the canonical owner of its elements iff its lane and warp have these
  /// bits clear (when no non-zero bases are linearly dependent, which holds
  /// for every factory in Encodings.h; see getNumCopies).
  int32_t getFreeMask(InDim dim) const;
  /// How many indices hold each element held at all: domain size / 2^rank.
  /// Counts all redundancy, including dependent non-zero bases.
  int64_t getNumCopies() const;

  //===--------------------------------------------------------------------===//
  // Inverses
  //===--------------------------------------------------------------------===//

  /// The canonical index holding `c`, or nullopt when no index does. Among
  /// the indices holding `c`, the one using only "pivot" bits, chosen in the
  /// order register bits, lane bits, warp bits (lowest first): zero bases and
  /// bases dependent on earlier ones are 0. Distributed layouts only.
  std::optional<HardwareIndex> getCanonicalOwner(Coord c) const;
  /// The offset storing `c` (shared layouts; nullopt when none does). For a
  /// bijective shared layout this is its inverse.
  std::optional<int64_t> getOffset(Coord c) const;

  //===--------------------------------------------------------------------===//
  // Transformations
  //===--------------------------------------------------------------------===//

  /// This layout fitted to a tile of `shape`, the way an encoding atom covers
  /// a tile: along a dimension where `shape` is larger, the atom repeats over
  /// new register bits (dimensions in `order`, fastest first: by default the
  /// column repeats are the lower register bits); along a dimension where it
  /// is smaller, coordinates wrap modulo the extent, so lane and warp bases
  /// past the extent become zero (threads hold copies) and register bases
  /// that become zero are dropped. Distributed layouts only.
  LinearLayout resize(TileShape shape,
                      std::array<unsigned, 2> order = {1, 0}) const;
  /// Rows and columns swapped (an [N, K] fragment seen as [K, N]).
  LinearLayout transpose() const;
  /// The same map with the bases of `dim` replaced.
  LinearLayout withBases(InDim dim, Bases bases) const;

  bool operator==(const LinearLayout &o) const;
  bool operator!=(const LinearLayout &o) const { return !(*this == o); }

  /// e.g. "distributed 16x8 {register: [(0,1), (8,0)], lane: [(0,2), (0,4),
  /// (1,0), (2,0), (4,0)], warp: []}".
  std::string toString() const;

private:
  LinearLayout(bool shared, TileShape shape);
  void verify() const;

  bool isSharedLayout = false;
  int64_t rows = 1, cols = 1;
  /// Indexed by InDim.
  std::array<Bases, 4> bases;
};

} // namespace mlir::sage::layout

#endif // SAGE_LAYOUT_LINEARLAYOUT_H
