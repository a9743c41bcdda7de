//===- ProgramOpsToLLVM.cpp - program ids and pointers --------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

template <typename XOp, typename YOp, typename ZOp>
static Value readGridRegister(OpBuilder &b, Location loc, unsigned axis) {
  Type i32 = b.getI32Type();
  switch (axis) {
  case 0:
    return XOp::create(b, loc, i32);
  case 1:
    return YOp::create(b, loc, i32);
  default:
    return ZOp::create(b, loc, i32);
  }
}

struct ProgramIdLowering : public OpConversionPattern<ProgramIdOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProgramIdOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    rw.replaceOp(
        op,
        readGridRegister<NVVM::BlockIdXOp, NVVM::BlockIdYOp, NVVM::BlockIdZOp>(
            rw, op.getLoc(), op.getAxis()));
    return success();
  }
};

struct NumProgramsLowering : public OpConversionPattern<NumProgramsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NumProgramsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    rw.replaceOp(
        op,
        readGridRegister<NVVM::GridDimXOp, NVVM::GridDimYOp, NVVM::GridDimZOp>(
            rw, op.getLoc(), op.getAxis()));
    return success();
  }
};

// barrier.cluster.arrive (release) then barrier.cluster.wait (acquire),
// both .aligned: every thread of the program executes the op.
struct ClusterBarrierLowering : public OpConversionPattern<ClusterBarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ClusterBarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    NVVM::ClusterArriveOp::create(rw, loc, rw.getUnitAttr());
    NVVM::ClusterWaitOp::create(rw, loc, rw.getUnitAttr());
    rw.eraseOp(op);
    return success();
  }
};

// griddepcontrol.wait / .launch_dependents, executed by every thread.
template <typename Op, NVVM::GridDepActionKind Kind>
struct GridDependencyLowering : public OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    NVVM::GriddepcontrolOp::create(rw, op.getLoc(), Kind);
    rw.eraseOp(op);
    return success();
  }
};

struct AddPtrLowering : public OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Type elem = op.getPtr().getType().getPointeeType();
    rw.replaceOpWithNewOp<LLVM::GEPOp>(op, adaptor.getPtr().getType(), elem,
                                       adaptor.getPtr(),
                                       ValueRange{adaptor.getOffset()});
    return success();
  }
};

} // namespace

void mlir::sage::populateProgramOpsToLLVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns
      .add<ProgramIdLowering, NumProgramsLowering, ClusterBarrierLowering,
           GridDependencyLowering<GridDependencyWaitOp,
                                  NVVM::GridDepActionKind::wait>,
           GridDependencyLowering<LaunchDependentsOp,
                                  NVVM::GridDepActionKind::launch_dependents>,
           AddPtrLowering>(converter, patterns.getContext());
}
