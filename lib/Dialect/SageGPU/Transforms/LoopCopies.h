//===- LoopCopies.h - copy-engine copies a loop can issue ahead -*- C++ -*-===//
//
// What sagegpu-pipeline and sagegpu-warp-specialize share: which of a loop's
// copy-engine copies (TMA and bulk) can be issued by other iterations (or by
// other warps), the ring of buffers and mbarriers they become, and the
// accumulation a loop can keep in flight across iterations.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGEGPU_TRANSFORMS_LOOPCOPIES_H
#define SAGE_DIALECT_SAGEGPU_TRANSFORMS_LOOPCOPIES_H

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::sagegpu {

/// A copy of a loop body that can be issued ahead, and what it takes along.
struct LoopCopy {
  /// A sagegpu.tma_load or sagegpu.bulk_load: a copy-engine copy that
  /// completes an mbarrier.
  Operation *copy;
  LocalAllocOp buffer, barrier;
  /// The body's ops that compute the coordinates, in order.
  SmallVector<Operation *> coordinates;

  /// What the copy reads besides its mbarrier and tile: a TMA copy's map
  /// and coordinates, a bulk copy's pointer and offset.
  OperandRange inputs() const { return copy->getOperands().drop_back(2); }
};

/// `copy` (a sagegpu.tma_load or sagegpu.bulk_load) as a copy the loop can
/// issue ahead: its buffer and mbarrier are allocated in the body and used
/// there only (the mbarrier by its init, the copy, waits and inval), a TMA
/// copy's map comes from outside the loop and the other inputs are
/// side-effect-free functions of the induction variable and of values from
/// outside the loop; nullopt otherwise.
std::optional<LoopCopy> getLoopCopy(scf::ForOp loop, Operation *copy);

/// The i32 constant `v`.
Value constantI32(OpBuilder &b, Location loc, int64_t v);

/// `stages` buffers of `tile`'s type, one after the other.
SharedTileType getRingType(SharedTileType tile, int64_t stages);

/// Slot `index` of `ring` (a ring of tiles or of mbarriers).
Value getRingSlot(OpBuilder &b, Location loc, Value ring, Value index);

/// A ring of `stages` mbarriers, allocated and initialised to expect `count`
/// arrivals each, at `b`'s insertion point.
Value createMbarrierRing(OpBuilder &b, Location loc, int64_t stages,
                         int64_t count);

/// For each copy, a ring of `stages` of its buffers and a ring of `stages`
/// mbarriers expecting one arrival (the copy's), at `b`'s insertion point.
SmallVector<std::pair<Value, Value>> createCopyRings(OpBuilder &b, Location loc,
                                                     ArrayRef<LoopCopy> copies,
                                                     int64_t stages);

/// Where an iteration of a loop with S stages is in the rings: its index
/// from 0 in the loop (`local`, i32), its index `it` among every iteration
/// that used the rings (`base` + local: a loop nested in others continues
/// where its last run stopped), its slot `it % S` and the parity
/// `(it / S) % 2` of its use of the slot, computed at the start of the body.
struct RingPosition {
  Value local, iteration, slot, phase;
};
RingPosition getRingPosition(scf::ForOp loop, int64_t stages, Value base = {});

/// Points the body's uses of `copy`'s buffer at slot `at.slot` of `tiles`
/// and its mbarrier waits at that slot of `barriers` (phase `at.phase`);
/// erases the mbarrier's other uses but the copy (the caller erases the
/// copy, its buffer and its mbarrier).
void readFromRing(Location loc, LoopCopy copy, Value tiles, Value barriers,
                  const RingPosition &at);

/// The trip count of `loop` as i32 (0 when its range is empty), computed
/// before it.
Value getTripCountI32(scf::ForOp loop);

/// Issues `copy` for the iteration whose induction variable is `iv` (its
/// coordinates cloned through `map`, which maps the loop's induction
/// variable to `iv`) into slot `index` of `tiles`, on slot `index` of
/// `barriers`.
void issueCopy(OpBuilder &b, Location loc, const LoopCopy &copy, IRMapping &map,
               Value tiles, Value barriers, Value index);

/// Keeps the loop's accumulation in flight across iterations when its body
/// holds one wgmma dot that accumulates into a carried value nothing else
/// reads: the dot's result is carried as it is, a `dot_wait` without
/// operands and with pendings = 1 after the dot completes the previous
/// iteration's, and a `dot_wait` after the loop completes the last one. When
/// `mustPrecede` is given, it must come before the dot. Returns the in-loop
/// wait (after it, the previous iteration's operands are free), or null when
/// the loop does not have that form (it is then unchanged).
DotWaitOp keepAccumulationInFlight(scf::ForOp loop,
                                   Operation *mustPrecede = nullptr);

} // namespace mlir::sagegpu

#endif // SAGE_DIALECT_SAGEGPU_TRANSFORMS_LOOPCOPIES_H
