//===- SageAttrs.td - sage enums and attributes -------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGEATTRS_TD
#define SAGE_DIALECT_SAGE_IR_SAGEATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "sage/Dialect/Sage/IR/SageDialect.td"
include "sage/Dialect/Sage/IR/SageInterfaces.td"

def Sage_Granularity : I32EnumAttr<"Granularity",
    "which elements of a tile share one quantization scale", [
  I32EnumAttrCase<"PerBlock", 0, "per_block">,
  I32EnumAttrCase<"PerToken", 1, "per_token">,
  I32EnumAttrCase<"PerChannel", 2, "per_channel">]> {
  let cppNamespace = "::mlir::sage";
  let genSpecializedAttr = 0;
}

def Sage_RoundingMode : I32EnumAttr<"RoundingMode",
    "rounding of scaled values to the storage type", [
  I32EnumAttrCase<"RNE", 0, "rne">,
  I32EnumAttrCase<"RNA", 1, "rna">]> {
  let cppNamespace = "::mlir::sage";
  let genSpecializedAttr = 0;
}

def Sage_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Max", 1, "max">,
  I32EnumAttrCase<"Min", 2, "min">,
  I32EnumAttrCase<"AbsMax", 3, "absmax">]> {
  let cppNamespace = "::mlir::sage";
}

class Sage_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Sage_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Sage_Int8SchemeAttr : Sage_Attr<"Int8Scheme", "int8",
    [DeclareAttrInterfaceMethods<Sage_QuantSchemeAttrInterface>]> {
  let summary = "symmetric INT8 quantization: scale = absmax / 127";
  let description = [{
    Symmetric INT8 with range [-127, 127] (the value -128 is never produced),
    f32 scales and a granularity:
    - `per_block`: one scale for the whole tile (scale tile `1x1`);
    - `per_token`: one scale per row (scale tile `Mx1`);
    - `per_channel`: one scale per column (scale tile `1xN`).

    Rounding is `rne` (round half to even, the default, as `cvt.rni`) or `rna`
    (round half away from zero, as SageAttention's Triton kernels).
    `sage.quantize` documents the exact arithmetic.

    Example: `#sage.int8<per_block>`, `#sage.int8<per_token, rna>`.
  }];
  let parameters = (ins
    EnumParameter<Sage_Granularity>:$granularity,
    DefaultValuedParameter<"::mlir::sage::RoundingMode",
                           "::mlir::sage::RoundingMode::RNE">:$rounding);
  let assemblyFormat = "`<` $granularity (`,` $rounding^)? `>`";
}

def Sage_UInt8SchemeAttr : Sage_Attr<"UInt8Scheme", "uint8",
    [DeclareAttrInterfaceMethods<Sage_QuantSchemeAttrInterface>]> {
  let summary = "unsigned 8-bit quantization of non-negative values: scale = absmax / 255";
  let description = [{
    Unsigned 8-bit integers in [0, 255], stored in `i8` and read as
    unsigned (a `sage.qmatmul` with `lhs_unsigned` multiplies them on the
    tensor cores' u8 x s8 form), with f32 scales and the granularities and
    roundings of `#sage.int8`. For tiles that are never negative (a
    softmax's probabilities) it has twice the resolution of `#sage.int8`.
    Negative inputs quantize to 0.

    Example: `#sage.uint8<per_token>`.
  }];
  let parameters = (ins
    EnumParameter<Sage_Granularity>:$granularity,
    DefaultValuedParameter<"::mlir::sage::RoundingMode",
                           "::mlir::sage::RoundingMode::RNE">:$rounding);
  let assemblyFormat = "`<` $granularity (`,` $rounding^)? `>`";
}

def Sage_MmaKind : I32EnumAttr<"MmaKind", "tensor-core instruction family", [
  I32EnumAttrCase<"MmaSync", 0, "mma_sync">,
  I32EnumAttrCase<"Wgmma", 1, "wgmma">,
  I32EnumAttrCase<"WgmmaRegA", 2, "wgmma_reg_a">]> {
  let cppNamespace = "::mlir::sage";
}

#endif // SAGE_DIALECT_SAGE_IR_SAGEATTRS_TD
