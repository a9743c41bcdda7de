//===- SelectMma.cpp - record the tensor-core instruction of matmuls ------===//

#include "sage/Dialect/Sage/IR/MmaShapes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"

#include "mlir/Interfaces/LoopLikeInterface.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGESELECTMMA
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {
struct SelectMmaPass : public sage::impl::SageSelectMmaBase<SelectMmaPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<TargetInfo> info = SageDialect::getTarget(module);
    bool hasWgmma = info && info->hasWgmma();
    int64_t warps = SageDialect::getNumWarps(module);
    module.walk([&](Operation *op) {
      if (!isa<QMatmulOp, MatmulOp>(op) || op->hasAttr("mma"))
        return;
      auto lhs = cast<RankedTensorType>(op->getOperand(0).getType());
      auto result = cast<RankedTensorType>(op->getResult(0).getType());
      int64_t k = lhs.getDimSize(
          op->getAttrOfType<IntegerAttr>("lhs_contract_dim").getInt());
      bool wgmma =
          hasWgmma && fitsWgmma(result.getDimSize(0), result.getDimSize(1), k,
                                lhs.getElementTypeBitWidth(), warps);
      // An A computed in the program (not loaded) already lives in
      // registers: wgmma takes it from there, unless A is contracted over
      // its rows (a transposed A is only read from shared memory) or was
      // computed outside the loop the matmul runs in (stored to shared
      // memory once, it holds no registers across the loop: a forward's
      // query block quantized before its key loop). A rhs in sigma16 order
      // needs A in registers (the verifier ensures the contraction).
      auto q = dyn_cast<QMatmulOp>(op);
      Value a = op->getOperand(0);
      auto loop = op->getParentOfType<LoopLikeOpInterface>();
      bool aInRegisters =
          (q && q.getRhsSigma16()) ||
          (!a.getDefiningOp<LoadOp>() &&
           op->getAttrOfType<IntegerAttr>("lhs_contract_dim").getInt() == 1 &&
           !(loop && loop.isDefinedOutsideOfLoop(a)));
      MmaKind kind = !wgmma         ? MmaKind::MmaSync
                     : aInRegisters ? MmaKind::WgmmaRegA
                                    : MmaKind::Wgmma;
      op->setAttr("mma", MmaKindAttr::get(op->getContext(), kind));
    });
  }
};
} // namespace
