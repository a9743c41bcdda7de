//===- ScalarMathToNVVM.cpp - math the NVPTX backend cannot select --------===//
//
// `llvm.log2.f32` has no NVPTX lowering (llc aborts the process), so scalar
// f32 log2 becomes the `lg2.approx` intrinsic here. exp2 needs nothing:
// `llvm.exp2.f32` selects `ex2.approx.f32`.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace {
struct Log2Lowering : public OpRewritePattern<math::Log2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Log2Op op,
                                PatternRewriter &rw) const override {
    if (!op.getType().isF32())
      return rw.notifyMatchFailure(op, "only scalar f32");
    rw.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
        op, op.getType(), rw.getStringAttr("llvm.nvvm.lg2.approx.f"),
        ValueRange{op.getOperand()});
    return success();
  }
};
} // namespace

void mlir::sage::populateScalarMathToNVVMPatterns(RewritePatternSet &patterns) {
  patterns.add<Log2Lowering>(patterns.getContext());
}
