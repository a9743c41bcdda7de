//===- SageGPUOps.td - sagegpu operations -------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "sage/Dialect/SageGPU/IR/SageGPUAttrs.td"

class SageGPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<SageGPU_Dialect, mnemonic, traits>;

def SageGPU_ConvertLayoutOp : SageGPU_Op<"convert_layout", [Pure,
    SameOperandsAndResultShape, SameOperandsAndResultElementType]> {
  let summary = "redistribute a tile over the program's threads";
  let description = [{
    The same values in another encoding. The lowering classifies the change
    from the two linear layouts: a renaming of each thread's registers, warp
    shuffles when only lanes change, or a round trip through shared memory.
    `sagegpu-remove-layout-conversions` deletes the ones that propagation
    makes redundant.

    ```mlir
    %b = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
    ```
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD
