//===- SageToLLVMPass.cpp - drive the tile lowering -----------------------===//

#include "sage/Conversion/SageToLLVM/CopyLeaders.h"
#include "sage/Conversion/SageToLLVM/DotLowering.h"
#include "sage/Conversion/SageToLLVM/Passes.h"
#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Dialect/Sage/IR/LeadingDims.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sage {
#define GEN_PASS_DEF_CONVERTSAGETOLLVM
#include "sage/Conversion/SageToLLVM/Passes.h.inc"
} // namespace mlir::sage

using namespace mlir;
using namespace mlir::sage;

static constexpr unsigned kSharedAddressSpace = 3;

/// Marks the functions that wait for another grid's programs (the previous
/// kernel's, sage.grid_dependency_wait, or those that raise its counters,
/// sage.counter_wait): they may start early (kEarlyLaunchAttrName, which the
/// PTX header reads; once lowered, a counter wait is inline PTX that the
/// header could not recognise).
static void markEarlyLaunches(ModuleOp module) {
  module.walk([](func::FuncOp func) {
    bool waits = func.walk([](Operation *op) {
                       return isa<GridDependencyWaitOp, CounterWaitOp>(op)
                                  ? WalkResult::interrupt()
                                  : WalkResult::advance();
                     })
                     .wasInterrupted();
    if (waits)
      func->setAttr(SageDialect::kEarlyLaunchAttrName,
                    UnitAttr::get(func.getContext()));
  });
}

/// Declares the shared array every kernel addresses when any function has
/// shared memory (placed by sagegpu-allocate-shared-memory, which recorded
/// the bytes); fails where an op that needs its placement lacks it or a dot
/// does not fit its instruction.
static LogicalResult declareSharedMemory(ModuleOp module) {
  bool any = false;
  WalkResult walk = module.walk([&](Operation *op) {
    if ((isa<func::FuncOp>(op) &&
         op->hasAttr(SageDialect::kSharedMemoryAttrName)) ||
        isa<sagegpu::LocalAllocOp>(op))
      any = true;
    // A dot that does not fit its instruction is reported once, here,
    // rather than as a failure to legalize.
    if (auto dot = dyn_cast<sagegpu::DotOp>(op);
        dot && failed(getDotShape(dot)))
      return WalkResult::interrupt();
    if (getOpScratchBytes(op) && !op->hasAttr(kScratchOffsetAttrName)) {
      op->emitOpError("needs shared scratch but has no offset (run "
                      "sagegpu-allocate-shared-memory)");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (any && !module.lookupSymbol(kScratchSymbol)) {
    OpBuilder b(module.getContext());
    b.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(
        b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
        /*isConstant=*/false, LLVM::Linkage::External, kScratchSymbol,
        Attribute(), /*alignment=*/kScratchAlignment, kSharedAddressSpace);
  }
  return success();
}

/// Kernel-argument hints describe `!sage.ptr` and integer arguments; once the
/// signature is LLVM's, an alignment becomes LLVM's own `llvm.align` (which
/// the backend may use) and the rest has served its purpose.
static void lowerArgumentHints(ModuleOp module) {
  module.walk([](func::FuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
      // Tile arguments expand to several scalars without moving their
      // attributes along, so an index may now name another argument: only
      // pointers take `llvm.align` (kernels have no tile arguments; the
      // hint has already served recordAccessFacts).
      auto align = func.getArgAttrOfType<IntegerAttr>(
          i, SageDialect::kAlignmentAttrName);
      if (align && isa<LLVM::LLVMPointerType>(func.getArgument(i).getType()))
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(), align);
      func.removeArgAttr(i, SageDialect::kAlignmentAttrName);
      func.removeArgAttr(i, SageDialect::kDivisibilityAttrName);
    }
  });
}

/// Each sagegpu.warp_specialize (its regions lowered) becomes a branch on
/// the warpgroup: threads below the consumers' count take more registers
/// and run the consumers' region, the producer warpgroup after them gives
/// registers back and runs its own. The function records its producer warps
/// (the launch's extra warps).
static void lowerWarpSpecialize(ModuleOp module) {
  SmallVector<sagegpu::WarpSpecializeOp> all;
  module.walk([&](sagegpu::WarpSpecializeOp ws) { all.push_back(ws); });
  for (sagegpu::WarpSpecializeOp ws : all) {
    OpBuilder b(ws);
    Location loc = ws.getLoc();
    Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
    Value consumers = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ult, tid,
        arith::ConstantOp::create(
            b, loc, b.getI32IntegerAttr(ws.getConsumerThreads())));
    auto branch = scf::IfOp::create(b, loc, consumers, /*withElse=*/true);
    auto move = [&](Region &from, Block *to, StringRef direction,
                    int64_t registers) {
      OpBuilder at = OpBuilder::atBlockBegin(to);
      inlinePtx(at, loc, Type(), {},
                ("setmaxnreg." + direction + ".sync.aligned.u32 " +
                 Twine(registers) + ";")
                    .str(),
                "");
      Block &source = from.front();
      source.getTerminator()->erase();
      to->getOperations().splice(to->getTerminator()->getIterator(),
                                 source.getOperations());
    };
    move(ws.getConsumers(), branch.thenBlock(), "inc",
         ws.getConsumerRegisters());
    move(ws.getProducer(), branch.elseBlock(), "dec",
         ws.getProducerRegisters());
    ws->getParentOp()->setAttr(
        SageDialect::kProducerWarpsAttrName,
        b.getI32IntegerAttr(sagegpu::WarpSpecializeOp::kProducerThreads / 32));
    ws.erase();
  }
}

namespace {
struct ConvertSageToLLVMPass
    : public sage::impl::ConvertSageToLLVMBase<ConvertSageToLLVMPass> {
  using ConvertSageToLLVMBase::ConvertSageToLLVMBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // Loads and stores address 2-D views (sagegpu-promote-operands folds
    // the leading dimensions it does not give to tensor maps; this covers
    // pipelines without it).
    foldLeadingDims(module);
    if (failed(declareSharedMemory(module)))
      return signalPassFailure();
    markEarlyLaunches(module);
    std::optional<TargetInfo> gpu = SageDialect::getTarget(module);
    recordAccessFacts(
        module,
        gpu && gpu->hasVectorReductions() &&
            ptxVersion >=
                static_cast<int>(TargetInfo::kVectorReductionMinPtxVersion));

    // Before the conversion, at each function's start: every lane is there.
    CopyLeaders leaders = CopyLeaders::materialize(module);
    TileTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    ConversionTarget target(*ctx);
    populateProgramOpsToLLVMPatterns(converter, patterns);
    populateMemoryOpsToLLVMPatterns(converter, patterns);
    populateElementwiseToLLVMPatterns(converter, patterns);
    populateReduceToLLVMPatterns(converter, patterns);
    populateConvertLayoutToLLVMPatterns(converter, patterns);
    populateTensorMapToNVVMPatterns(converter, patterns, leaders);
    populateSharedMemoryToLLVMPatterns(converter, patterns);
    populateMmaSyncToNVVMPatterns(converter, patterns);
    populateWgmmaToNVVMPatterns(converter, patterns);
    populateScalarMathToNVVMPatterns(patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);

    target.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect>();
    target.addIllegalDialect<SageDialect, sagegpu::SageGPUDialect>();
    // Its regions are lowered in place; the op itself after them.
    target.addLegalOp<sagegpu::WarpSpecializeOp, sagegpu::WarpYieldOp>();
    auto typesLegal = [&](Operation *op) { return converter.isLegal(op); };
    target.addDynamicallyLegalDialect<arith::ArithDialect>(typesLegal);
    // A math op NVPTX cannot select stays illegal: the conversion then fails
    // with a diagnostic naming it, where LLVM would abort the process.
    target.addDynamicallyLegalDialect<math::MathDialect>([&](Operation *op) {
      return isSupportedScalarMath(op) && converter.isLegal(op);
    });
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp func) {
      return converter.isSignatureLegal(func.getFunctionType()) &&
             converter.isLegal(&func.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(typesLegal);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    lowerWarpSpecialize(module);
    lowerArgumentHints(module);
    packLoopCarriedWords(module);
    RewritePatternSet peepholes(ctx);
    populateScalarPeepholePatterns(peepholes);
    if (failed(applyPatternsGreedily(module, std::move(peepholes))))
      signalPassFailure();
  }
};
} // namespace
