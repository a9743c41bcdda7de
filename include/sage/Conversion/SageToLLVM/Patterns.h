//===- Patterns.h - sage -> LLVM/NVVM pattern entry points ----*- C++ -*-===//
//
// One populate function per op family, each defined in its own file under
// lib/Conversion/SageToLLVM/. Tiles convert 1:N: a tile value becomes the
// scalars the running thread holds (TileDistribution says which).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_PATTERNS_H
#define SAGE_CONVERSION_SAGETOLLVM_PATTERNS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::sage {

class CopyLeaders;

/// Tiles with a distributed encoding become their per-thread elements;
/// `!sage.ptr<T>` becomes `!llvm.ptr<1>`; everything else is unchanged.
class TileTypeConverter : public TypeConverter {
public:
  explicit TileTypeConverter(MLIRContext *ctx);
};

/// program_id, num_programs, addptr.
void populateProgramOpsToLLVMPatterns(const TypeConverter &converter,
                                      RewritePatternSet &patterns);
/// load, store (plain and atomic add).
void populateMemoryOpsToLLVMPatterns(const TypeConverter &converter,
                                     RewritePatternSet &patterns);
/// What the divisibility analysis proves about each load and store,
/// recorded before the conversion (which the analysis cannot read through):
/// - `kVectorWidthAttrName`: how many elements one access may move. f32
///   atomic adds get one only with `vectorAtomics` (red.global.add.v2/v4.f32:
///   sm_90, PTX ISA 8.1).
/// - `kVectorRegisterBitAttrName`: the lowest register bit of the run that
///   steps through a vector's elements (absent: bit 0, consecutive slots).
/// - `kWholeTileDimsAttrName`: a bit mask of the view dimensions along which
///   the tile lies wholly in or wholly out of bounds (its extent divides both
///   the offset and the bound), so one check serves every element.
inline constexpr llvm::StringLiteral kVectorWidthAttrName = "sage.vector_width";
inline constexpr llvm::StringLiteral kVectorRegisterBitAttrName =
    "sage.vector_register_bit";
inline constexpr llvm::StringLiteral kWholeTileDimsAttrName =
    "sage.whole_tile_dims";
void recordAccessFacts(ModuleOp module, bool vectorAtomics);
/// Elementwise arith/math on tiles, tile constants, splat, iota, broadcast.
void populateElementwiseToLLVMPatterns(const TypeConverter &converter,
                                       RewritePatternSet &patterns);
/// reduce: in-thread, then warp shuffles, then across warps in shared memory.
void populateReduceToLLVMPatterns(const TypeConverter &converter,
                                  RewritePatternSet &patterns);
/// make_tensor_map: the tensor map built on the device; the copy engine's
/// ops, whose one-thread work runs on `leaders`' threads.
void populateTensorMapToNVVMPatterns(const TypeConverter &converter,
                                     RewritePatternSet &patterns,
                                     const CopyLeaders &leaders);
/// Shared-memory tiles: local_alloc/load/store, cp.async copies and their
/// groups, mbarriers, TMA loads, barriers, and trans (through scratch).
void populateSharedMemoryToLLVMPatterns(const TypeConverter &converter,
                                        RewritePatternSet &patterns);
/// sagegpu.dot on mma.sync: fragments from shared memory, results in the
/// accumulator's registers.
void populateMmaSyncToNVVMPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns);
/// sagegpu.dot on wgmma: shared-memory descriptors or register A.
void populateWgmmaToNVVMPatterns(const TypeConverter &converter,
                                 RewritePatternSet &patterns);
/// sagegpu.convert_layout: register renaming, warp shuffles or a round trip
/// through shared memory, as the two linear layouts allow.
void populateConvertLayoutToLLVMPatterns(const TypeConverter &converter,
                                         RewritePatternSet &patterns);
/// Scratch bytes a convert_layout needs (0 when it stays in registers).
int64_t getConvertLayoutScratchBytes(Operation *op);
/// Scalar math the NVPTX backend cannot select (log2, exp, log) as NVVM
/// intrinsics or in terms of those it can.
void populateScalarMathToNVVMPatterns(RewritePatternSet &patterns);
/// Whether a scalar `math` op may reach the NVPTX backend as it is.
bool isSupportedScalarMath(Operation *op);
/// The scalar peepholes applied after the tile conversion: the quantizer's
/// round/clamp/convert chain as a clamp plus a magic-number add.rn (no F2I),
/// and bf16 -> f32 as a 16-bit left shift of the bits.
void populateScalarPeepholePatterns(RewritePatternSet &patterns);

/// Carries consecutive 16-bit float values of every scf.for (after the
/// tile conversion) as vector<2xT> pairs and consecutive i8 values as
/// vector<4xi8>, one 32-bit register each.
void packLoopCarriedWords(ModuleOp module);

class ReduceOp;

/// Bytes of shared scratch each op needs while it runs.
int64_t getReduceScratchBytes(ReduceOp op);
int64_t getTransScratchBytes(Operation *op);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_PATTERNS_H
