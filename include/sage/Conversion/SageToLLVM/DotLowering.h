//===- DotLowering.h - what the sagegpu.dot lowerings share -----*- C++ -*-===//
//
// sagegpu.dot has one lowering per instruction family (MmaSyncToNVVM.cpp,
// WgmmaToNVVM.cpp). Both read the accumulator's linear layout for the warp
// and register placement of each instruction, and read shared operands in
// their *operand view*: row = the non-contracted index, k = the contracted
// one, whatever the tile's orientation.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_DOTLOWERING_H
#define SAGE_CONVERSION_SAGETOLLVM_DOTLOWERING_H

#include "sage/Conversion/SageToLLVM/SharedTileAccess.h"

namespace mlir::sage {

/// A shared operand of a dot, addressed by (row, k).
struct OperandTile {
  SharedTileAccess access;
  unsigned contract;

  layout::Coord at(int32_t row, int32_t k) const {
    return contract == 1 ? layout::Coord{row, k} : layout::Coord{k, row};
  }
  int64_t byteOffset(int32_t row, int32_t k) const {
    return access.byteOffset(at(row, k));
  }
};

/// The 32 bits every accumulator register of a wgmma dot starts from, when
/// its accumulator operand is a non-zero splat constant (i32 or f32): the
/// lowering sets those registers from a 16-byte broadcast in shared memory,
/// four an instruction, instead of one move each (WgmmaToNVVM.cpp).
std::optional<uint32_t> getSplatAccumulatorBits(sagegpu::DotOp dot);

/// Sizes of one dot, checked against its instruction.
struct DotShape {
  int64_t m, n, k;
  int64_t elemBytes;
  int64_t warps;
  int64_t kBytes() const { return k * elemBytes; }
  /// K steps of one instruction (32 bytes of K each).
  int64_t steps() const { return kBytes() / 32; }
};

/// The dot's shape, or a diagnostic when its accumulator is not the
/// instruction's or the sizes do not tile it.
FailureOr<DotShape> getDotShape(sagegpu::DotOp op);

/// Where value e of a 16x8 accumulator fragment sits relative to its first:
/// row 8 * (e / 2), column e % 2 (mma.sync, and wgmma per 8 columns).
inline layout::Coord fragmentOffset(int64_t e) {
  return {int32_t(8 * (e / 2)), int32_t(e % 2)};
}

/// A register A operand (`#sagegpu.dot_op` A, wgmma's or mma.sync's): the
/// 32-bit words of its instruction fragments, from the thread's slots.
class RegisterFragments {
public:
  /// Null when `type` has no distributed layout.
  static std::optional<RegisterFragments> get(RankedTensorType type,
                                              ValueRange slots);

  /// The four A words of the 16-row block at `row` (relative to the
  /// thread's own position), K step `ks` (32 bytes): word w holds rows
  /// row + 8 (w & 1), k from the step's half w >> 1, its elements in k
  /// order. With `sigma16`, physical k takes logical column
  /// sigma16Token(k). Failure: the thread does not hold those elements.
  FailureOr<SmallVector<Value, 4>> words(OpBuilder &b, Location loc,
                                         int32_t row, int64_t ks) const;

private:
  RankedTensorType type;
  ValueRange slots;
  bool sigma16 = false;
  DenseMap<std::pair<int32_t, int32_t>, int64_t> slotOf;
};

/// The warp part of `acc`'s positions in this thread (the lane part is the
/// instruction's own fragment layout).
std::pair<Value, Value> warpOrigin(ThreadCoords &c,
                                   const layout::LinearLayout &acc);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_DOTLOWERING_H
