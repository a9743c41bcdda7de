//===- PtxAsm.cpp - PTX the NVVM dialect has no op for --------------------===//

#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

Value mlir::sage::inlinePtx(OpBuilder &b, Location loc, Type result,
                            ValueRange operands, StringRef text,
                            StringRef constraints, bool sideEffects) {
  auto op = LLVM::InlineAsmOp::create(
      b, loc, result, operands, b.getStringAttr(text),
      b.getStringAttr(constraints), sideEffects ? b.getUnitAttr() : UnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
  return result ? op.getResult(0) : Value();
}

Value mlir::sage::sharedAddress(OpBuilder &b, Location loc, Value byteOffset) {
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(),
                                  getScratchPtr(b, loc, byteOffset));
}
