//===- MmaShapes.h - which matmul shapes each instruction takes -*- C++ -*-===//
//
// One statement of the tiling rules, asked by sage-select-mma (to choose) and
// by the lowering (to report a shape that does not fit).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_DIALECT_SAGE_IR_MMASHAPES_H
#define SAGE_DIALECT_SAGE_IR_MMASHAPES_H

#include "sage/Dialect/Sage/IR/SageDialect.h"

#include <algorithm>
#include <cstdint>

namespace mlir::sage {

/// Both wgmma forms: operands from shared-memory descriptors, or A from
/// registers.
inline bool isWgmma(MmaKind kind) {
  return kind == MmaKind::Wgmma || kind == MmaKind::WgmmaRegA;
}

/// Whether the instruction reads operand A (`lhs`) or B from a shared-memory
/// descriptor (wgmma); the other operands are read as register fragments
/// (mma.sync loads them from shared memory itself, wgmma_reg_a's A arrives
/// in registers).
inline bool readsFromDescriptor(MmaKind kind, bool lhs) {
  return kind == MmaKind::Wgmma || (kind == MmaKind::WgmmaRegA && !lhs);
}

/// K of one instruction: 32 bytes of each operand row (32 int8, 16 f16/bf16).
inline int64_t mmaK(int64_t elemBits) { return 256 / elemBits; }

/// mma.sync m16n8: warps split M first (16 rows each), then N (8 columns).
struct MmaSyncTiling {
  int64_t warpsM, warpsN;
};
inline MmaSyncTiling mmaSyncTiling(int64_t m, int64_t warps) {
  int64_t warpsM = std::min<int64_t>(warps, std::max<int64_t>(1, m / 16));
  return {warpsM, warps / warpsM};
}
inline bool fitsMmaSync(int64_t m, int64_t n, int64_t k, int64_t elemBits,
                        int64_t warps) {
  MmaSyncTiling t = mmaSyncTiling(m, warps);
  return m % (16 * t.warpsM) == 0 && n % (8 * t.warpsN) == 0 &&
         k % mmaK(elemBits) == 0;
}

/// wgmma m64nN: each warpgroup (4 warps) takes whole 64-row blocks; N is a
/// legal instruction width (int8: 8, 16, 24 or a multiple of 16 up to 256).
inline bool fitsWgmma(int64_t m, int64_t n, int64_t k, int64_t elemBits,
                      int64_t warps) {
  if (warps % 4 != 0 || m % 64 != 0 || (m / 64) % (warps / 4) != 0)
    return false;
  if (n > 256 || n % 8 != 0 || k % mmaK(elemBits) != 0)
    return false;
  return elemBits != 8 || n <= 24 || n % 16 == 0;
}

} // namespace mlir::sage

#endif // SAGE_DIALECT_SAGE_IR_MMASHAPES_H
