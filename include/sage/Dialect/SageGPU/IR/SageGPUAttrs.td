//===- SageGPUAttrs.td - layout encodings -------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUATTRS_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/TensorEncoding.td"
include "mlir/IR/EnumAttr.td"
include "sage/Dialect/Sage/IR/SageAttrs.td"
include "sage/Dialect/SageGPU/IR/SageGPUDialect.td"
include "sage/Dialect/SageGPU/IR/SageGPUInterfaces.td"

class SageGPU_Encoding<string name, string attrMnemonic>
    : AttrDef<SageGPU_Dialect, name,
              [DeclareAttrInterfaceMethods<SageGPU_DistributedEncodingAttrInterface>,
               DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = attrMnemonic;
  let genVerifyDecl = 1;
}

def SageGPU_BlockedEncodingAttr : SageGPU_Encoding<"BlockedEncoding", "blocked"> {
  let summary = "a regular grid of elements per thread, threads, warps";
  let description = [{
    Along each dimension `d` a thread holds `size[d]` consecutive elements, a
    warp spans `threads[d]` threads and the program `warps[d]` warps; this
    *layout tile* of `size[d] * threads[d] * warps[d]` elements repeats over
    a larger tile (the repeats are further registers). Along a dimension
    smaller than the layout tile, threads hold copies of the same elements.
    Dimension 1 is the fastest-varying: lane `l` sits at
    `(l / threads[1], l % threads[1])`, warp `w` at
    `(w / warps[1], w % warps[1])`. All entries are powers of two; `threads`
    multiply to 32.

    Example: `#sagegpu.blocked<size = [1, 4], threads = [4, 8], warps = [4, 1]>`.
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$size,
                        ArrayRefParameter<"unsigned">:$threads,
                        ArrayRefParameter<"unsigned">:$warps);
  let assemblyFormat = [{
    `<` `size` `=` `[` $size `]` `,` `threads` `=` `[` $threads `]` `,`
    `warps` `=` `[` $warps `]` `>`
  }];
}

def SageGPU_SliceEncodingAttr : SageGPU_Encoding<"SliceEncoding", "slice"> {
  let summary = "the Mx1 or 1xN statistics of a parent encoding";
  let description = [{
    A tile whose dimension `dim` has size 1, distributed like one column
    (`dim = 1`) or one row (`dim = 0`) of a tile with the `parent` encoding:
    every thread that holds row `r` of the parent holds row `r` of the slice,
    so a reduction along `dim` of a parent tile lands in the slice encoding
    with no data movement beyond the reduction itself, and broadcasting the
    slice back to the parent is a re-indexing of registers.

    With `groups = m` (a nonzero bit mask) and `extent = E`, dimension `dim`
    keeps the index bits of `m` of a parent tile that has extent `E` there:
    parent index `i` maps to `pext(i, m)` (its bits in `m`, packed), so the
    tile has extent `2^popcount(m)` there. This is where a grouped reduction
    (`sage.reduce ... groups m`) lands, and what a grouped broadcast reads:
    when the parent gives a thread all the indices of its groups, both are
    register re-indexing plus the thread's own arithmetic.

    Example: `#sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>>`,
    `#sagegpu.slice<dim = 1, parent = #sagegpu.mma<wgmma, warps = [4, 1], n = 128>, groups = 6, extent = 128>`.
  }];
  let parameters = (ins "unsigned":$dim,
                        "::mlir::sagegpu::DistributedEncodingAttrInterface":$parent,
                        DefaultValuedParameter<"unsigned", "0">:$groups,
                        DefaultValuedParameter<"unsigned", "0">:$extent);
  let assemblyFormat = [{
    `<` `dim` `=` $dim `,` `parent` `=` $parent
    (`,` `groups` `=` $groups^ `,` `extent` `=` $extent)? `>`
  }];
}

def SageGPU_MmaEncodingAttr : SageGPU_Encoding<"MmaEncoding", "mma"> {
  let summary = "a tensor-core accumulator, held in registers";
  let description = [{
    The layout in which a matmul leaves its result, so that the elementwise
    code after it (scales, softmax, quantization) reads it in place:
    - `mma_sync`: the m16n8 accumulator of `mma.sync` (per warp, c0 c1 at row
      `lane / 4`, columns `2 * (lane % 4) + {0, 1}`, c2 c3 eight rows below);
      `warps = [wm, wn]` warps tile the rows and columns, and the 16x8 tiles
      repeat over registers.
    - `wgmma`: the m64nN accumulator of `wgmma.mma_async` per warpgroup
      (`n` is the instruction's N): warp `w` of a warpgroup holds rows
      `16 w + lane / 4 (+ 8)`, columns `2 * (lane % 4) + {0, 1} (+ 8 j)`;
      `warps = [wm, 1]` with `wm` a multiple of 4 stacks warpgroups along M.
    The same map serves s32 and f32 accumulators.

    Example: `#sagegpu.mma<wgmma, warps = [8, 1], n = 64>`.
  }];
  let parameters = (ins EnumParameter<Sage_MmaKind>:$kind,
                        ArrayRefParameter<"unsigned">:$warps,
                        DefaultValuedParameter<"unsigned", "0">:$n);
  let assemblyFormat = [{
    `<` $kind `,` `warps` `=` `[` $warps `]` (`,` `n` `=` $n^)? `>`
  }];
}

def SageGPU_DotOperandEncodingAttr
    : SageGPU_Encoding<"DotOperandEncoding", "dot_op"> {
  let summary = "a tensor-core operand held in registers";
  let description = [{
    The register fragments of operand `operand` (0: A, 1: B) of the matmul
    whose accumulator is `parent`, for `bits`-bit elements (8 or 16): the
    mma.sync A and B fragments (m16n8k16 / m16n8k32), or wgmma's register A
    (m64k16 / m64k32 per warpgroup; wgmma reads B from shared memory only).

    With `sigma16` (8-bit A only) the layout is stated in the logical
    coordinates of a contraction index that the partner operand stores
    permuted inside every 16 (token t at slot 4 * ((t / 2) % 4) +
    2 * (t / 8) + t % 2, SageAttention's V permutation): then an INT8 P
    quantized in the accumulator's registers is already, thread for thread,
    the A operand of the next matmul, and `sagegpu.convert_layout` from the
    accumulator moves nothing.

    Example: `#sagegpu.dot_op<0, parent = #sagegpu.mma<wgmma, warps = [4, 1], n = 64>, bits = 8, sigma16 = true>`.
  }];
  let parameters = (ins "unsigned":$operand,
                        "::mlir::sagegpu::MmaEncodingAttr":$parent,
                        "unsigned":$bits,
                        DefaultValuedParameter<"bool", "false">:$sigma16);
  let assemblyFormat = [{
    `<` $operand `,` `parent` `=` $parent `,` `bits` `=` $bits
    (`,` `sigma16` `=` $sigma16^)? `>`
  }];
}

def SageGPU_SharedEncodingAttr : AttrDef<SageGPU_Dialect, "SharedEncoding",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "shared";
  let summary = "how a tile is laid out in shared memory";
  let description = [{
    The byte layout of a tile of `bits`-bit elements in shared memory, with
    dimension `inner` contiguous, as wgmma's matrix descriptors read it and
    TMA writes it: `swizzle = 0` is the chunk-major core-matrix layout
    (`[inner / 16 B][outer][16 B]`); `swizzle = 32, 64, 128` are slabs of that
    many bytes of the inner dimension in which row r's 16-byte chunk c sits
    at chunk `c ^ ((r / (128 / S)) % (S / 16))` (for 128: `c ^ (r % 8)`), the
    TMA swizzle modes of the same names. Its linear layout maps an element
    offset to (row, col) (sage/Layout/SharedLayouts.h).

    Example: `#sagegpu.shared<swizzle = 128, bits = 8>`.
  }];
  let parameters = (ins "unsigned":$swizzle, "unsigned":$bits,
                        DefaultValuedParameter<"unsigned", "1">:$inner);
  let assemblyFormat = [{
    `<` `swizzle` `=` $swizzle `,` `bits` `=` $bits (`,` `inner` `=` $inner^)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The element offset -> (row, col) map of a tile of `shape`.
    ::mlir::sage::layout::LinearLayout
    toLinearLayout(::llvm::ArrayRef<int64_t> shape) const;
  }];
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUATTRS_TD
