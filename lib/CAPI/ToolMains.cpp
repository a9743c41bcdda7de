//===- ToolMains.cpp - sage-opt and sage-translate as library entries -----===//
//
// The mains of both command-line tools live in libsage_compiler.so: the
// executables in build/bin and the Python package's console commands call
// them, so one copy of MLIR serves every tool.
//
//===----------------------------------------------------------------------===//

#include "sage/Compiler/CApi.h"
#include "sage/Compiler/Compiler.h"
#include "sage/Registration/InitAllSage.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

extern "C" int sage_opt_main(int argc, char **argv) {
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  mlir::sage::registerAllSagePasses();
  mlir::DialectRegistry registry;
  mlir::sage::registerAllSageDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "sage optimizer driver\n", registry));
}

namespace {
enum class Emit { PTX, LLVM, MLIR, Cubin };
} // namespace

extern "C" int sage_translate_main(int argc, char **argv) {
  // Options are locals, registered for this call only: as globals they would
  // be registered whenever the library loads, next to sage-opt's (-o).
  cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input>"),
                                 cl::init("-"));
  cl::opt<std::string> outputFile("o", cl::desc("Output file"), cl::init("-"));
  cl::opt<std::string> arch(
      "arch", cl::desc("GPU architecture (default: the module's, else sm_90a)"),
      cl::init(""));
  cl::opt<int> numWarps(
      "num-warps",
      cl::desc("Warps per program (default: the module's, else 4)"),
      cl::init(0));
  cl::opt<unsigned> ptxVersion(
      "ptx-version", cl::desc("PTX ISA version x10"),
      cl::init(::mlir::sage::TargetInfo::kDefaultPtxVersion));
  cl::opt<bool> noPipeline(
      "no-pipeline",
      cl::desc("The input is already lowered (sage-opt --sage-to-nvvm output)"),
      cl::init(false));
  cl::opt<std::string> dumpIR(
      "dump-ir", cl::desc("Write the IR after each pass here"), cl::init(""));
  cl::opt<Emit> emit(
      "emit", cl::desc("What to write"), cl::init(Emit::PTX),
      cl::values(clEnumValN(Emit::PTX, "ptx", "PTX (default)"),
                 clEnumValN(Emit::LLVM, "llvm", "optimised LLVM IR"),
                 clEnumValN(Emit::MLIR, "mlir", "lowered MLIR (LLVM dialect)"),
                 clEnumValN(Emit::Cubin, "cubin",
                            "a cubin from ptxas (its -v report on stderr)")));

  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "sage IR to PTX\n");
  auto input = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (std::error_code ec = input.getError()) {
    llvm::errs() << "sage-translate: cannot read " << inputFile << ": "
                 << ec.message() << "\n";
    return 1;
  }
  sage::CompileOptions options;
  options.arch = arch;
  options.numWarps = numWarps;
  options.ptxVersion = ptxVersion;
  options.runPipeline = !noPipeline;
  options.irDumpPath = dumpIR;
  options.emitCubin = emit == Emit::Cubin;
  options.sourceName = inputFile == "-" ? "<stdin>" : inputFile.getValue();
  sage::CompileResult result =
      sage::compile((*input)->getBuffer().str(), options);
  llvm::errs() << result.diagnostics;
  if (!result.ok)
    return 1;
  std::error_code ec;
  llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "sage-translate: cannot write " << outputFile << ": "
                 << ec.message() << "\n";
    return 1;
  }
  if (emit == Emit::Cubin)
    llvm::errs() << result.ptxasLog;
  out.os() << (emit == Emit::PTX     ? result.ptx
               : emit == Emit::LLVM  ? result.llvmIR
               : emit == Emit::Cubin ? result.cubin
                                     : result.loweredMLIR);
  out.keep();
  return 0;
}
