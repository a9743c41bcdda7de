//===- InitAllSage.cpp - dialect and pass registration --------------------===//

#include "sage/Registration/InitAllSage.h"

#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/Transforms/Passes.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"
#include "sage/Pipelines/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"

void mlir::sage::registerAllSageDialects(DialectRegistry &registry) {
  registry.insert<SageDialect, sagegpu::SageGPUDialect, arith::ArithDialect, cf::ControlFlowDialect,
                  func::FuncDialect, LLVM::LLVMDialect, math::MathDialect,
                  NVVM::NVVMDialect, scf::SCFDialect>();
}

void mlir::sage::registerAllSagePasses() {
  registerSagePasses();
  sagegpu::registerSageGPUPasses();
  registerSageToLLVMPasses();
  // The upstream passes the named pipelines use, so each stage replays alone.
  registerSCFToControlFlowPass();
  registerArithToLLVMConversionPass();
  registerConvertMathToLLVMPass();
  registerConvertControlFlowToLLVMPass();
  registerConvertFuncToLLVMPass();
  registerConvertNVVMToLLVMPass();
  registerReconcileUnrealizedCastsPass();
  registerSagePipelines();
}
