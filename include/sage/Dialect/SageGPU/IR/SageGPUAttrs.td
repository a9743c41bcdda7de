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

    Example: `#sagegpu.slice<dim = 1, parent = #sagegpu.mma<mma_sync, warps = [4, 1]>>`.
  }];
  let parameters = (ins "unsigned":$dim,
                        "::mlir::sagegpu::DistributedEncodingAttrInterface":$parent);
  let assemblyFormat = "`<` `dim` `=` $dim `,` `parent` `=` $parent `>`";
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

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUATTRS_TD
