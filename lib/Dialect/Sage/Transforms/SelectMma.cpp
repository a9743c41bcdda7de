//===- SelectMma.cpp - record the tensor-core instruction of matmuls ------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGESELECTMMA
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {
struct SelectMmaPass : public sage::impl::SageSelectMmaBase<SelectMmaPass> {
  void runOnOperation() override {
    // mma.sync runs on every supported target; wgmma is selected here once
    // its lowering lands (sm_90a, 64-row warpgroup tiles).
    getOperation().walk([](Operation *op) {
      if (!isa<QMatmulOp, MatmulOp>(op) || op->hasAttr("mma"))
        return;
      op->setAttr("mma", MmaKindAttr::get(op->getContext(), MmaKind::MmaSync));
    });
  }
};
} // namespace
