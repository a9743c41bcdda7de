//===- Divisibility.h - known divisors of integers and pointers -*- C++ -*-===//
//
// Facts the kernel-argument hints (`sage.alignment`, `sage.divisibility`,
// added by the JIT's specialisation like Triton's) and constants prove about
// index arithmetic: the largest power of two dividing an integer, the byte
// alignment of a pointer. Passes use them to choose 16-byte copies
// (sagegpu-promote-operands) and the lowering to choose vector loads.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_DIVISIBILITY_H
#define SAGE_DIALECT_SAGE_IR_DIVISIBILITY_H

#include "mlir/IR/Value.h"

namespace mlir::sage {

/// The largest power of two known to divide the integer `v` (capped at
/// 2^20), from constants, `sage.divisibility` argument attributes, `scf.for`
/// counters and the arithmetic between them.
int64_t knownDivisor(Value v);

/// The byte alignment known for a `!sage.ptr` (capped at 2^20), from
/// `sage.alignment` argument attributes and `sage.addptr` offsets.
int64_t knownAlignment(Value ptr);

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_IR_DIVISIBILITY_H
