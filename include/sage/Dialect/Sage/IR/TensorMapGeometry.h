//===- TensorMapGeometry.h - a tensor map's view as the copy engine sees it
//===//
//
// sage.make_tensor_map describes a strided view; the copy engine reads a
// map of up to five dimensions, innermost first, each with an extent, a
// byte stride and a box. This is the one rule between the two, shared by
// the device lowering (which computes the fields with arith ops) and the
// host tensor maps (whose fields the launcher computes from the kernel's
// arguments and encodes with cuTensorMapEncodeTiled).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_TENSORMAPGEOMETRY_H
#define SAGE_DIALECT_SAGE_IR_TENSORMAPGEOMETRY_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::sage {

class MakeTensorMapOp;

/// One dimension of the copy engine's view, innermost first. Its extent is
/// `bounds[bound] * boundScale`; its byte stride `strides[stride] *
/// strideScale` (dimension 0 has none: one unit, a byte or an element);
/// a box spans `box` entries of it.
struct TensorMapDim {
  unsigned bound;
  int64_t boundScale;
  std::optional<unsigned> stride;
  int64_t strideScale;
  int64_t box;
};

/// The view of a `sage.make_tensor_map` as the copy engine sees it. The
/// codes are those of PTX's `tensormap.replace` fields, which equal the CUDA
/// driver's `CUtensorMapDataType` and `CUtensorMapSwizzle` values.
struct TensorMapGeometry {
  SmallVector<TensorMapDim> dims;
  /// 0: bytes (U8); 7: f32 elements (a typed map, for bulk reductions).
  int64_t elementType;
  /// 0: none; 1, 2, 3: a 32, 64 or 128-byte swizzle.
  int64_t swizzleMode;
};

/// The map of `op`: {inner extent, outer rows, leading dimensions innermost
/// first}, a box one swizzle width wide, `box[outer]` rows and one index of
/// each leading dimension.
TensorMapGeometry getTensorMapGeometry(MakeTensorMapOp op);

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_IR_TENSORMAPGEOMETRY_H
