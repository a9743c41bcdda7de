//===- Compiler.cpp - sage IR text in, PTX out ----------------------------===//

#include "sage/Compiler/Compiler.h"

#include "sage/Pipelines/Pipelines.h"
#include "sage/Registration/InitAllSage.h"
#include "sage/Target/PTX.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>

using namespace mlir;

namespace {
/// Collects every diagnostic as text and remembers whether one was an error:
/// some passes emit an error and still return success.
struct DiagnosticCollector {
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": ";
          switch (diag.getSeverity()) {
          case DiagnosticSeverity::Error:
            sawError = true;
            os << "error: ";
            break;
          case DiagnosticSeverity::Warning:
            os << "warning: ";
            break;
          default:
            os << "note: ";
            break;
          }
          os << diag << "\n";
          for (Diagnostic &note : diag.getNotes())
            os << "  note: " << note << "\n";
          return success();
        }) {}
  std::string text;
  bool sawError = false;
  ScopedDiagnosticHandler handler;
};
} // namespace

namespace sage {
CompileResult compile(const std::string &source,
                      const CompileOptions &options) {
  CompileResult result;
  DialectRegistry registry;
  mlir::sage::registerAllSageDialects(registry);
  mlir::sage::registerPTXTranslations(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  DiagnosticCollector diags(ctx);
  auto finish = [&]() -> CompileResult & {
    result.diagnostics = diags.text;
    result.ok = result.ok && !diags.sawError;
    return result;
  };

  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &ctx, "sage-input");
  if (!module)
    return finish();

  if (options.runPipeline) {
    PassManager pm(&ctx);
    mlir::sage::TargetPipelineOptions pipeline;
    pipeline.arch = options.arch;
    pipeline.numWarps = options.numWarps;
    mlir::sage::buildSageToNVVMPipeline(pm, pipeline);
    std::unique_ptr<llvm::raw_fd_ostream> dump;
    if (!options.irDumpPath.empty()) {
      std::error_code ec;
      dump = std::make_unique<llvm::raw_fd_ostream>(options.irDumpPath, ec);
      if (ec) {
        module->emitError()
            << "cannot write " << options.irDumpPath << ": " << ec.message();
        return finish();
      }
      pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                          [](Pass *, Operation *) { return true; },
                          /*printModuleScope=*/true,
                          /*printAfterOnlyOnChange=*/false,
                          /*printAfterOnlyOnFailure=*/false, *dump);
    }
    if (failed(pm.run(*module)) || diags.sawError)
      return finish();
  }
  llvm::raw_string_ostream lowered(result.loweredMLIR);
  module->print(lowered);

  mlir::sage::PTXOptions ptxOptions;
  ptxOptions.arch = options.arch;
  ptxOptions.ptxVersion = options.ptxVersion;
  FailureOr<std::string> ptx =
      mlir::sage::translateToPTX(*module, ptxOptions, &result.llvmIR);
  if (failed(ptx))
    return finish();
  result.ptx = std::move(*ptx);
  result.ok = true;
  return finish();
}
} // namespace sage

static char *copyString(const std::string &s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (out)
    std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

extern "C" int sage_compile(const char *source, const char *arch, int num_warps,
                            int ptx_version, char **ptx, char **error) {
  *ptx = nullptr;
  *error = nullptr;
  if (!source || !arch) {
    *error = copyString("sage_compile: source and arch are required");
    return 1;
  }
  ::sage::CompileOptions options;
  options.arch = arch;
  options.numWarps = num_warps;
  options.ptxVersion = static_cast<unsigned>(ptx_version);
  ::sage::CompileResult result = ::sage::compile(source, options);
  if (!result.ok) {
    *error = copyString(result.diagnostics);
    return 1;
  }
  *ptx = copyString(result.ptx);
  return 0;
}

extern "C" void sage_free(char *text) { std::free(text); }
