//===- Passes.td - sage to LLVM/NVVM conversion passes ------*- tablegen -*-===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_PASSES_TD
#define SAGE_CONVERSION_SAGETOLLVM_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertSageToLLVM : Pass<"convert-sage-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Lower tiles to per-thread LLVM/NVVM code";
  let description = [{
    Needs tiles with distributed encodings (`sagegpu-assign-layouts`) and
    matmuls with a chosen instruction (`sage-select-mma`). Every tile value
    becomes the scalars the running thread holds, as its encoding's linear
    layout says; sage ops become NVVM special registers, predicated global
    loads/stores, warp shuffles, shared-memory exchanges and tensor-core
    instructions whose results stay in the accumulator registers;
    `sagegpu.convert_layout` becomes register renaming, shuffles or a
    shared-memory round trip; arith/math ops on tiles become the same ops on
    scalars.
    `!sage.ptr` becomes `!llvm.ptr<1>`. Each kernel gets the shared-memory
    scratch size it needs as `sage.shared_memory` (bytes).
    f32 atomic adds of consecutive elements a thread holds become vector
    reductions (`red.global.add.v2/v4.f32`) on sm_90 from PTX ISA 8.1 on.
  }];
  let options = [
    Option<"ptxVersion", "ptx-version", "int",
           /*default=*/"::mlir::sage::TargetInfo::kDefaultPtxVersion",
           "PTX ISA version x10 the kernel is translated with">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

def SageGPUAllocateSharedMemory
    : Pass<"sagegpu-allocate-shared-memory", "::mlir::ModuleOp"> {
  let summary = "Place shared-memory tiles and op scratch by liveness";
  let description = [{
    Every `sagegpu.local_alloc` lives from itself to the end of its last use
    (a use inside a loop or branch keeps it live across that whole op; a
    wgmma `sagegpu.dot` uses its operands until its `sagegpu.dot_wait`); ops
    that exchange data between threads through shared memory (cross-warp
    reductions, layout conversions and transposes that need it, tensor-map
    assembly) need their scratch only while they run. When everything fits
    in `reuse-above` bytes, every buffer gets bytes of its own: sharing
    bytes only adds barriers. Otherwise buffers whose live ranges overlap
    get disjoint bytes (largest first, first fit, 128-byte aligned; a tile
    with an S-byte swizzle at multiples of 8 * S, its 8-row atom) and others
    share. The pass writes each alloc's `offset`, each op's
    `sagegpu.scratch_offset` and the kernel's total as `sage.shared_memory`
    (bytes), which the launcher requests.
  }];
  let options = [
    Option<"reuseAbove", "reuse-above", "int64_t", /*default=*/"98304",
           "Share bytes between buffers only when giving each its own would "
           "need more than this many bytes (96 KiB: two programs still fit "
           "an H100 SM's 227 KiB; the launcher opts in above 48 KiB)">,
  ];
  let dependentDialects = ["::mlir::sagegpu::SageGPUDialect"];
}

def SageGPUInsertBarriers : Pass<"sagegpu-insert-barriers", "::mlir::ModuleOp"> {
  let summary = "Insert the barriers that shared-memory accesses need";
  let description = [{
    Runs after `sagegpu-allocate-shared-memory`, on byte ranges. Walking the
    program in order (loops twice, so that the end of an iteration meets the
    start of the next; branches merged), it keeps the accesses made since
    the last barrier and inserts a `sagegpu.barrier` before an op whose
    access overlaps one of them where either writes: the threads that wrote
    must be done before others read, and readers before the bytes are
    reused. A cp.async copy writes when the `async_wait` that completes its
    commit group does, not when it is issued, so only a barrier after that
    wait orders it. A barrier after generic-proxy writes (stores, cp.async)
    to bytes that a wgmma reads through the async proxy carries
    `fence_async`. TMA
    writes complete through their mbarrier, which readers wait on, so only
    their overlap with earlier accesses counts. A wgmma `sagegpu.dot` reads
    its shared operands until the `sagegpu.dot_wait` that completes it: its
    reads count at the dot and again at that wait, so a later write is
    ordered after the wait; a write to those bytes while the dot is still in
    flight is an error (a barrier does not wait for the tensor cores). Ops
    keep the barriers inside their own lowering (between a reduction's write
    and read phases).
  }];
  let dependentDialects = ["::mlir::sagegpu::SageGPUDialect"];
}

def SageFinalizeKernels : Pass<"sage-finalize-kernels", "::mlir::ModuleOp"> {
  let summary = "Mark lowered sage kernels as NVVM kernels";
  let description = [{
    Runs after func-to-llvm: every `llvm.func` carrying `sage.kernel` becomes
    an `nvvm.kernel` with `nvvm.maxntid` set to 32 x `sage.num_warps`
    threads and `nvvm.maxnreg` set to the module's `sage.maxnreg` (else
    `nvvm.minctasm` 1: ptxas may use every register the kernel needs). The
    `sage.*` function attributes stay, for the launcher.
  }];
  let dependentDialects = ["::mlir::NVVM::NVVMDialect"];
}

#endif // SAGE_CONVERSION_SAGETOLLVM_PASSES_TD
