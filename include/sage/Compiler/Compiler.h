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
  /// sm_80, sm_86, sm_89, sm_90 or sm_90a; empty: the module's
  /// `sage.target`, else sm_90a.
  std::string arch;
  /// Warps per program (1, 2, 4, 8, 16); 0: the module's `sage.num_warps`,
  /// else 4.
  int numWarps = 0;
  /// PTX ISA version times ten.
  unsigned ptxVersion = 80;
  /// false: the input is already lowered (the output of
  /// `sage-opt --sage-to-nvvm`); only translate it.
  bool runPipeline = true;
  /// The name diagnostics give the source (a file name, say).
  std::string sourceName = "sage-input";
  /// When set, the IR after every pass is written to this file.
  std::string irDumpPath;
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
  /// The cubin and ptxas' report, when emitCubin was set.
  std::string cubin;
  std::string ptxasLog;
  /// Every diagnostic, one per line, when !ok (warnings too when ok).
  std::string diagnostics;
};

/// Compiles sage IR text (a module of `sage.kernel` functions) to PTX.
CompileResult compile(const std::string &source, const CompileOptions &options);

} // namespace sage

/// The C API is the only thing libsage_compiler.so exports.
#define SAGE_CAPI_EXPORT __attribute__((visibility("default")))

extern "C" {
/// C entry point for FFI users: returns 0 on success. `*ptx` or `*error`
/// receives a malloc'ed string to release with sage_free. An empty `arch`
/// or a `num_warps` of 0 keeps the module's own setting.
SAGE_CAPI_EXPORT int sage_compile(const char *source, const char *arch,
                                  int num_warps, int ptx_version, char **ptx,
                                  char **error);
SAGE_CAPI_EXPORT void sage_free(char *text);
/// The compiler's version: "<release>+<git commit>"; part of JIT cache keys.
SAGE_CAPI_EXPORT const char *sage_version(void);
}

#endif // SAGE_COMPILER_COMPILER_H
