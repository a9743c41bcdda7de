//===- PTX.h - LLVM-dialect NVVM kernels to PTX -----------------*- C++ -*-===//

#ifndef SAGE_TARGET_PTX_H
#define SAGE_TARGET_PTX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"

#include <string>

namespace mlir::sage {

struct PTXOptions {
  std::string arch = "sm_90a";
  /// PTX ISA version times ten (80 is PTX 8.0). Always explicit: LLVM's
  /// default for sm_90a would abort the process.
  unsigned ptxVersion = ::mlir::sage::TargetInfo::kDefaultPtxVersion;
};

/// Registers the translations from the dialects the lowering ends in
/// (builtin, llvm, nvvm) to LLVM IR.
void registerPTXTranslations(DialectRegistry &registry);

/// Translates `module` (LLVM dialect, NVVM kernels) to PTX with the NVPTX
/// backend at -O3. Problems are reported as diagnostics on `module`.
/// When `llvmIR` is given it receives the optimised LLVM IR.
FailureOr<std::string> translateToPTX(ModuleOp module,
                                      const PTXOptions &options,
                                      std::string *llvmIR = nullptr);

/// One comment line per kernel (name, threads, dynamic shared memory) that
/// prefixes the PTX, so a launcher holding only the text knows how to run it:
/// `// sage.kernel name=K threads=128 shared_memory=16384`.
std::string describeKernels(ModuleOp module);

} // namespace mlir::sage

#endif // SAGE_TARGET_PTX_H
