//===- TileDistribution.h - which thread holds which tile element -*- C++
//-*-===//
//
// The arithmetic of `#sage.blocked` layouts, shared by every lowering pattern:
// how many elements of a tile each thread holds, at which (row, col), which
// copy is the owner when elements are replicated, and how a reduction along a
// dimension spans lanes and warps.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H
#define SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H

#include "sage/Dialect/Sage/IR/SageDialect.h"

#include <array>
#include <optional>

namespace mlir::sage {

/// How one dimension of a tile maps onto threads.
struct DimDistribution {
  /// Spread: the tile dimension is a multiple of the layout tile; every
  /// thread holds distinct elements. Replicated: smaller than the layout tile
  /// but at least `size`; groups of threads hold copies. Whole: smaller than
  /// `size`; every thread holds the whole dimension.
  enum class Kind { Spread, Replicated, Whole };

  int64_t extent;      // elements of the tile along this dimension
  unsigned size;       // consecutive elements per thread
  unsigned threads;    // lanes of a warp along this dimension
  unsigned warps;      // warps along this dimension
  unsigned laneStride; // lane-id stride between neighbouring lanes
  unsigned warpStride; // warp-id stride between neighbouring warps
  Kind kind;

  int64_t layoutTile() const { return int64_t(size) * threads * warps; }
  /// Elements a thread holds along this dimension.
  int64_t count() const;
  /// Index of the k-th held element relative to the thread's base.
  int64_t offset(int64_t k) const;
  /// Lanes / warps along this dimension that hold distinct data.
  unsigned distinctLanes() const;
  unsigned distinctWarps() const;
};

/// A tile type with a blocked layout, seen from one thread.
class TileDistribution {
public:
  /// The distribution of `type`, or nullopt if it is not a rank-2 tile with a
  /// `#sage.blocked` layout whose extents are powers of two.
  static std::optional<TileDistribution> get(Type type);

  RankedTensorType getType() const { return type; }
  BlockedLayoutAttr getLayout() const {
    return cast<BlockedLayoutAttr>(type.getEncoding());
  }
  const DimDistribution &dim(unsigned d) const { return dims[d]; }
  /// Elements each thread holds.
  int64_t getNumElements() const { return dims[0].count() * dims[1].count(); }
  /// Position of the held element (k0, k1) in the per-thread list.
  int64_t slot(int64_t k0, int64_t k1) const {
    return k0 * dims[1].count() + k1;
  }

private:
  RankedTensorType type;
  std::array<DimDistribution, 2> dims;
};

/// Thread coordinates of the running thread, emitted once per use site.
class ThreadCoords {
public:
  ThreadCoords(OpBuilder &b, Location loc);
  Value tid, lane, warp;

  /// i32 constant.
  Value constant(int64_t v);
  /// Lane / warp coordinate along `d`.
  Value laneCoord(const DimDistribution &d);
  Value warpCoord(const DimDistribution &d);
  /// Index (i32) along `d` of the first element this thread holds.
  Value base(const DimDistribution &d);
  /// i1: this thread holds the canonical copy of its elements along `d`.
  Value isOwner(const DimDistribution &d);
  /// (row, col) as i32 of every element this thread holds, in slot order.
  SmallVector<std::pair<Value, Value>> positions(const TileDistribution &t);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H
