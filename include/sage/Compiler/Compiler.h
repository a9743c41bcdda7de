//===- Compiler.h - sage IR text in, PTX out --------------------*- C++ -*-===//
//
// The small public API the tools and the Python binding use. Everything runs
// in-process (no mlir-opt, llc or ptxas subprocess) with the same named
// pipeline sage-opt replays, and every error diagnostic fails the call.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_COMPILER_COMPILER_H
#define SAGE_COMPILER_COMPILER_H

#include <string>

namespace sage {

struct CompileOptions {
  /// sm_80, sm_86, sm_89, sm_90 or sm_90a.
  std::string arch = "sm_90a";
  /// Warps per program (1, 2, 4, 8, 16).
  int numWarps = 4;
  /// PTX ISA version times ten.
  unsigned ptxVersion = 80;
  /// false: the input is already lowered (the output of
  /// `sage-opt --sage-to-nvvm`); only translate it.
  bool runPipeline = true;
  /// When set, the IR after every pass is written to this file.
  std::string irDumpPath;
};

struct CompileResult {
  bool ok = false;
  /// Kernel description comments followed by the PTX module.
  std::string ptx;
  /// Optimised LLVM IR and the lowered MLIR (LLVM dialect).
  std::string llvmIR;
  std::string loweredMLIR;
  /// Every diagnostic, one per line, when !ok (warnings too when ok).
  std::string diagnostics;
};

/// Compiles sage IR text (a module of `sage.kernel` functions) to PTX.
CompileResult compile(const std::string &source, const CompileOptions &options);

} // namespace sage

extern "C" {
/// C entry point for FFI users: returns 0 on success. `*ptx` or `*error`
/// receives a malloc'ed string to release with sage_free.
int sage_compile(const char *source, const char *arch, int num_warps,
                 int ptx_version, char **ptx, char **error);
void sage_free(char *text);
}

#endif // SAGE_COMPILER_COMPILER_H
