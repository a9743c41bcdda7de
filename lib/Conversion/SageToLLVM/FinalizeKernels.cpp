//===- FinalizeKernels.cpp - mark lowered kernels for NVVM ----------------===//

#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
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
    int32_t ctas = SageDialect::getNumCtas(module);
    Builder b(&getContext());
    module.walk([&](LLVM::LLVMFuncOp func) {
      if (!func->hasAttr(SageDialect::kKernelAttrName))
        return;
      func->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(),
                    b.getUnitAttr());
      // A host-encoded tensor map is a 128-byte parameter, 64-byte aligned
      // as the copy engine requires, read in place (__grid_constant__: the
      // kernel takes its address, which must not make a local copy).
      auto bytes =
          LLVM::LLVMArrayType::get(b.getI8Type(), MakeTensorMapOp::kBytes);
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
        if (!func.getArgAttr(i, SageDialect::kHostTensorMapAttrName))
          continue;
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(bytes));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(64));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
        // Thread 0 asks for the map first thing, so that the descriptor is
        // on its way while the program sets up (as CUTLASS does).
        OpBuilder entry(&func.getBody().front(),
                        func.getBody().front().begin());
        Location loc = func.getLoc();
        Value tid = NVVM::ThreadIdXOp::create(entry, loc, entry.getI32Type());
        Value address = LLVM::PtrToIntOp::create(entry, loc, entry.getI64Type(),
                                                 func.getArgument(i));
        inlinePtx(entry, loc, Type(), {address, tid},
                  "{ .reg .pred p; setp.eq.u32 p, $1, 0; "
                  "@p prefetch.tensormap [$0]; }",
                  "l,r");
      }
      // A warp-specialised kernel launches its producer warps after the
      // program's.
      int32_t producerWarps = 0;
      if (auto extra = func->getAttrOfType<IntegerAttr>(
              SageDialect::kProducerWarpsAttrName))
        producerWarps = extra.getInt();
      func->setAttr(
          NVVM::NVVMDialect::getMaxntidAttrName(),
          b.getDenseI32ArrayAttr({(warps + producerWarps) * 32, 1, 1}));
      // Programs in clusters (.reqnctapercluster): a plain launch then
      // groups them, and its grid's axis 0 must be a multiple.
      if (ctas > 1)
        func->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                      b.getDenseI32ArrayAttr({ctas, 1, 1}));
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
