//===- SageDialect.td - the sage dialect definition ---------*- tablegen -*-===//
//
// The sage dialect: tile-level ops for low-bit (SageBwd) attention kernels.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGEDIALECT_TD
#define SAGE_DIALECT_SAGE_IR_SAGEDIALECT_TD

include "mlir/IR/OpBase.td"

def Sage_Dialect : Dialect {
  let name = "sage";
  let cppNamespace = "::mlir::sage";
  let summary = "Tile-level ops for trainable low-bit attention kernels";
  let description = [{
    A `sage` kernel is a `func.func` marked `sage.kernel` that describes one
    program instance (one CTA), in the style of Triton. Values are *tiles*:
    statically shaped, rank-2 `tensor`s held by the program. Elementwise math
    on tiles uses upstream `arith` and `math`; loops use `scf`.

    The dialect adds what attention kernels need and upstream lacks: block
    loads and stores with bounds (masking of sequence tails), reductions and
    broadcasts that keep the rank, program ids, and the SageBwd building
    blocks: `sage.smooth`, `sage.quantize` / `sage.dequantize` parameterised
    by a quantization scheme attribute, the quantized matmul `sage.qmatmul`
    (i8 x i8 -> i32 scaled to f32), the 16-bit matmul `sage.matmul` and the
    online-softmax step `sage.softmax_update`.

    Row statistics (running max, running sum, per-row scales) are `Mx1` tiles
    and per-column ones `1xN`, so every value keeps rank 2 and broadcasting
    is always explicit (`sage.broadcast`).

    Discardable attributes understood by the dialect:
    - `sage.kernel` (unit, on `func.func`): the function is a kernel entry;
      it must return nothing.
    - `sage.target` (string, on `builtin.module`): the GPU architecture,
      one of `sm_80`, `sm_86`, `sm_89`, `sm_90`, `sm_90a`.
    - `sage.num_warps` (integer, on `builtin.module`): warps per program, a
      power of two from 1 to 16.
    - `sage.num_stages` (integer, on `scf.for`): how many iterations' copies
      the loop keeps in flight (1: none ahead); `sagegpu-pipeline` issues
      its TMA copies that many iterations minus one ahead.
    - `sage.maxnreg` (integer, on `builtin.module`): at most this many
      registers per thread (24 to 255, PTX `.maxnreg`), so that more
      programs fit on an SM; ptxas spills what does not fit. Without it
      ptxas takes the registers the kernel needs (one program per SM as the
      floor).
    - `sage.shared_memory` (integer, on a function): bytes of dynamic shared
      memory the kernel needs at launch; set by the lowering.
    - `sage.global_scratch` (integer, on a function): bytes of global memory
      each program needs, a multiple of 128 (one TMA tensor map each); set by
      `sagegpu-promote-operands`, which also appends the `!sage.ptr<i8>` argument
      that points at it. The launcher allocates programs × bytes and passes
      the address as that argument, the last but the host tensor maps.
    - `sage.tensor_maps` (string, on `builtin.module`): where the kernels'
      TMA tensor maps are built: `"host"` (the default) or `"device"`
      (`sagegpu-host-tensor-maps`).
    - `sage.host_tensor_map` (dictionary, on a `!sage.tensor_map` kernel
      argument, after every other argument): a tensor map the launcher
      encodes from the kernel's arguments (`sagegpu-host-tensor-maps`
      describes the fields).
    - `sage.alignment` (integer, on a `!sage.ptr` kernel argument): a promise
      that the address is a multiple of this many bytes (a power of two).
    - `sage.divisibility` (integer, on an integer kernel argument): a promise
      that the value is a multiple of this power of two.
      The JIT's specialisation sets both (as Triton's does); `sagegpu-promote-operands`
      relies on them to prove 16-byte alignment for asynchronous copies.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let extraClassDeclaration = [{
    // Defined next to the storage classes they need (SageTypes/SageAttrs.cpp).
    void registerTypes();
    void registerAttributes();

    static constexpr ::llvm::StringLiteral kKernelAttrName = "sage.kernel";
    static constexpr ::llvm::StringLiteral kTargetAttrName = "sage.target";
    static constexpr ::llvm::StringLiteral kNumWarpsAttrName = "sage.num_warps";
    static constexpr ::llvm::StringLiteral kMaxnregAttrName = "sage.maxnreg";
    /// On a module: its kernels' programs are launched in thread-block
    /// clusters of this many along grid axis 0 (PTX .reqnctapercluster).
    static constexpr ::llvm::StringLiteral kNumCtasAttrName = "sage.num_ctas";
    /// The largest portable cluster (a larger one needs an opt-in per
    /// kernel and may not fit every GPU's partitions).
    static constexpr int64_t kMaxNumCtas = 8;
    static constexpr ::llvm::StringLiteral kNumStagesAttrName =
        "sage.num_stages";
    /// On an scf.for: split the kernel into a producer warpgroup that
    /// issues the loop's copies and consumer warpgroups that run the rest.
    static constexpr ::llvm::StringLiteral kWarpSpecializeAttrName =
        "sage.warp_specialize";
    /// On an scf.for marked sage.warp_specialize: the consumer warpgroups
    /// take turns issuing its matmuls (named barriers).
    static constexpr ::llvm::StringLiteral kPingPongAttrName =
        "sage.ping_pong";
    /// On a lowered kernel: the warps of its producer warpgroup, launched
    /// after its sage.num_warps consumer warps.
    static constexpr ::llvm::StringLiteral kProducerWarpsAttrName =
        "sage.producer_warps";
    /// On a lowered kernel: it may start while the previous kernel of its
    /// stream runs (it has sage.grid_dependency_wait or sage.counter_wait):
    /// the PTX header asks the launcher for programmatic dependent launch.
    static constexpr ::llvm::StringLiteral kEarlyLaunchAttrName =
        "sage.early_launch";
    /// The range of sage.maxnreg (ptxas raises smaller caps to 24 and
    /// ignores larger ones).
    static constexpr int64_t kMinMaxnreg = 24, kMaxMaxnreg = 255;
    static constexpr ::llvm::StringLiteral kSharedMemoryAttrName =
        "sage.shared_memory";
    static constexpr ::llvm::StringLiteral kGlobalScratchAttrName =
        "sage.global_scratch";
    static constexpr ::llvm::StringLiteral kDivisibilityAttrName =
        "sage.divisibility";
    static constexpr ::llvm::StringLiteral kAlignmentAttrName =
        "sage.alignment";
    /// On a kernel argument of type !sage.tensor_map: a TMA tensor map the
    /// launcher encodes on the host from the kernel's other arguments (a
    /// dictionary: `address`, `dims` and `strides` as host expressions,
    /// `box`, `element_type`, `swizzle`; see sagegpu-host-tensor-maps).
    static constexpr ::llvm::StringLiteral kHostTensorMapAttrName =
        "sage.host_tensor_map";
    /// On a module: where its kernels' tensor maps are built, "host" (the
    /// default: every map whose view the kernel's arguments determine) or
    /// "device" (every map, by each program).
    static constexpr ::llvm::StringLiteral kTensorMapsAttrName =
        "sage.tensor_maps";

    /// Warps per program of `module` (sage.num_warps), 4 when unset.
    static unsigned getNumWarps(::mlir::ModuleOp module);
    /// The register cap of `module`'s kernels (sage.maxnreg), if any.
    static std::optional<unsigned> getMaxnreg(::mlir::ModuleOp module);
    /// Programs per thread-block cluster of `module`'s kernels
    /// (sage.num_ctas), 1 when unset.
    static unsigned getNumCtas(::mlir::ModuleOp module);
    /// The target `module` is compiled for (sage.target), or nullopt when it
    /// has none (or an unknown one, which the verifier rejects).
    static std::optional<::mlir::sage::TargetInfo>
    getTarget(::mlir::ModuleOp module);
  }];
}

#endif // SAGE_DIALECT_SAGE_IR_SAGEDIALECT_TD
