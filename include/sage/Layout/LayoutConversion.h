//===- LayoutConversion.h - moving a tile between layouts -------*- C++ -*-===//
//
// How a tile held in one distributed layout (src) reaches another (dst) of
// the same shape, lane count and warp count, and what the lowering needs for
// each way:
//
//   InThread     every thread already holds, in registers, each element dst
//                asks of it; the dst register r is a fixed src register
//                (pure renaming, no instruction).
//   WarpShuffle  warps hold the same elements in both layouts but lanes
//                differ: shfl within each warp.
//   SharedMemory anything else: a round trip through shared memory.
//
// All three decisions are linear algebra on the bases; docs/layouts.md
// derives them.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_LAYOUT_LAYOUTCONVERSION_H
#define SAGE_LAYOUT_LAYOUTCONVERSION_H

#include "sage/Layout/LinearLayout.h"

#include <optional>

namespace mlir::sage::layout {

enum class ConversionKind { InThread, WarpShuffle, SharedMemory };

/// "in_thread", "warp_shuffle" or "shared_memory".
const char *getConversionKindName(ConversionKind kind);

/// The cheapest way from `src` to `dst`. Both must be distributed layouts of
/// the same shape with the same number of lanes and warps (fatal otherwise).
///
/// InThread iff the lane bases and warp bases are equal and every dst
/// register basis lies in the span of the src register bases. (If lanes or
/// warps differed anywhere, the src register would have to depend on the
/// lane or warp id: not a renaming.)
/// WarpShuffle iff the warp bases are equal and the span of dst's register
/// and lane bases lies in the span of src's register and lane bases (each
/// warp holds, somewhere in its lanes, every element dst asks of it).
ConversionKind classifyConversion(const LinearLayout &src,
                                  const LinearLayout &dst);

/// For an InThread conversion: element r is the src register holding what
/// dst register r holds, in every thread. nullopt for other kinds. The map
/// is linear in r; among several src registers holding the element (src
/// register copies) the canonical one is chosen.
std::optional<llvm::SmallVector<int32_t>>
getInThreadRegisterMap(const LinearLayout &src, const LinearLayout &dst);

/// For a WarpShuffle conversion: where dst register `r` of lane `l` reads
/// from, within the same warp. Both maps are linear over GF(2):
///
///   srcLane(r, l) = srcLaneOfRegister[r] ^ (XOR of laneBitToSrcLane[i]
///                   over the set bits i of l)
///   srcRegister(r, l) = srcRegisterOfRegister[r] ^ (XOR of
///                       laneBitToSrcRegister[i] over the set bits i of l)
///
/// When `laneBitToSrcRegister` is all zero (getRegisterSelectMask() == 0),
/// one `shfl.idx` per dst register suffices: every lane sends src register
/// srcRegisterOfRegister[r] and reads from lane srcLane(r, l). Otherwise the
/// register a sender must send depends on the *reader's* lane bits in the
/// mask: a lowering does one shuffle per value of those bits (each lane
/// sends srcRegister for that value, every reader keeps the round matching
/// its own bits), 2^popcount(mask) shuffles per dst register, or a smarter
/// byte permute such as FA3's. The 8-bit wgmma A from an accumulator without
/// the sigma16 permutation is such a case (mask = lane bit 1).
struct WarpShufflePlan {
  llvm::SmallVector<int32_t> srcLaneOfRegister;
  llvm::SmallVector<int32_t> srcRegisterOfRegister;
  llvm::SmallVector<int32_t> laneBitToSrcLane;
  llvm::SmallVector<int32_t> laneBitToSrcRegister;

  int32_t getSrcLane(int32_t dstReg, int32_t dstLane) const;
  int32_t getSrcRegister(int32_t dstReg, int32_t dstLane) const;
  /// The dst lane bits the src register depends on (see above).
  int32_t getRegisterSelectMask() const;
};

/// The plan for a WarpShuffle conversion; nullopt for other kinds. Among
/// several src (register, lane) holding an element, the canonical one is
/// chosen (register bits before lane bits, free bits zero).
std::optional<WarpShufflePlan> getWarpShufflePlan(const LinearLayout &src,
                                                  const LinearLayout &dst);

/// A linear map between hardware indices: the image of each register, lane
/// and warp bit.
struct HardwareIndexMap {
  llvm::SmallVector<HardwareIndex> regBases, laneBases, warpBases;

  HardwareIndex apply(HardwareIndex index) const;
};

/// The general composition src^-1 o dst: for each dst index, a src index
/// holding the same element (src's canonical owner, see
/// LinearLayout::getCanonicalOwner). nullopt when dst holds an element src
/// does not. Unlike the two plans above it may move data across warps; it is
/// what a lowering through shared memory or a generic fallback needs.
std::optional<HardwareIndexMap> composeInverse(const LinearLayout &src,
                                               const LinearLayout &dst);

} // namespace mlir::sage::layout

#endif // SAGE_LAYOUT_LAYOUTCONVERSION_H
