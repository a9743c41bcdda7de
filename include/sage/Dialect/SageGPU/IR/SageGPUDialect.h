//===- SageGPUDialect.h - the sagegpu dialect -------------------*- C++ -*-===//
//
// Layout encodings (each a linear layout, see sage/Layout) and the ops that
// move tiles between them.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_H
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_H

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Layout/LinearLayout.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TensorEncoding.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sage/Dialect/SageGPU/IR/SageGPUInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUTypes.h.inc"

#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h.inc"

namespace mlir::sagegpu {
/// The shared memory of a program, as a side-effect resource: ops that
/// touch it keep their order.
struct SharedMemoryResource
    : public SideEffects::Resource::Base<SharedMemoryResource> {
  StringRef getName() final { return "<SharedMemory>"; }
};
} // namespace mlir::sagegpu

#define GET_OP_CLASSES
#include "sage/Dialect/SageGPU/IR/SageGPUOps.h.inc"

namespace mlir::sagegpu {

/// The distributed encoding of `type`, or null when it is not a rank-2 tile
/// with one.
DistributedEncodingAttrInterface getDistributedEncoding(Type type);

/// The linear layout of a tile type with a distributed encoding and
/// power-of-two extents; nullopt otherwise.
std::optional<sage::layout::LinearLayout> getLinearLayout(Type type);

/// The program-wide blocked encoding of tiles no matmul reaches.
BlockedEncodingAttr getDefaultBlockedEncoding(MLIRContext *ctx,
                                              unsigned numWarps);

/// A blocked encoding for storing a `shape` tile of `elemBytes` elements
/// through a transposed view (unit stride along rows): each thread holds up
/// to 16 bytes of consecutive rows of one column, so that its stores are
/// wide and whole 32-byte sectors.
BlockedEncodingAttr getColumnBlockedEncoding(MLIRContext *ctx,
                                             unsigned numWarps,
                                             ArrayRef<int64_t> shape,
                                             int64_t elemBytes);

/// A blocked encoding for a tile that is loaded along its rows and stored
/// through a transposed view: each thread holds the default's four columns
/// of up to 16 bytes of consecutive rows (of `storeBytes` elements), and
/// lanes down the rows make each store fill whole 32-byte sectors, so both
/// accesses are vectors and no layout conversion lies between them. Null
/// when the tile is too short for vectors of 4 bytes along its rows or no
/// such layout covers it exactly.
BlockedEncodingAttr getTransposingBlockedEncoding(MLIRContext *ctx,
                                                  unsigned numWarps,
                                                  ArrayRef<int64_t> shape,
                                                  int64_t storeBytes);

/// The local_alloc whose bytes `shared` names: its definition, or, for a
/// `sagegpu.ring_slot`, its ring's (null for a buffer passed in).
LocalAllocOp getAllocation(Value shared);

/// Calls `fn` on every op that uses the bytes of `alloc`: its users, and
/// through `sagegpu.ring_slot` the users of its slots.
void forEachSharedUser(LocalAllocOp alloc, function_ref<void(Operation *)> fn);

/// The wgmma dot whose result `value` is, directly or carried out of the
/// scf.for loops that yield it (an accumulator left in flight); null if none.
DotOp getWaitedDot(Value value);

/// Calls `fn` on every sagegpu.dot_wait that completes `dot`: its users, and
/// through the scf.for that carries its result, the users of the loop's.
void forEachWait(DotOp dot, function_ref<void(DotWaitOp)> fn);

/// The accumulator encoding of an `m x n` matmul result computed with `kind`
/// by `numWarps` warps: how the lowering tiles the instruction over warps.
MmaEncodingAttr getAccumulatorEncoding(MLIRContext *ctx, sage::MmaKind kind,
                                       int64_t m, int64_t n, unsigned numWarps);

/// Which warps run an op: all of the program's, or one role of a
/// sagegpu.warp_specialize.
enum class WarpRole { All, Producer, Consumers };
WarpRole getWarpRole(Operation *op);
/// The first thread of the role that runs `op`: the producer's follow the
/// consumers'; 0 otherwise. Per-thread choices (the one thread that issues
/// a copy) count from there.
int64_t getRoleFirstThread(Operation *op);

} // namespace mlir::sagegpu

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUDIALECT_H
