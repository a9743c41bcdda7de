//===- SageGPUInterfaces.td - layout encoding interface -----*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUINTERFACES_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUINTERFACES_TD

include "mlir/IR/OpBase.td"

def SageGPU_DistributedEncodingAttrInterface
    : AttrInterface<"DistributedEncodingAttrInterface"> {
  let cppNamespace = "::mlir::sagegpu";
  let description = [{
    An encoding that spreads a tile's elements over the registers, lanes and
    warps of a program. Its one source of truth is `toLinearLayout`: every
    question a pass or a lowering asks (which thread holds element (r, c),
    which copies are replicas, how two encodings convert) is answered from
    the linear layout, never from the attribute's parameters.
  }];
  let methods = [
    InterfaceMethod<[{The (register, lane, warp) -> (row, col) map of a tile
      of `shape` (two powers of two) with this encoding.}],
      "::mlir::sage::layout::LinearLayout", "toLinearLayout",
      (ins "::llvm::ArrayRef<int64_t>":$shape)>,
    InterfaceMethod<"Warps of the program this encoding spans.",
      "unsigned", "getNumWarps">,
  ];
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUINTERFACES_TD
