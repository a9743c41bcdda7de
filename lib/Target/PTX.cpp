//===- PTX.cpp - LLVM-dialect NVVM kernels to PTX -------------------------===//

#include "sage/Target/PTX.h"

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TargetInfo.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Target/LLVMIR/LLVMTranslationInterface.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

using namespace mlir;

static constexpr llvm::StringLiteral kTriple = "nvptx64-nvidia-cuda";

namespace {
/// The sage attributes left on lowered kernels are launch facts for the
/// PTX header (describeKernels), not LLVM's: the translation drops them.
struct SageTranslationInterface : public LLVMTranslationDialectInterface {
  using LLVMTranslationDialectInterface::LLVMTranslationDialectInterface;
  LogicalResult convertParameterAttr(LLVM::LLVMFuncOp, int, NamedAttribute,
                                     LLVM::ModuleTranslation &) const override {
    return success();
  }
};
} // namespace

void mlir::sage::registerPTXTranslations(DialectRegistry &registry) {
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registry.addExtension(+[](MLIRContext *, SageDialect *dialect) {
    dialect->addInterfaces<SageTranslationInterface>();
  });
}

/// Only NVPTX is initialised: the library carries no other backend.
static void initializeNVPTX() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

static void optimize(llvm::Module &module, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

FailureOr<std::string> mlir::sage::translateToPTX(ModuleOp module,
                                                  const PTXOptions &options,
                                                  std::string *llvmIR) {
  // LLVM aborts the process on a PTX version too old for the target; refuse
  // it here with a diagnostic instead.
  std::optional<TargetInfo> info = TargetInfo::get(options.arch);
  if (!info)
    return module.emitError()
           << "unknown GPU architecture '" << options.arch << "'";
  if (options.ptxVersion < info->getMinPtxVersion())
    return module.emitError()
           << options.arch << " needs PTX ISA " << info->getMinPtxVersion() / 10
           << "." << info->getMinPtxVersion() % 10 << " or newer, got "
           << options.ptxVersion / 10 << "." << options.ptxVersion % 10;
  initializeNVPTX();
  llvm::Triple triple(kTriple);
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError() << "NVPTX target unavailable: " << error;
  std::string features = "+ptx" + std::to_string(options.ptxVersion);
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, options.arch, features, llvm::TargetOptions(), std::nullopt,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    return module.emitError()
           << "cannot create an NVPTX target for " << options.arch;

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "sage");
  if (!llvmModule)
    return module.emitError() << "translation to LLVM IR failed";
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(tm->createDataLayout());
  optimize(*llvmModule, *tm);
  if (llvmIR) {
    llvm::raw_string_ostream os(*llvmIR);
    llvmModule->print(os, nullptr);
  }

  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager codegen;
  if (tm->addPassesToEmitFile(codegen, os, nullptr,
                              llvm::CodeGenFileType::AssemblyFile))
    return module.emitError() << "NVPTX cannot emit assembly";
  codegen.run(*llvmModule);
  return describeKernels(module) + std::string(ptx.str());
}

std::string mlir::sage::describeKernels(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.walk([&](LLVM::LLVMFuncOp func) {
    if (!func->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()))
      return;
    int64_t threads = 0, shared = 0;
    if (auto maxntid = func->getAttrOfType<DenseI32ArrayAttr>(
            NVVM::NVVMDialect::getMaxntidAttrName()))
      threads = maxntid[0];
    if (auto bytes = func->getAttrOfType<IntegerAttr>(
            SageDialect::kSharedMemoryAttrName))
      shared = bytes.getInt();
    int64_t global = 0;
    if (auto bytes = func->getAttrOfType<IntegerAttr>(
            SageDialect::kGlobalScratchAttrName))
      global = bytes.getInt();
    os << "// sage.kernel name=" << func.getName() << " threads=" << threads
       << " shared_memory=" << shared << " global_scratch=" << global;
    // Programs in clusters: the launcher checks the grid against it.
    if (auto cluster = func->getAttrOfType<DenseI32ArrayAttr>(
            NVVM::NVVMDialect::getClusterDimAttrName()))
      os << " cluster=" << cluster[0];
    // A kernel that waits for the previous grid, or for counters that it
    // may raise, may be launched before that grid finishes: the launcher
    // asks for it.
    if (func->hasAttr(SageDialect::kEarlyLaunchAttrName))
      os << " early_launch=1";
    os << "\n";
    // One line per host-encoded tensor map: the parameter and the fields'
    // host expressions (lists joined by ';').
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      auto recipe = func.getArgAttrOfType<DictionaryAttr>(
          i, SageDialect::kHostTensorMapAttrName);
      if (!recipe)
        continue;
      auto list = [&](StringRef key) {
        std::string joined;
        for (Attribute a : cast<ArrayAttr>(recipe.get(key)))
          joined += (joined.empty() ? "" : ";") +
                    cast<StringAttr>(a).getValue().str();
        return joined;
      };
      os << "// sage.tensor_map kernel=" << func.getName() << " param=" << i
         << " address=" << cast<StringAttr>(recipe.get("address")).getValue()
         << " dims=" << list("dims") << " strides=" << list("strides")
         << " box=";
      llvm::interleave(cast<DenseI64ArrayAttr>(recipe.get("box")).asArrayRef(),
                       os, ",");
      os << " element_type="
         << cast<IntegerAttr>(recipe.get("element_type")).getInt()
         << " swizzle=" << cast<IntegerAttr>(recipe.get("swizzle")).getInt()
         << "\n";
    }
  });
  return text;
}
