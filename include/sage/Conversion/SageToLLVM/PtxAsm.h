//===- PtxAsm.h - PTX the NVVM dialect has no op for ------------*- C++ -*-===//
//
// Predicated loads, TMA and mbarrier forms that MLIR 22's NVVM
// dialect lacks (or models for clusters only) are emitted as inline PTX.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_PTXASM_H
#define SAGE_CONVERSION_SAGETOLLVM_PTXASM_H

#include "mlir/IR/Builders.h"

namespace mlir::sage {

/// One inline-PTX statement (`$n` operands, LLVM constraint letters);
/// returns its result, or a null Value when `result` is null. A pure one
/// (`sideEffects` false) may be folded away or merged by CSE.
Value inlinePtx(OpBuilder &b, Location loc, Type result, ValueRange operands,
                StringRef text, StringRef constraints, bool sideEffects = true);

/// The 32-bit shared-window address of byte `byteOffset` of the scratch
/// buffer, as PTX's shared-state-space operands take it.
Value sharedAddress(OpBuilder &b, Location loc, Value byteOffset);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_PTXASM_H
