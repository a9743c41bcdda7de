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
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdlib>
#include <optional>

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
std::string findPtxas() {
  if (const char *chosen = std::getenv("SAGE_PTXAS"))
    return llvm::sys::fs::can_execute(chosen) ? chosen : "";
  if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  SmallVector<std::string, 2> candidates;
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/bin/ptxas");
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  for (const std::string &path : candidates)
    if (llvm::sys::fs::can_execute(path))
      return path;
  return "";
}
} // namespace sage

/// Assembles `ptx` with ptxas -v; a missing ptxas, an error or a register
/// spill report is a diagnostic on `module`.
static LogicalResult assembleCubin(ModuleOp module, const std::string &ptx,
                                   const std::string &arch,
                                   ::sage::CompileResult &result) {
  std::string ptxas = ::sage::findPtxas();
  if (ptxas.empty())
    return module.emitError()
           << "a cubin needs ptxas (CUDA toolkit): none at $SAGE_PTXAS, on "
              "PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin";
  SmallString<128> input, output, log;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("sage", "ptx", fd, input) ||
      llvm::sys::fs::createTemporaryFile("sage", "cubin", output) ||
      llvm::sys::fs::createTemporaryFile("sage", "log", log))
    return module.emitError() << "cannot create temporary files for ptxas";
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  std::string gpu = "-arch=" + arch;
  StringRef args[] = {ptxas, gpu, "-v", input, "-o", output};
  std::optional<StringRef> redirects[] = {std::nullopt, log.str(), log.str()};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects,
                                         /*SecondsToWait=*/0, 0, &error);
  auto readFile = [](StringRef path) {
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
    return buffer ? (*buffer)->getBuffer().str() : std::string();
  };
  result.ptxasLog = readFile(log);
  if (status == 0)
    result.cubin = readFile(output);
  for (StringRef path : {input.str(), output.str(), log.str()})
    llvm::sys::fs::remove(path);
  if (status != 0)
    return module.emitError()
           << "ptxas failed" << (error.empty() ? "" : ": ") << error << "\n"
           << result.ptxasLog;
  if (StringRef(result.ptxasLog).contains("bytes spill stores") &&
      !StringRef(result.ptxasLog).contains(" 0 bytes spill stores"))
    module.emitWarning() << "ptxas reports register spills:\n"
                         << result.ptxasLog;
  return success();
}

namespace sage {
CompileResult compile(const std::string &source,
                      const CompileOptions &options) {
  CompileResult result;
  DialectRegistry registry;
  mlir::sage::registerAllSageDialects(registry);
  mlir::sage::registerPTXTranslations(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  // Errors name the location; the whole module after a failing pass is what
  // SAGE_DUMP=passes (or --dump-ir) is for.
  ctx.printOpOnDiagnostic(false);
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
    pipeline.ptxVersion = static_cast<int>(options.ptxVersion);
    mlir::sage::buildSageToNVVMPipeline(pm, pipeline);
    // The IR after each pass goes to a string, written to irDumpPath (if
    // any) after the run, failed or not.
    std::string passIR;
    llvm::raw_string_ostream passStream(passIR);
    bool dumping = !options.irDumpPath.empty() || options.capturePassIR;
    if (dumping)
      pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                          [](Pass *, Operation *) { return true; },
                          /*printModuleScope=*/true,
                          /*printAfterOnlyOnChange=*/false,
                          /*printAfterOnlyOnFailure=*/false, passStream);
    bool passed = succeeded(pm.run(*module)) && !diags.sawError;
    if (!options.irDumpPath.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream dump(options.irDumpPath, ec);
      if (ec) {
        module->emitError()
            << "cannot write " << options.irDumpPath << ": " << ec.message();
        return finish();
      }
      dump << passIR;
    }
    if (options.capturePassIR)
      result.passIR = std::move(passIR);
    if (!passed)
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
  if (options.emitCubin &&
      failed(assembleCubin(*module, result.ptx, ptxOptions.arch, result)))
    return finish();
  result.ok = true;
  return finish();
}
} // namespace sage
