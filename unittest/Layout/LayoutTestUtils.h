//===- LayoutTestUtils.h - brute-force helpers for layout tests -*- C++ -*-===//
//
// The tests check the algebra against enumeration: every hardware index,
// every element. Tiles in tests are small enough for that.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_UNITTEST_LAYOUT_LAYOUTTESTUTILS_H
#define SAGE_UNITTEST_LAYOUT_LAYOUTTESTUTILS_H

#include "sage/Layout/LinearLayout.h"

#include <functional>
#include <map>
#include <ostream>
#include <utility>
#include <vector>

namespace mlir::sage::layout {

// Readable gtest failure messages.
inline void PrintTo(Coord c, std::ostream *os) {
  *os << "(" << c.row << ", " << c.col << ")";
}
inline void PrintTo(HardwareIndex i, std::ostream *os) {
  *os << "{reg " << i.reg << ", lane " << i.lane << ", warp " << i.warp << "}";
}

} // namespace mlir::sage::layout

namespace mlir::sage::layout::test {

/// Calls `fn` on every (register, lane, warp) of a distributed layout.
inline void forEachIndex(const LinearLayout &layout,
                         const std::function<void(HardwareIndex)> &fn) {
  for (int32_t w = 0; w < layout.getNumWarps(); ++w)
    for (int32_t l = 0; l < layout.getNumLanes(); ++l)
      for (int32_t r = 0; r < layout.getNumRegisters(); ++r)
        fn({r, l, w});
}

using Element = std::pair<int32_t, int32_t>;

/// Every index holding each element.
inline std::map<Element, std::vector<HardwareIndex>>
holders(const LinearLayout &layout) {
  std::map<Element, std::vector<HardwareIndex>> out;
  forEachIndex(layout, [&](HardwareIndex i) {
    Coord c = layout.apply(i);
    out[{c.row, c.col}].push_back(i);
  });
  return out;
}

} // namespace mlir::sage::layout::test

#endif // SAGE_UNITTEST_LAYOUT_LAYOUTTESTUTILS_H
