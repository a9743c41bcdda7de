//===- Passes.h - sage to LLVM/NVVM conversion passes -----------*- C++ -*-===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_PASSES_H
#define SAGE_CONVERSION_SAGETOLLVM_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

namespace mlir::sage {

#define GEN_PASS_DECL
#include "sage/Conversion/SageToLLVM/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "sage/Conversion/SageToLLVM/Passes.h.inc"

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_PASSES_H
