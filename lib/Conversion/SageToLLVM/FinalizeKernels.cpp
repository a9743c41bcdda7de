//===- FinalizeKernels.cpp - mark lowered kernels for NVVM ----------------===//

#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"

namespace mlir::sage {
#define GEN_PASS_DEF_SAGEFINALIZEKERNELS
#include "sage/Conversion/SageToLLVM/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

namespace {
struct FinalizeKernelsPass
    : public sage::impl::SageFinalizeKernelsBase<FinalizeKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int32_t warps = SageDialect::getNumWarps(module);
    std::optional<unsigned> maxnreg = SageDialect::getMaxnreg(module);
    Builder b(&getContext());
    module.walk([&](LLVM::LLVMFuncOp func) {
      if (!func->hasAttr(SageDialect::kKernelAttrName))
        return;
      func->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(),
                    b.getUnitAttr());
      // A warp-specialised kernel launches its producer warps after the
      // program's.
      int32_t producerWarps = 0;
      if (auto extra = func->getAttrOfType<IntegerAttr>(
              SageDialect::kProducerWarpsAttrName))
        producerWarps = extra.getInt();
      func->setAttr(
          NVVM::NVVMDialect::getMaxntidAttrName(),
          b.getDenseI32ArrayAttr({(warps + producerWarps) * 32, 1, 1}));
      // A register cap the kernel asked for (sage.maxnreg: more programs
      // per SM). Otherwise: with only a thread cap, ptxas aims at several
      // resident programs per SM and may cap registers (64 at 256 threads)
      // and spill; one program per SM as the floor lets it use the
      // registers the kernel needs.
      if (maxnreg)
        func->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                      b.getI32IntegerAttr(*maxnreg));
      else
        func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                      b.getI32IntegerAttr(1));
    });
  }
};
} // namespace
