//===- CopyLeaders.cpp - the thread that issues one-thread copies ---------===//

#include "sage/Conversion/SageToLLVM/CopyLeaders.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/Encodings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::sage;

/// The ops whose lowering runs on the role's leader alone.
static bool isOneThreadCopyOp(Operation *op) {
  return isa<sagegpu::MbarrierInitOp, sagegpu::MbarrierInvalOp,
             sagegpu::TmaLoadOp, sagegpu::BulkLoadOp, sagegpu::TmaStoreOp>(op);
}

/// i1 at `b`: the thread is in warp `warpIndex`, uniform in each warp.
static Value leaderWarp(OpBuilder &b, Location loc, int64_t warpIndex) {
  Type i32 = b.getI32Type();
  auto constant = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  Value warp = arith::ShRUIOp::create(
      b, loc, tid, constant(llvm::Log2_32(layout::kWarpSize)));
  // tid / 32 is uniform in fact; lane 0's copy of it is uniform to ptxas.
  Value uniformWarp = NVVM::ShflOp::create(
      b, loc, i32, constant(-1), warp, constant(0),
      constant(layout::kWarpSize - 1), NVVM::ShflKind::idx, UnitAttr());
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, uniformWarp,
                               constant(warpIndex));
}

CopyLeaders CopyLeaders::materialize(ModuleOp module) {
  CopyLeaders result;
  module.walk([&](Operation *op) {
    if (!isOneThreadCopyOp(op))
      return;
    auto func = op->getParentOfType<FunctionOpInterface>();
    if (!func)
      return;
    int64_t first = sagegpu::getRoleFirstThread(op);
    auto key = std::make_pair(func.getOperation(), first);
    if (result.leaders.count(key))
      return;
    // A role's first thread starts a warp (its warpgroup's).
    auto b = OpBuilder::atBlockBegin(&func.getFunctionBody().front());
    result.leaders[key] =
        leaderWarp(b, op->getLoc(), first / layout::kWarpSize);
  });
  return result;
}

Value CopyLeaders::get(Operation *op) const {
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return Value();
  return leaders.lookup(
      std::make_pair(func.getOperation(), sagegpu::getRoleFirstThread(op)));
}
