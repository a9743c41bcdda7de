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
constexpr llvm::StringLiteral kDefaultArch = "sm_90a";
constexpr int kDefaultNumWarps = 4;

struct AttachTargetPass
    : public sage::impl::SageAttachTargetBase<AttachTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    Attribute target = module->getAttr(SageDialect::kTargetAttrName);
    if (!arch.empty() || !target)
      target = b.getStringAttr(arch.empty() ? StringRef(kDefaultArch)
                                            : StringRef(arch.getValue()));
    Attribute warps = module->getAttr(SageDialect::kNumWarpsAttrName);
    if (numWarps != 0 || !warps)
      warps = b.getI32IntegerAttr(numWarps != 0 ? numWarps.getValue()
                                                : kDefaultNumWarps);
    NamedAttribute attrs[] = {
        b.getNamedAttr(SageDialect::kTargetAttrName, target),
        b.getNamedAttr(SageDialect::kNumWarpsAttrName, warps)};
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
