//===- Compiler.cpp - sage IR text in, PTX out ----------------------------===//

#include "sage/Compiler/Compiler.h"

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Pipelines/Pipelines.h"
#include "sage/Registration/InitAllSage.h"
#include "sage/Target/PTX.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
/// Collects every diagnostic as text and remembers whether one was an error:
/// some passes emit an error and still return success.
struct DiagnosticCollector {
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          Location loc = diag.getLocation();
          if (auto file = dyn_cast<FileLineColLoc>(loc))
            os << file.getFilename().getValue() << ":" << file.getLine() << ":"
               << file.getColumn() << ": ";
          else
            os << loc << ": ";
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
      parseSourceString<ModuleOp>(source, &ctx, options.sourceName);
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
  if (auto target = (*module)->getAttrOfType<StringAttr>(
          mlir::sage::SageDialect::kTargetAttrName))
    ptxOptions.arch = target.str(); // what the pipeline compiled for
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
