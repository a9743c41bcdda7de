//===- AttachTarget.cpp - record target facts on the module ---------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEATTACHTARGET
#include "sage/Dialect/Sage/Transforms/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {
struct AttachTargetPass
    : public sage::impl::SageAttachTargetBase<AttachTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    NamedAttribute attrs[] = {
        b.getNamedAttr(SageDialect::kTargetAttrName, b.getStringAttr(arch)),
        b.getNamedAttr(SageDialect::kNumWarpsAttrName,
                       b.getI32IntegerAttr(numWarps))};
    // The dialect's attribute verifier owns the rules for these values.
    auto *dialect = getContext().getLoadedDialect<SageDialect>();
    for (NamedAttribute attr : attrs) {
      if (failed(dialect->verifyOperationAttribute(module, attr)))
        return signalPassFailure();
      module->setAttr(attr.getName(), attr.getValue());
    }
  }
};
} // namespace
