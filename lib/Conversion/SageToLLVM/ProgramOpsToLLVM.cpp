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
  patterns.add<ProgramIdLowering, NumProgramsLowering, AddPtrLowering>(
      converter, patterns.getContext());
}
