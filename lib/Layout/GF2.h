//===- GF2.h - row echelon form over GF(2) (private) -----------*- C++ -*-===//
//
// Every question the layout algebra asks (is this element held? by which
// index? are these bases independent?) is a linear system over GF(2) with at
// most a few dozen unknowns. A coordinate packs into a 64-bit vector (row in
// the high half, col in the low half), so XOR of coordinates is XOR of
// vectors, and an echelon basis answers each system by elimination.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_LIB_LAYOUT_GF2_H
#define SAGE_LIB_LAYOUT_GF2_H

#include "sage/Layout/LinearLayout.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir::sage::layout::detail {

inline uint64_t pack(Coord c) {
  return (uint64_t(uint32_t(c.row)) << 32) | uint64_t(uint32_t(c.col));
}

/// An echelon basis of the span of some vectors, remembering for each basis
/// vector which of the inserted vectors (a bit mask over insertion numbers)
/// XOR to it. Vectors inserted first become pivots first, so solving prefers
/// them: a solution uses only pivot vectors, never the dependent ones.
class Echelon {
public:
  /// Adds vector number `size()` (its bit in solution masks); returns whether
  /// it was independent of the vectors before it.
  bool insert(uint64_t vec) {
    uint64_t combo = uint64_t(1) << numInserted++;
    reduce(vec, combo);
    if (vec == 0)
      return false;
    rows.push_back({vec, combo});
    return true;
  }

  /// Which inserted vectors XOR to `vec`, or nullopt if it is not in the span.
  std::optional<uint64_t> solve(uint64_t vec) const {
    uint64_t combo = 0;
    reduce(vec, combo);
    if (vec != 0)
      return std::nullopt;
    return combo;
  }

  bool contains(uint64_t vec) const { return solve(vec).has_value(); }
  unsigned rank() const { return rows.size(); }
  unsigned size() const { return numInserted; }

private:
  /// Clears from `vec` the leading bit of every basis row, in insertion
  /// order. Each row's leading bit is cleared from the rows after it when
  /// they are inserted, so one pass suffices.
  void reduce(uint64_t &vec, uint64_t &combo) const {
    for (const Row &r : rows) {
      if (vec & leadingBit(r.vec)) {
        vec ^= r.vec;
        combo ^= r.combo;
      }
    }
  }
  static uint64_t leadingBit(uint64_t v) {
    return uint64_t(1) << (63 - __builtin_clzll(v));
  }

  struct Row {
    uint64_t vec;
    uint64_t combo;
  };
  llvm::SmallVector<Row, 16> rows;
  unsigned numInserted = 0;
};

} // namespace mlir::sage::layout::detail

#endif // SAGE_LIB_LAYOUT_GF2_H
