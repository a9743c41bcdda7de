//===- SharedLayouts.h - shared-memory tiles as linear layouts --*- C++ -*-===//
//
// The shared-memory layouts TMA writes and wgmma reads: element offset ->
// (row, col), for the canonical layouts with no swizzle and with the 32-,
// 64- and 128-byte swizzles, plus the numbers a wgmma matrix descriptor and
// a TMA tensor map need. docs/layouts.md draws them.
//
// Terms: the *inner* dimension is the contiguous one (K for a K-major
// operand), the *outer* the other; a *row* is one outer index; a *chunk* is
// 16 bytes of the inner dimension.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_LAYOUT_SHAREDLAYOUTS_H
#define SAGE_LAYOUT_SHAREDLAYOUTS_H

#include "sage/Layout/LinearLayout.h"

#include <cstdint>

namespace mlir::sage::layout {

/// Bytes of one chunk: the unit of the swizzles and of wgmma core matrices.
inline constexpr int64_t kChunkBytes = 16;
/// Rows of a wgmma core matrix and of a swizzle atom.
inline constexpr int64_t kAtomRows = 8;

/// Whether `swizzleBytes` is 0 (none), 32, 64 or 128.
bool isValidSwizzle(unsigned swizzleBytes);

/// The widest swizzle (128, 64 or 32 bytes) a tile whose rows span
/// `innerBytes` and that has `outerRows` rows can take: the widest that
/// divides `innerBytes`, with whole 8-row atoms; 0 (none) when none fits.
unsigned widestSwizzle(int64_t innerBytes, int64_t outerRows);

/// Why `shared(...)` would reject these parameters, or empty when valid.
std::string checkSharedParams(TileShape shape, unsigned elementBits,
                              unsigned swizzleBytes, unsigned innerDim);

/// The layout of a `shape` tile of `elementBits`-bit elements in shared
/// memory, with dimension `innerDim` contiguous (1: rows of the tile are
/// contiguous, K-major for an [M, K] or [N, K] operand), offsets in elements:
///
///   swizzleBytes = 0: chunk-major core matrices, [inner / 16 B][outer][16 B].
///     wgmma reads it when outer is a multiple of 8 (whole core matrices).
///   swizzleBytes = S in {32, 64, 128}: slabs of S bytes of the inner
///     dimension, [inner / S][outer][S], each slab one TMA box of the
///     matching swizzle mode; inside a slab, row r's chunk c is stored at
///     chunk c ^ ((r / (128 / S)) % (S / 16)), i.e. the byte-address bits
///     [4, 4 + log2(S/16)) XOR bits [7, 7 + log2(S/16)). For 128 B that is
///     chunk c ^ (r % 8) within 8-row x 128-byte atoms (what a
///     `sage.make_tensor_map` box lands as). Inner extent must be
///     a multiple of S bytes, outer a multiple of 8, and the buffer aligned
///     to 8 * S bytes (the swizzle reads absolute address bits).
///
/// The result is bijective. Fatal error on parameters checkSharedParams
/// rejects.
LinearLayout shared(TileShape shape, unsigned elementBits,
                    unsigned swizzleBytes, unsigned innerDim = 1);

/// The 2-bit layout type of an sm_90 wgmma matrix descriptor (bits 62-63):
/// 0 none (interleave), 1 128-byte, 2 64-byte, 3 32-byte swizzle.
unsigned getWgmmaSwizzleMode(unsigned swizzleBytes);
/// CUtensorMapSwizzle: 0 none, 1 32-byte, 2 64-byte, 3 128-byte.
unsigned getTmaSwizzleMode(unsigned swizzleBytes);

/// Byte strides a wgmma descriptor gives for a K-major operand stored by
/// `shared(shape, elementBits, swizzleBytes, /*innerDim=*/1)`.
struct WgmmaStrides {
  /// Leading dimension byte offset: between neighbouring core matrices along
  /// K (two chunks) with no swizzle = outer * 16; unused by the hardware for
  /// swizzled K-major layouts, where it is conventionally 1 (encoded).
  int64_t leadingByteOffset;
  /// Stride dimension byte offset: between neighbouring 8-row groups along
  /// M/N = 8 * 16 with no swizzle, 8 * swizzleBytes with a swizzle.
  int64_t strideByteOffset;
};
WgmmaStrides getWgmmaKMajorStrides(TileShape shape, unsigned elementBits,
                                   unsigned swizzleBytes);
/// The same for an MN-major operand (wgmma's transposed form, 16-bit only)
/// stored by `shared(shape, elementBits, swizzleBytes, /*innerDim=*/1)`
/// with its M/N dimension inner and a swizzle: the leading byte offset is
/// the stride between slabs (each `swizzleBytes` of M/N) = outer *
/// swizzleBytes, the stride byte offset that between 8-row groups along K
/// = 8 * swizzleBytes (K steps move the start address by whole groups).
WgmmaStrides getWgmmaMNMajorStrides(TileShape shape, unsigned elementBits,
                                    unsigned swizzleBytes);

/// The 64-bit sm_90 wgmma matrix descriptor: start address (shared-window
/// byte address) >> 4 in bits 0-13, leading byte offset >> 4 in 16-29,
/// stride byte offset >> 4 in 32-45, base offset 0 (bits 49-51; valid when
/// every swizzle atom is aligned to its repeat, 1024 B for 128 B swizzle)
/// and the swizzle mode in 62-63. A lowering emitting it at run time adds
/// the start address to the constant part (startAddress = 0).
uint64_t encodeWgmmaDescriptor(uint32_t startAddress, int64_t leadingByteOffset,
                               int64_t strideByteOffset, unsigned swizzleBytes);

} // namespace mlir::sage::layout

#endif // SAGE_LAYOUT_SHAREDLAYOUTS_H
