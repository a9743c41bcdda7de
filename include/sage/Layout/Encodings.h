//===- Encodings.h - distributed encodings as linear layouts ----*- C++ -*-===//
//
// One factory per register encoding: a pure function of plain parameters
// returning the LinearLayout of a tile of a given shape. The SageGPU
// attributes call these; docs/layouts.md states each formula.
//
// Conventions shared by all factories:
//   - `register` is the element's slot among the values one thread holds.
//     How slots pack into 32-bit registers is the lowering's business:
//     consecutive slots share a register, lowest slot in the lowest bits
//     (slots 2i, 2i+1 of a 16-bit fragment are register i; slots 4i..4i+3 of
//     an 8-bit fragment are register i, byte = slot % 4).
//   - Lanes are 32 per warp. Warp w of `warpsPerCTA = {wm, wn}` sits at
//     (w / wn, w % wn): dimension 1 fastest, as `#sagegpu.blocked`.
//   - Every extent and parameter is a power of two. A factory given
//     malformed parameters stops with a fatal error: attribute verifiers
//     check the parameters first.
//   - A tile larger than an encoding's atom repeats it over new register bits
//     (column repeats first); a smaller one wraps and replicates, see
//     LinearLayout::resize.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_LAYOUT_ENCODINGS_H
#define SAGE_LAYOUT_ENCODINGS_H

#include "sage/Layout/LinearLayout.h"

namespace mlir::sage::layout {

/// Lanes per warp on NVIDIA GPUs.
inline constexpr unsigned kWarpSize = 32;
/// Warps per wgmma warpgroup.
inline constexpr unsigned kWarpsPerWarpgroup = 4;

//===----------------------------------------------------------------------===//
// Blocked and slice
//===----------------------------------------------------------------------===//

/// `#sagegpu.blocked<size, threads, warps>` on a `shape` tile, exactly: along
/// dimension d a thread holds `sizePerThread[d]` consecutive elements, lane l
/// sits at (l / threads[1], l % threads[1]) in units of sizePerThread, warp w
/// at (w / warps[1], w % warps[1]) in units of sizePerThread * threads. The
/// layout tile repeats over a larger tile and wraps over a smaller one
/// (threads hold copies). Register slots are ordered as today's
/// TileDistribution: slot = k0 * count1 + k1, where kd is the index of the
/// held element along d (within-size bits first, then repeats).
/// `order` (fastest dimension first) generalizes "dimension 1 fastest" for
/// lanes, warps and register slots; {1, 0} is `#sagegpu.blocked`.
LinearLayout blocked(TileShape shape, std::array<unsigned, 2> sizePerThread,
                     std::array<unsigned, 2> threadsPerWarp,
                     std::array<unsigned, 2> warpsPerCTA,
                     std::array<unsigned, 2> order = {1, 0});

/// The statistics layout of `parent` with dimension `dim` removed: dim = 1
/// gives an Mx1 tile (one value per row), dim = 0 a 1xN tile. Each value is
/// held by the same (lane, warp)s that hold its row (column) in the parent,
/// is replicated across the lanes and warps that spread the removed
/// dimension, and appears in only one register slot per thread (register
/// bases that become zero or dependent are dropped, order kept).
///
/// With a nonzero `groups` mask, dimension `dim` keeps the index bits of
/// `groups` instead of none: index i of the parent maps to pext(i, groups)
/// (its bits in `groups`, packed in order), so the result has extent
/// 2^popcount(groups) there. This is the layout of a grouped reduction
/// (`sage.reduce ... groups`) and of a grouped broadcast's source.
LinearLayout slice(const LinearLayout &parent, unsigned dim,
                   int32_t groups = 0);

/// Index bits of `index` selected by `mask`, packed from bit 0 up (PEXT).
int32_t extractBits(int32_t index, int32_t mask);

//===----------------------------------------------------------------------===//
// Tensor-core accumulators
//===----------------------------------------------------------------------===//

/// mma.sync m16n8 accumulator (f32 or s32, identical): in each 16x8 warp
/// tile, slot c of lane l is at row l/4 + 8*(c/2), col 2*(l%4) + c%2.
/// Warps tile the CTA as `warpsPerCTA` (16*wm x 8*wn atom); the atom repeats
/// over `shape`, N repeats in the lower register bits, so slots 4i..4i+3 are
/// one instruction's accumulator.
LinearLayout mmaV2Accumulator(TileShape shape,
                              std::array<unsigned, 2> warpsPerCTA);

/// wgmma m64nN accumulator (s32 or f32, identical): in each warpgroup, slot
/// v = v0 + 2*v1 + 4*v2 of lane l of warp w (w = warp % 4) is at
/// m = 16*w + l/4 + 8*v1, n = 2*(l%4) + v0 + 8*v2. Warpgroups stack along M
/// (64 rows each); columns beyond `instrN` repeat over the next register
/// bits (so slots [k*instrN/2, (k+1)*instrN/2) are the k-th instruction's),
/// then rows beyond 64*numWarpgroups. instrN: power of two, 8..256.
LinearLayout wgmmaAccumulator(TileShape shape, unsigned instrN,
                              unsigned numWarpgroups);

//===----------------------------------------------------------------------===//
// Tensor-core register operands
//===----------------------------------------------------------------------===//

/// The sigma16 contraction permutation: token t of every 16 is stored at
/// slot 4*((t/2)%4) + 2*(t/8) + t%2 (bits t3 t2 t1 t0 -> t2 t1 t3 t0). Applied
/// to the contraction index of both operands of a matmul it leaves the
/// product unchanged, and it makes the 8-bit A fragment equal, in logical
/// coordinates, to the accumulator layout (hopper-speed.md section 6).
int64_t sigma16Slot(int64_t token);
/// The inverse: the token stored at `slot`.
int64_t sigma16Token(int64_t slot);

/// mma.sync A operand [M, K] (row = m, col = k), 16-bit (m16n8k16) or 8-bit
/// (m16n8k32) elements; per 16 x (256/elementBits) warp tile:
///   16-bit: m = l/4 + 8*a1, k = 2*(l%4) + a0 + 8*a2  (slot a = a0+2a1+4a2)
///   8-bit:  m = l/4 + 8*a2, k = 4*(l%4) + a0 + 2*a1 + 16*a3.
/// Warps along N (warpsPerCTA[1]) hold copies. K repeats first, then M.
/// With `sigma16` (8-bit only) the layout is in logical coordinates of an
/// operand whose contraction index was stored permuted by sigma16Slot: the
/// fragment's physical k holds logical column sigma16Token(k) of its 16.
LinearLayout mmaV2OperandA(TileShape shape, unsigned elementBits,
                           std::array<unsigned, 2> warpsPerCTA,
                           bool sigma16 = false);

/// mma.sync B operand, as an [N, K] tile (row = n, col = k: sage's rhs of
/// `contract(1, 1)`; transpose() gives [K, N]); per 8 x (256/elementBits):
///   16-bit: n = l/4, k = 2*(l%4) + b0 + 8*b1
///   8-bit:  n = l/4, k = 4*(l%4) + b0 + 2*b1 + 16*b2.
/// Warps along M (warpsPerCTA[0]) hold copies. K repeats first, then N.
LinearLayout mmaV2OperandB(TileShape shape, unsigned elementBits,
                           std::array<unsigned, 2> warpsPerCTA);

/// wgmma A operand from registers, [M, K]: per warpgroup m64 x k(256/bits),
/// warp w = warp % 4 holds rows 16w..16w+15 as the mma.sync A fragment:
///   16-bit (m64k16): m = 16w + l/4 + 8*a1, k = 2*(l%4) + a0 + 8*a2
///   8-bit  (m64k32): m = 16w + l/4 + 8*a2, k = 4*(l%4) + a0 + 2*a1 + 16*a3
///                    (register a/4, byte a%4).
/// Warpgroups stack along M. K repeats first, then M. `sigma16` as above: then
/// the 8-bit layout restricted to 32 columns equals wgmmaAccumulator's, so
/// accumulator -> A is an InThread conversion.
LinearLayout wgmmaOperandA(TileShape shape, unsigned elementBits,
                           unsigned numWarpgroups, bool sigma16 = false);

/// Which tensor-core generation a dot operand feeds.
enum class MmaVersion : unsigned { MmaSync = 2, Wgmma = 3 };

/// Dispatch for a `#dot_op<opIdx, parent = #mma<version, warpsPerCTA>>`:
/// opIdx 0 is A, 1 is B (mma.sync only; wgmma reads B from shared memory).
/// For wgmma, warpsPerCTA must be {4 * numWarpgroups, 1}.
LinearLayout dotOperand(TileShape shape, MmaVersion version, unsigned opIdx,
                        unsigned elementBits,
                        std::array<unsigned, 2> warpsPerCTA,
                        bool sigma16 = false);

} // namespace mlir::sage::layout

#endif // SAGE_LAYOUT_ENCODINGS_H
