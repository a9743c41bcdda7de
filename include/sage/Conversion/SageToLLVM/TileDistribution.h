//===- TileDistribution.h - who holds which tile element -------*- C++ -*-===//
//
// The lowering's view of a tile's encoding: its linear layout (the one
// definition, sage/Layout), and the instructions that compute, in the
// running thread, where each of its register slots sits. A slot's position
// is the XOR of a constant (its register bits) and a per-thread part (the
// lane and warp bits), so positions cost a few bit operations per thread and
// constants per slot.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H
#define SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/LinearLayout.h"

#include <optional>

namespace mlir::sage {

/// A tile type with a distributed encoding, seen from one thread.
class TileDistribution {
public:
  /// The distribution of `type`, or nullopt if it is not a rank-2 tile with a
  /// distributed encoding whose extents are powers of two.
  static std::optional<TileDistribution> get(Type type);

  RankedTensorType getType() const { return type; }
  const layout::LinearLayout &getLayout() const { return linear; }
  /// Register slots each thread holds.
  int64_t getNumElements() const { return linear.getNumRegisters(); }
  /// Position of slot `r` in lane 0 of warp 0; other threads XOR their part.
  layout::Coord slotOffset(int64_t r) const {
    return linear.applyDim(layout::InDim::Register, r);
  }
  /// Whether slot `r` repeats a lower slot of the same thread (a register
  /// copy): such slots must not be stored or counted twice.
  bool isSlotCopy(int64_t r) const {
    return (r & linear.getFreeMask(layout::InDim::Register)) != 0;
  }

private:
  TileDistribution(RankedTensorType type, layout::LinearLayout linear)
      : type(type), linear(std::move(linear)) {}

  RankedTensorType type;
  layout::LinearLayout linear;
};

/// Thread coordinates of the running thread, emitted once per use site.
class ThreadCoords {
public:
  ThreadCoords(OpBuilder &b, Location loc);
  Value tid, lane, warp;

  /// i32 constant.
  Value constant(int64_t v);
  /// (row, col) as i32 of the lane and warp part of `l`'s positions.
  std::pair<Value, Value> threadOffset(const layout::LinearLayout &l);
  /// (row, col) as i32 of every slot this thread holds, in slot order.
  SmallVector<std::pair<Value, Value>> positions(const TileDistribution &t);
  /// i1: this thread holds the canonical copy of its elements (its lane and
  /// warp have the layout's free bits clear).
  Value isOwner(const TileDistribution &t);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_TILEDISTRIBUTION_H
