//===- SharedTileAccess.h - addresses inside shared tiles -------*- C++ -*-===//
//
// Where an element of a `!sagegpu.smem` tile sits, from its encoding's
// linear layout (offset -> (row, col)): the inverse map is linear too, so a
// thread's address is the XOR of a per-thread part (its lane and warp bits,
// computed once) and a per-element constant, which is a plain add when the
// two touch different bits.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_SHAREDTILEACCESS_H
#define SAGE_CONVERSION_SAGETOLLVM_SHAREDTILEACCESS_H

#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

namespace mlir::sage {

class SharedTileAccess {
public:
  SharedTileAccess(sagegpu::SharedTileType type, Value base);

  /// Byte offset of element `c` from the tile's start.
  int64_t byteOffset(layout::Coord c) const;
  /// The i32 byte offset of the thread part of coordinates whose lane and
  /// warp bits move them by `laneBases` / `warpBases`, and the bits it may
  /// set.
  Value threadByteOffset(ThreadCoords &c, ArrayRef<layout::Coord> laneBases,
                         ArrayRef<layout::Coord> warpBases) const;
  int64_t threadMask(ArrayRef<layout::Coord> laneBases,
                     ArrayRef<layout::Coord> warpBases) const;
  /// `thread` (from threadByteOffset, with `mask`) combined with the
  /// constant element offset `offset`.
  static Value combine(ThreadCoords &c, Value thread, int64_t mask,
                       int64_t offset);
  /// `!llvm.ptr<3>` to byte `offset` (i32) of the tile.
  Value pointer(OpBuilder &b, Location loc, Value offset) const;
  /// The tile's shared-window address plus `offset`, as i32 (for PTX).
  Value address(OpBuilder &b, Location loc, Value offset) const;

  int64_t getElementBytes() const { return elemBytes; }
  const layout::LinearLayout &getLayout() const { return linear; }

private:
  layout::LinearLayout linear;
  int64_t elemBytes;
  Value base;
};

/// Stores (`store` true) or loads the register slots of `dist` to or from
/// `tile`, vectorised where consecutive slots are consecutive bytes.
/// Loads return the slots in order; stores skip register copies.
SmallVector<Value> accessSharedTile(ThreadCoords &c,
                                    const SharedTileAccess &tile,
                                    const TileDistribution &dist,
                                    ValueRange values, bool store);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_SHAREDTILEACCESS_H
