//===- AssignLayouts.cpp - give every tile a distributed layout -----------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEASSIGNLAYOUTS
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {
struct AssignLayoutsPass
    : public sage::impl::SageAssignLayoutsBase<AssignLayoutsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    unsigned numWarps = SageDialect::getNumWarps(module);
    auto layout = BlockedLayoutAttr::get(ctx, {1, 4}, {4, 8}, {numWarps, 1});

    auto withLayout = [&](Type type) -> Type {
      auto tile = dyn_cast<RankedTensorType>(type);
      if (!tile || tile.getEncoding() || tile.getRank() != 2)
        return type;
      return RankedTensorType::get(tile.getShape(), tile.getElementType(),
                                   layout);
    };

    module.walk([&](Operation *op) {
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(withLayout(arg.getType()));
      for (OpResult result : op->getResults())
        result.setType(withLayout(result.getType()));
      if (auto cst = dyn_cast<arith::ConstantOp>(op))
        if (auto dense = dyn_cast<DenseElementsAttr>(cst.getValue()))
          cst.setValueAttr(dense.reshape(cast<ShapedType>(cst.getType())));
      if (auto func = dyn_cast<func::FuncOp>(op)) {
        SmallVector<Type> inputs, results;
        for (Type t : func.getArgumentTypes())
          inputs.push_back(withLayout(t));
        for (Type t : func.getResultTypes())
          results.push_back(withLayout(t));
        func.setFunctionType(FunctionType::get(ctx, inputs, results));
      }
    });
  }
};
} // namespace
