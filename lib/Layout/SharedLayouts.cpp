//===- SharedLayouts.cpp - shared-memory tiles as linear layouts ----------===//

#include "sage/Layout/SharedLayouts.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir::sage::layout;
using Bases = LinearLayout::Bases;

bool mlir::sage::layout::isValidSwizzle(unsigned swizzleBytes) {
  return swizzleBytes == 0 || swizzleBytes == 32 || swizzleBytes == 64 ||
         swizzleBytes == 128;
}

unsigned mlir::sage::layout::widestSwizzle(int64_t innerBytes,
                                           int64_t outerRows) {
  if (outerRows < kAtomRows || outerRows % kAtomRows != 0)
    return 0;
  for (unsigned swizzle : {128u, 64u, 32u})
    if (innerBytes > 0 && innerBytes % swizzle == 0)
      return swizzle;
  return 0;
}

std::string mlir::sage::layout::checkSharedParams(TileShape shape,
                                                  unsigned elementBits,
                                                  unsigned swizzleBytes,
                                                  unsigned innerDim) {
  if (innerDim > 1)
    return "innerDim must be 0 or 1";
  for (int64_t extent : shape)
    if (extent <= 0 || !llvm::isPowerOf2_64(extent))
      return "tile extents must be powers of two";
  if (elementBits != 8 && elementBits != 16 && elementBits != 32 &&
      elementBits != 64)
    return "elementBits must be 8, 16, 32 or 64";
  if (!isValidSwizzle(swizzleBytes))
    return "swizzle must be 0, 32, 64 or 128 bytes";
  int64_t innerBytes = shape[innerDim] * elementBits / 8;
  if (innerBytes % kChunkBytes != 0)
    return "the inner dimension must span whole 16-byte chunks";
  if (swizzleBytes != 0 && innerBytes % swizzleBytes != 0)
    return "the inner dimension must span whole swizzle widths";
  // The swizzle XORs byte-address bits [7, 7 + log2(S/16)) into the chunk
  // bits; with 8 rows or more those address bits are all row bits.
  if (swizzleBytes != 0 && shape[1 - innerDim] < kAtomRows)
    return "a swizzled tile needs at least 8 rows";
  return "";
}

LinearLayout mlir::sage::layout::shared(TileShape shape, unsigned elementBits,
                                        unsigned swizzleBytes,
                                        unsigned innerDim) {
  std::string why =
      checkSharedParams(shape, elementBits, swizzleBytes, innerDim);
  if (!why.empty())
    llvm::report_fatal_error(llvm::Twine("shared: ") + why);
  unsigned outerDim = 1 - innerDim;
  int64_t inner = shape[innerDim], outer = shape[outerDim];
  int64_t chunkElems = kChunkBytes * 8 / elementBits;
  // The inner span stored contiguously per row: one chunk with no swizzle
  // (core matrices), the swizzle width otherwise.
  int64_t slabElems =
      swizzleBytes == 0 ? chunkElems : int64_t(swizzleBytes) * 8 / elementBits;
  unsigned swizzleBits =
      swizzleBytes == 0 ? 0 : llvm::Log2_32(swizzleBytes / kChunkBytes);
  unsigned rowBytesLog2 =
      llvm::Log2_64(swizzleBytes == 0 ? kChunkBytes : swizzleBytes);

  auto coord = [](unsigned dim, int64_t v) {
    Coord c;
    c[dim] = int32_t(v);
    return c;
  };
  Bases offset;
  // Within a slab row: elements, then (swizzled) chunks.
  for (int64_t v = 1; v < slabElems; v <<= 1)
    offset.push_back(coord(innerDim, v));
  // Rows: row bit j sits at byte-address bit j + rowBytesLog2; address bits
  // [7, 7 + swizzleBits) are XORed into the chunk bits [4, 4 + swizzleBits),
  // so such a row bit also flips a chunk of the logical column.
  for (unsigned j = 0; (int64_t(1) << j) < outer; ++j) {
    Coord c = coord(outerDim, int64_t(1) << j);
    int64_t addrBit = int64_t(j) + rowBytesLog2;
    if (swizzleBits != 0 && addrBit >= 7 && addrBit < 7 + swizzleBits)
      c[innerDim] = int32_t(chunkElems << (addrBit - 7));
    offset.push_back(c);
  }
  // Slabs (chunk columns with no swizzle) after all rows.
  for (int64_t v = slabElems; v < inner; v <<= 1)
    offset.push_back(coord(innerDim, v));
  return LinearLayout::shared(shape, std::move(offset));
}

unsigned mlir::sage::layout::getWgmmaSwizzleMode(unsigned swizzleBytes) {
  switch (swizzleBytes) {
  case 0:
    return 0;
  case 128:
    return 1;
  case 64:
    return 2;
  case 32:
    return 3;
  }
  llvm::report_fatal_error("getWgmmaSwizzleMode: invalid swizzle");
}

unsigned mlir::sage::layout::getTmaSwizzleMode(unsigned swizzleBytes) {
  switch (swizzleBytes) {
  case 0:
    return 0;
  case 32:
    return 1;
  case 64:
    return 2;
  case 128:
    return 3;
  }
  llvm::report_fatal_error("getTmaSwizzleMode: invalid swizzle");
}

WgmmaStrides mlir::sage::layout::getWgmmaKMajorStrides(TileShape shape,
                                                       unsigned elementBits,
                                                       unsigned swizzleBytes) {
  std::string why = checkSharedParams(shape, elementBits, swizzleBytes, 1);
  if (!why.empty())
    llvm::report_fatal_error(llvm::Twine("getWgmmaKMajorStrides: ") + why);
  if (swizzleBytes == 0)
    return {/*leadingByteOffset=*/shape[0] * kChunkBytes,
            /*strideByteOffset=*/kAtomRows * kChunkBytes};
  return {/*leadingByteOffset=*/kChunkBytes,
          /*strideByteOffset=*/kAtomRows * int64_t(swizzleBytes)};
}

WgmmaStrides mlir::sage::layout::getWgmmaMNMajorStrides(TileShape shape,
                                                        unsigned elementBits,
                                                        unsigned swizzleBytes) {
  std::string why = checkSharedParams(shape, elementBits, swizzleBytes, 1);
  if (why.empty() && (swizzleBytes == 0 || elementBits != 16))
    why = "an MN-major wgmma operand is a swizzled 16-bit tile";
  if (!why.empty())
    llvm::report_fatal_error(llvm::Twine("getWgmmaMNMajorStrides: ") + why);
  return {/*leadingByteOffset=*/shape[0] * int64_t(swizzleBytes),
          /*strideByteOffset=*/kAtomRows * int64_t(swizzleBytes)};
}

uint64_t mlir::sage::layout::encodeWgmmaDescriptor(uint32_t startAddress,
                                                   int64_t leadingByteOffset,
                                                   int64_t strideByteOffset,
                                                   unsigned swizzleBytes) {
  auto field = [](int64_t bytes) { return (uint64_t(bytes) >> 4) & 0x3FFF; };
  return field(startAddress) | field(leadingByteOffset) << 16 |
         field(strideByteOffset) << 32 |
         uint64_t(getWgmmaSwizzleMode(swizzleBytes)) << 62;
}
