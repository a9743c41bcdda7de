//===- Compiler.h - sage IR text in, PTX out --------------------*- C++ -*-===//
//
// The small public API the tools use (the Python binding uses the C API in
// CApi.h, which this header includes). Everything runs
// in-process (no mlir-opt, llc or ptxas subprocess) with the same named
// pipeline sage-opt replays, and every error diagnostic fails the call.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_COMPILER_COMPILER_H
#define SAGE_COMPILER_COMPILER_H

#include "sage/Compiler/CApi.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"

#include <string>

namespace sage {

struct CompileOptions {
  /// sm_80, sm_86, sm_89, sm_90 or sm_90a; empty: the module's
  /// `sage.target`, else sm_90a.
  std::string arch;
  /// Warps per program (1, 2, 4, 8, 16); 0: the module's `sage.num_warps`,
  /// else 4.
  int numWarps = 0;
  /// PTX ISA version times ten.
  unsigned ptxVersion = ::mlir::sage::TargetInfo::kDefaultPtxVersion;
  /// false: the input is already lowered (the output of
  /// `sage-opt --sage-to-nvvm`); only translate it.
  bool runPipeline = true;
  /// The name diagnostics give the source (a file name, say).
  std::string sourceName = "sage-input";
  /// When set, the IR after every pass is written to this file.
  std::string irDumpPath;
  /// Keep the IR after every pass in `CompileResult::passIR`.
  bool capturePassIR = false;
  /// Also assemble the PTX into a cubin with ptxas ($SAGE_PTXAS, else found
  /// on PATH, under $CUDA_HOME/bin or in /usr/local/cuda/bin); its -v report
  /// (registers, spills) lands in `ptxasLog`, and spills are a warning.
  bool emitCubin = false;
};

struct CompileResult {
  bool ok = false;
  /// Kernel description comments followed by the PTX module.
  std::string ptx;
  /// Optimised LLVM IR and the lowered MLIR (LLVM dialect).
  std::string llvmIR;
  std::string loweredMLIR;
  /// The IR after every pass, when capturePassIR was set.
  std::string passIR;
  /// The cubin and ptxas' report, when emitCubin was set.
  std::string cubin;
  std::string ptxasLog;
  /// Every diagnostic, one per line, when !ok (warnings too when ok).
  std::string diagnostics;
};

/// Compiles sage IR text (a module of `sage.kernel` functions) to PTX.
CompileResult compile(const std::string &source, const CompileOptions &options);

/// The ptxas a cubin compilation runs: $SAGE_PTXAS when set (empty if it is
/// not executable), else ptxas on PATH, under $CUDA_HOME/bin or in
/// /usr/local/cuda/bin; empty when there is none.
std::string findPtxas();

} // namespace sage

#endif // SAGE_COMPILER_COMPILER_H
