//===- Tma.h - copy-engine (TMA) copies into the scratch buffer -*- C++ -*-===//
//
// A matmul whose operand loads go `via tma` asks the copy engine for each
// box and waits on an mbarrier in its own scratch area. The tensor maps the
// copies read are built by sage.make_tensor_map (TensorMapToNVVM.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_CONVERSION_SAGETOLLVM_TMA_H
#define SAGE_CONVERSION_SAGETOLLVM_TMA_H

#include "mlir/IR/Builders.h"

namespace mlir::sage {

class ThreadCoords;

/// Scratch bytes sage.make_tensor_map borrows to assemble a map.
inline constexpr int64_t kTensorMapStagingBytes = 128;
/// Bytes (and alignment) of an mbarrier object.
inline constexpr int64_t kMbarrierBytes = 8;

/// One box the copy engine moves into the scratch buffer: the tile of a
/// `via tma` load, starting at element (outerStart, innerStart) of its view.
struct TmaBox {
  Value map;        // the converted tensor map (global pointer)
  Value outerStart; // i64
  Value innerStart; // i64, a multiple of 16 bytes
  int64_t elemBytes;
  int64_t dstOffset; // scratch byte offset, 128-byte aligned
  int64_t bytes;     // the whole box, out-of-bounds part included
};

/// Thread 0 sets up the mbarrier at `barrierOffset` to expect every box's
/// bytes and issues the copies. Before waiting, all threads must pass a
/// barrier so that none reads the mbarrier before it is initialised.
void issueTmaCopies(ThreadCoords &c, int64_t barrierOffset,
                    ArrayRef<TmaBox> boxes);
/// Every thread waits until the copies have landed.
void waitTmaCopies(ThreadCoords &c, int64_t barrierOffset);
/// Thread 0 invalidates the mbarrier, once no thread waits on it any more,
/// so that its bytes can serve as scratch again.
void releaseTmaBarrier(ThreadCoords &c, int64_t barrierOffset);

} // namespace mlir::sage

#endif // SAGE_CONVERSION_SAGETOLLVM_TMA_H
