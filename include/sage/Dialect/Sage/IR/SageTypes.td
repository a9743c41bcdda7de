//===- SageTypes.td - sage types ----------------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGETYPES_TD
#define SAGE_DIALECT_SAGE_IR_SAGETYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "sage/Dialect/Sage/IR/SageDialect.td"

def Sage_PtrType : TypeDef<Sage_Dialect, "Ptr"> {
  let mnemonic = "ptr";
  let summary = "pointer to global memory holding elements of one type";
  let description = [{
    A kernel argument or derived address in global memory. The pointee is the
    element type of the tiles loaded from or stored to it, e.g.
    `!sage.ptr<bf16>`. Offsets (`sage.addptr`) count elements, not bytes.
  }];
  let parameters = (ins "::mlir::Type":$pointeeType);
  let assemblyFormat = "`<` $pointeeType `>`";
  let genVerifyDecl = 1;
}

def Sage_TensorMapType : TypeDef<Sage_Dialect, "TensorMap"> {
  let mnemonic = "tensor_map";
  let summary = "a TMA tensor map (descriptor) built by the running program";
  let description = [{
    The result of `sage.make_tensor_map`: the 128-byte descriptor the copy
    engine of sm_90a reads to move a box of a global tensor into shared
    memory. It lives in global memory (the copy engine cannot read it from
    shared memory) and is only used by `sagegpu.tma_load`.
  }];
}

// Tiles: statically shaped rank-2 tensors.
class Sage_TileOf<list<Type> allowed, string desc>
    : Type<And<[TensorOf<allowed>.predicate, HasAnyRankOfPred<[2]>,
                HasStaticShapePred,
                CPred<"::llvm::all_of(::llvm::cast<::mlir::ShapedType>($_self)"
                      ".getShape(), [](int64_t d) { return d > 0; })">]>,
           "2-D static tile (no empty dimension) of " # desc,
           "::mlir::RankedTensorType">;

def Sage_AnyTile : Sage_TileOf<[AnyType], "any type">;
def Sage_FloatTile : Sage_TileOf<[F16, BF16, F32], "f16, bf16 or f32">;
def Sage_AnyFloatTile : Sage_TileOf<[AnyFloat], "floats">;
def Sage_F32Tile : Sage_TileOf<[F32], "f32">;
def Sage_I32Tile : Sage_TileOf<[I32], "i32">;
def Sage_I8Tile : Sage_TileOf<[I8], "i8">;
def Sage_Half16Tile : Sage_TileOf<[F16, BF16], "f16 or bf16">;
def Sage_MatmulInputTile : Sage_TileOf<[F16, BF16, I8], "f16, bf16 or i8">;
def Sage_MatmulAccTile : Sage_TileOf<[F32, I32], "f32 or i32">;
def Sage_QuantizedTile : Sage_TileOf<[AnyInteger, AnyFloat], "integers or floats">;
def Sage_Scalar : AnyTypeOf<[AnySignlessInteger, AnyFloat]>;

#endif // SAGE_DIALECT_SAGE_IR_SAGETYPES_TD
