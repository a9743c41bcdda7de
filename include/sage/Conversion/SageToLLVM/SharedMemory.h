//===- SharedMemory.h - the program's shared memory -------------*- C++ -*-===//
//
// A program has one dynamic shared-memory array, `@sage_scratch`. The IR
// names its parts: `!sagegpu.smem` tiles (`sagegpu.local_alloc`) and the
// op-scoped scratch of ops that exchange data between threads (reductions
// across warps, layout conversions and transposes through shared memory,
// tensor-map assembly). `sagegpu-allocate-shared-memory` places both from
// their liveness and records the total on the kernel for the launcher;
// `sagegpu-insert-barriers` orders the accesses. The lowerings here only
// read the offsets.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H
#define SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H

#include "mlir/IR/Builders.h"

namespace mlir::sage {

/// Byte offset of an op's scratch area, set by the allocation pass.
inline constexpr llvm::StringLiteral kScratchOffsetAttrName =
    "sagegpu.scratch_offset";

/// Bytes of op-scoped shared scratch `op` needs while it runs (0: none).
int64_t getOpScratchBytes(Operation *op);
/// The allocated offset of `op`'s scratch (its kScratchOffsetAttrName).
int64_t getScratchOffset(Operation *op);

/// Name of the extern shared array every kernel addresses.
inline constexpr llvm::StringLiteral kScratchSymbol = "sage_scratch";
/// The scratch buffer's alignment: TMA writes boxes and tensor maps are
/// assembled at 128-byte boundaries.
inline constexpr int64_t kScratchAlignment = 128;

/// `!llvm.ptr<3>` to byte `offset` of the scratch buffer.
Value getScratchPtr(OpBuilder &b, Location loc, Value byteOffset);

/// Loads/stores a scalar of `type` at byte `offset` (an i32 value).
Value loadScratch(OpBuilder &b, Location loc, Type type, Value byteOffset);
void storeScratch(OpBuilder &b, Location loc, Value value, Value byteOffset);

/// The threads that run `at` meet: all of the program's (bar.sync 0), or,
/// in a region of sagegpu.warp_specialize, that role's warps only (named
/// barrier 1 for the consumers, 2 for the producer).
void barrier(OpBuilder &b, Location loc, Operation *at);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H
