//===- SageInterfaces.td - quantization scheme interface ----*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGEINTERFACES_TD
#define SAGE_DIALECT_SAGE_IR_SAGEINTERFACES_TD

include "mlir/IR/OpBase.td"

def Sage_QuantSchemeAttrInterface : AttrInterface<"QuantSchemeAttrInterface"> {
  let cppNamespace = "::mlir::sage";
  let description = [{
    A quantization scheme: how a floating-point tile becomes low-bit storage
    values plus f32 scales. `sage.quantize`, `sage.dequantize` and their
    verifiers only talk to a scheme through this interface, so a new scheme
    (FP8, INT4, microscaling, ...) is a new attribute implementing it, not an
    edit of the ops.

    A scheme splits a tile into equal *granules* (rectangular blocks of
    elements that share one scale). The scale tile has, per dimension,
    `tile_dim / granule_dim` entries.
  }];
  let methods = [
    InterfaceMethod<"The element type of the quantized values.",
      "::mlir::Type", "getStorageType", (ins "::mlir::MLIRContext *":$ctx)>,
    InterfaceMethod<[{The largest magnitude a quantized value may take; the
      scale of a granule is absmax / getQuantMax().}],
      "double", "getQuantMax">,
    InterfaceMethod<[{The smallest value a quantized value may take:
      -getQuantMax() for a symmetric scheme, 0 for an unsigned one (whose
      storage values are read as unsigned).}],
      "double", "getQuantMin">,
    InterfaceMethod<"How values are rounded to the storage type.",
      "::mlir::sage::RoundingMode", "getRoundingMode">,
    InterfaceMethod<[{The shape of one granule for a tile of `tileShape`; every
      entry divides the tile's dimension.}],
      "::llvm::SmallVector<int64_t>", "getGranuleShape",
      (ins "::llvm::ArrayRef<int64_t>":$tileShape)>,
    InterfaceMethod<[{Checks that tiles of element type `elementType` can be
      quantized with this scheme.}],
      "::llvm::LogicalResult", "verifyInputType",
      (ins "::mlir::Type":$elementType,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError)>,
  ];
  let extraSharedClassDeclaration = [{
    /// Whether the storage values are read as unsigned (getQuantMin() is 0).
    bool isUnsigned() const { return $_attr.getQuantMin() >= 0.0; }

    /// The shape of the scale tile for a tile of `tileShape`.
    ::llvm::SmallVector<int64_t> getScaleShape(::llvm::ArrayRef<int64_t> tileShape) const {
      ::llvm::SmallVector<int64_t> granule = $_attr.getGranuleShape(tileShape);
      ::llvm::SmallVector<int64_t> shape;
      for (auto [dim, g] : ::llvm::zip_equal(tileShape, granule))
        shape.push_back(dim / g);
      return shape;
    }
  }];
}

def Sage_LayoutRelationsOpInterface : OpInterface<"LayoutRelationsOpInterface"> {
  let cppNamespace = "::mlir::sage";
  let description = [{
    How the distributed layouts of an op's tiles must relate, as layout
    assignment (`sagegpu-assign-layouts`) asks it: tiles that must share one
    layout, and tiles laid out as a slice of another tile's layout (the
    `Mx1` / `1xN` statistics of a reduction or a broadcast). An op without
    this interface constrains nothing, except that elementwise ops (the
    ElementwiseMappable traits) tie all their tiles together and control flow
    ties the values it forwards. Matmuls tie their accumulator to their
    result; the pass anchors that result at the instruction's accumulator
    layout.
  }];
  let methods = [
    InterfaceMethod<"Appends pairs of tiles that must share one layout.",
      "void", "getTiedTiles",
      (ins "::llvm::SmallVectorImpl<std::pair<::mlir::Value, ::mlir::Value>> &":$tied),
      [{}], [{ return; }]>,
    InterfaceMethod<[{Appends tiles laid out as the slice, along a dimension,
      of another tile's layout.}],
      "void", "getSlicedTiles",
      (ins "::llvm::SmallVectorImpl<::mlir::sage::SliceRelation> &":$sliced),
      [{}], [{ return; }]>,
  ];
}

#endif // SAGE_DIALECT_SAGE_IR_SAGEINTERFACES_TD
