//===- SharedMemory.cpp - scratch buffer access ---------------------------===//

#include "sage/Conversion/SageToLLVM/SharedMemory.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

static constexpr unsigned kSharedAddressSpace = 3;

Value mlir::sage::getScratchPtr(OpBuilder &b, Location loc, Value byteOffset) {
  auto ptrType =
      LLVM::LLVMPointerType::get(b.getContext(), kSharedAddressSpace);
  Value base = LLVM::AddressOfOp::create(b, loc, ptrType, kScratchSymbol);
  return LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base,
                             ValueRange{byteOffset});
}

Value mlir::sage::loadScratch(OpBuilder &b, Location loc, Type type,
                              Value byteOffset) {
  return LLVM::LoadOp::create(b, loc, type, getScratchPtr(b, loc, byteOffset));
}

void mlir::sage::storeScratch(OpBuilder &b, Location loc, Value value,
                              Value byteOffset) {
  LLVM::StoreOp::create(b, loc, value, getScratchPtr(b, loc, byteOffset));
}

void mlir::sage::barrier(OpBuilder &b, Location loc) {
  NVVM::Barrier0Op::create(b, loc);
}
