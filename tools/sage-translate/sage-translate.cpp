//===- sage-translate.cpp - sage IR to PTX on the command line ------------===//

#include "sage/Compiler/Compiler.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input>"),
                                      cl::init("-"));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::init("-"));
static cl::opt<std::string>
    arch("arch",
         cl::desc("GPU architecture (default: the module's, else sm_90a)"),
         cl::init(""));
static cl::opt<int>
    numWarps("num-warps",
             cl::desc("Warps per program (default: the module's, else 4)"),
             cl::init(0));
static cl::opt<unsigned>
    ptxVersion("ptx-version", cl::desc("PTX ISA version x10"), cl::init(83));
static cl::opt<bool> noPipeline(
    "no-pipeline",
    cl::desc("The input is already lowered (sage-opt --sage-to-nvvm output)"),
    cl::init(false));
static cl::opt<std::string>
    dumpIR("dump-ir", cl::desc("Write the IR after each pass here"),
           cl::init(""));
enum class Emit { PTX, LLVM, MLIR, Cubin };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::PTX),
    cl::values(clEnumValN(Emit::PTX, "ptx", "PTX (default)"),
               clEnumValN(Emit::LLVM, "llvm", "optimised LLVM IR"),
               clEnumValN(Emit::MLIR, "mlir", "lowered MLIR (LLVM dialect)"),
               clEnumValN(Emit::Cubin, "cubin",
                          "a cubin from ptxas (its -v report on stderr)")));

int main(int argc, char **argv) {
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
