//===- ProgramOpsToLLVM.cpp - program ids and pointers --------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

template <typename XOp, typename YOp, typename ZOp>
static Value readGridRegister(OpBuilder &b, Location loc, unsigned axis) {
  Type i32 = b.getI32Type();
  switch (axis) {
  case 0:
    return XOp::create(b, loc, i32);
  case 1:
    return YOp::create(b, loc, i32);
  default:
    return ZOp::create(b, loc, i32);
  }
}

struct ProgramIdLowering : public OpConversionPattern<ProgramIdOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ProgramIdOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    rw.replaceOp(
        op,
        readGridRegister<NVVM::BlockIdXOp, NVVM::BlockIdYOp, NVVM::BlockIdZOp>(
            rw, op.getLoc(), op.getAxis()));
    return success();
  }
};

struct NumProgramsLowering : public OpConversionPattern<NumProgramsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(NumProgramsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    rw.replaceOp(
        op,
        readGridRegister<NVVM::GridDimXOp, NVVM::GridDimYOp, NVVM::GridDimZOp>(
            rw, op.getLoc(), op.getAxis()));
    return success();
  }
};

// barrier.cluster.arrive (release) then barrier.cluster.wait (acquire),
// both .aligned: every thread of the program executes the op.
struct ClusterBarrierLowering : public OpConversionPattern<ClusterBarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ClusterBarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    NVVM::ClusterArriveOp::create(rw, loc, rw.getUnitAttr());
    NVVM::ClusterWaitOp::create(rw, loc, rw.getUnitAttr());
    rw.eraseOp(op);
    return success();
  }
};

// griddepcontrol.wait / .launch_dependents, executed by every thread.
template <typename Op, NVVM::GridDepActionKind Kind>
struct GridDependencyLowering : public OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    NVVM::GriddepcontrolOp::create(rw, op.getLoc(), Kind);
    rw.eraseOp(op);
    return success();
  }
};

/// Counters are the program's, not a thread's: thread 0 touches them, the
/// others meet it at barriers. Outside warp specialisation only, where
/// thread 0 is one of the threads that run the op. Subclasses lower the op
/// from thread 0's operands: its thread id and the counter's address.
template <typename Op> struct CounterLowering : public OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    if (sagegpu::getWarpRole(op) != sagegpu::WarpRole::All)
      return op->emitOpError() << "needs every thread of the program, not a "
                                  "warp-specialised role's";
    Location loc = op.getLoc();
    Value tid = NVVM::ThreadIdXOp::create(rw, loc, rw.getI32Type());
    Value address = LLVM::PtrToIntOp::create(rw, loc, rw.getI64Type(),
                                             adaptor.getCounter());
    lower(op, adaptor, rw, tid, address);
    return success();
  }
  virtual void lower(Op op, typename Op::Adaptor adaptor,
                     ConversionPatternRewriter &rw, Value tid,
                     Value address) const = 0;
};

// The program's writes before the op are ordered before thread 0's add by
// the barrier (CTA scope); the add, acq_rel at GPU scope, releases them with
// its own (cumulativity) and acquires what the counter's earlier adds
// released. Thread 0 hands the old value to the others through shared
// memory, where it is used.
struct CounterAddLowering : public CounterLowering<CounterAddOp> {
  using CounterLowering::CounterLowering;
  void lower(CounterAddOp op, OpAdaptor adaptor, ConversionPatternRewriter &rw,
             Value tid, Value address) const override {
    Location loc = op.getLoc();
    Type i32 = rw.getI32Type();
    barrier(rw, loc, op);
    if (op.getOld().use_empty()) {
      inlinePtx(rw, loc, Type(), {tid, address, adaptor.getValue()},
                "{ .reg .pred p; .reg .b32 old; setp.eq.u32 p, $0, 0; "
                "@p atom.acq_rel.gpu.global.add.u32 old, [$1], $2; }",
                "r,l,r");
      rw.eraseOp(op);
      return;
    }
    Value offset = LLVM::ConstantOp::create(rw, loc, i32, getScratchOffset(op));
    inlinePtx(
        rw, loc, Type(),
        {tid, address, adaptor.getValue(), sharedAddress(rw, loc, offset)},
        "{ .reg .pred p; .reg .b32 old; setp.eq.u32 p, $0, 0; "
        "@p atom.acq_rel.gpu.global.add.u32 old, [$1], $2; "
        "@p st.shared.b32 [$3], old; }",
        "r,l,r,r");
    barrier(rw, loc, op);
    rw.replaceOp(op, loadScratch(rw, loc, i32, offset));
  }
};

// Thread 0 polls with acquire loads (backing off between them), then every
// thread fences the generic proxy against the async one (TMA copies read
// what the counter released) and meets the others at the barrier, which
// extends thread 0's acquire to them.
struct CounterWaitLowering : public CounterLowering<CounterWaitOp> {
  using CounterLowering::CounterLowering;
  void lower(CounterWaitOp op, OpAdaptor adaptor, ConversionPatternRewriter &rw,
             Value tid, Value address) const override {
    Location loc = op.getLoc();
    // The braces scope the labels to this instance.
    inlinePtx(rw, loc, Type(), {tid, address, adaptor.getTarget()},
              "{\n\t.reg .pred p;\n\t.reg .b32 v;\n\t"
              "setp.ne.u32 p, $0, 0;\n\t@p bra sage_counter_done;\n\t"
              "sage_counter_poll:\n\t"
              "ld.acquire.gpu.global.b32 v, [$1];\n\t"
              "setp.lt.s32 p, v, $2;\n\t@!p bra sage_counter_done;\n\t"
              "nanosleep.u32 64;\n\tbra sage_counter_poll;\n\t"
              "sage_counter_done:\n\t}",
              "r,l,r");
    inlinePtx(rw, loc, Type(), {}, "fence.proxy.async.global;", "");
    barrier(rw, loc, op);
    rw.eraseOp(op);
  }
};

struct AddPtrLowering : public OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Type elem = op.getPtr().getType().getPointeeType();
    rw.replaceOpWithNewOp<LLVM::GEPOp>(op, adaptor.getPtr().getType(), elem,
                                       adaptor.getPtr(),
                                       ValueRange{adaptor.getOffset()});
    return success();
  }
};

} // namespace

void mlir::sage::populateProgramOpsToLLVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns
      .add<ProgramIdLowering, NumProgramsLowering, ClusterBarrierLowering,
           GridDependencyLowering<GridDependencyWaitOp,
                                  NVVM::GridDepActionKind::wait>,
           GridDependencyLowering<LaunchDependentsOp,
                                  NVVM::GridDepActionKind::launch_dependents>,
           CounterAddLowering, CounterWaitLowering, AddPtrLowering>(
          converter, patterns.getContext());
}
