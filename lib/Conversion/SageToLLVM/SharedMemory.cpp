//===- SharedMemory.cpp - scratch buffer access ---------------------------===//

#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

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

void mlir::sage::barrier(OpBuilder &b, Location loc, Operation *at) {
  sagegpu::WarpRole role = sagegpu::getWarpRole(at);
  if (role == sagegpu::WarpRole::All) {
    NVVM::Barrier0Op::create(b, loc);
    return;
  }
  auto ws = at->getParentOfType<sagegpu::WarpSpecializeOp>();
  bool producer = role == sagegpu::WarpRole::Producer;
  int64_t threads = producer ? sagegpu::WarpSpecializeOp::kProducerThreads
                             : ws.getConsumerThreads();
  inlinePtx(
      b, loc, Type(), {},
      ("bar.sync " + Twine(producer ? 2 : 1) + ", " + Twine(threads) + ";")
          .str(),
      "");
}

int64_t mlir::sage::getOpScratchBytes(Operation *op) {
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return getReduceScratchBytes(reduce);
  if (isa<sagegpu::ConvertLayoutOp>(op))
    return getConvertLayoutScratchBytes(op);
  if (isa<sagegpu::TransOp>(op))
    return getTransScratchBytes(op);
  if (auto add = dyn_cast<CounterAddOp>(op))
    return add.getOld().use_empty() ? 0 : 4; // the old value, handed over
  if (isa<MakeTensorMapOp>(op))
    return MakeTensorMapOp::kBytes; // the map is assembled there
  if (auto dot = dyn_cast<sagegpu::DotOp>(op))
    return getSplatAccumulatorBits(dot) ? 16 : 0; // the splat, broadcast
  return 0;
}

int64_t mlir::sage::getScratchOffset(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>(kScratchOffsetAttrName);
  return attr ? attr.getInt() : 0;
}
