//===- SharedMemory.h - the program's shared-memory scratch -----*- C++ -*-===//
//
// Ops that exchange data between threads (reductions across warps, matmul
// operand staging) use one dynamic shared-memory buffer, `@sage_scratch`,
// from offset 0, bracketed by barriers. Its size is the maximum over the
// kernel's ops and is recorded on the kernel for the launcher.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H
#define SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H

#include "mlir/IR/Builders.h"

namespace mlir::sage {

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

/// Block-wide barrier.
void barrier(OpBuilder &b, Location loc);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_SHAREDMEMORY_H
