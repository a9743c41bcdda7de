//===- PackLoopCarriedHalves.cpp - 16-bit loop values carried in pairs ----===//
//
// After the tile conversion a 16-bit tile carried by an scf.for is one
// scalar per element, and each becomes a 16-bit PTX register across the
// back edge: ptxas gives each its own 32-bit register and rebuilds the
// packed words an instruction reads (a PRMT per word), so a carried bf16
// operand costs twice its registers plus the moves. FlashAttention's P,
// carried to the next trip's P·V, is one. Consecutive 16-bit float values
// of a loop are carried as vector<2xT> instead (one 32-bit register); the
// tile conversion orders a tile's scalars by register slot, so a pair is
// the two halves of one word wherever the consumer packs slots 2k and
// 2k+1 (wgmma's register A, the packed conversions), and LLVM folds the
// unpack/pack around the loop away. Any other pairing stays correct.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace {

bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// The iter_arg indices that start a carried pair: runs of one 16-bit
/// float type, paired from their first value.
SmallVector<unsigned> pairStarts(TypeRange types) {
  SmallVector<unsigned> starts;
  for (unsigned i = 0; i + 1 < types.size(); ++i)
    if (isHalf(types[i]) && types[i + 1] == types[i]) {
      starts.push_back(i);
      ++i;
    }
  return starts;
}

Value pack(OpBuilder &b, Location loc, Value lo, Value hi) {
  Value vec =
      LLVM::PoisonOp::create(b, loc, VectorType::get({2}, lo.getType()));
  Value halves[] = {lo, hi};
  for (int32_t j = 0; j < 2; ++j)
    vec = LLVM::InsertElementOp::create(
        b, loc, vec, halves[j],
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
  return vec;
}

Value unpack(OpBuilder &b, Location loc, Value vec, int32_t j) {
  return LLVM::ExtractElementOp::create(
      b, loc, vec, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
}

/// `values` with each pair starting at a `starts` index packed.
SmallVector<Value> packAll(OpBuilder &b, Location loc, ValueRange values,
                           ArrayRef<unsigned> starts) {
  SmallVector<Value> out;
  const unsigned *next = starts.begin();
  for (unsigned i = 0; i < values.size(); ++i) {
    if (next != starts.end() && *next == i) {
      out.push_back(pack(b, loc, values[i], values[i + 1]));
      ++next;
      ++i;
      continue;
    }
    out.push_back(values[i]);
  }
  return out;
}

/// The unpacked values of `packed` (as packAll laid them out).
SmallVector<Value> unpackAll(OpBuilder &b, Location loc, ValueRange packed,
                             ArrayRef<unsigned> starts, unsigned count) {
  SmallVector<Value> out;
  const unsigned *next = starts.begin();
  unsigned p = 0;
  for (unsigned i = 0; i < count; ++i, ++p) {
    if (next != starts.end() && *next == i) {
      out.push_back(unpack(b, loc, packed[p], 0));
      out.push_back(unpack(b, loc, packed[p], 1));
      ++next;
      ++i;
      continue;
    }
    out.push_back(packed[p]);
  }
  return out;
}

void packLoop(scf::ForOp loop) {
  SmallVector<unsigned> starts = pairStarts(loop.getResultTypes());
  if (starts.empty())
    return;
  Location loc = loop.getLoc();
  unsigned count = loop.getNumResults();
  OpBuilder b(loop);
  SmallVector<Value> inits = packAll(b, loc, loop.getInitArgs(), starts);
  auto packed = scf::ForOp::create(b, loc, loop.getLowerBound(),
                                   loop.getUpperBound(), loop.getStep(), inits);
  packed->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  Block *body = packed.getBody();
  if (!body->empty())
    body->getTerminator()->erase();
  b.setInsertionPointToStart(body);
  SmallVector<Value> args =
      unpackAll(b, loc, body->getArguments().drop_front(), starts, count);
  Block *old = loop.getBody();
  old->getArgument(0).replaceAllUsesWith(packed.getInductionVar());
  for (auto [arg, value] : llvm::zip(old->getArguments().drop_front(), args))
    arg.replaceAllUsesWith(value);
  body->getOperations().splice(body->end(), old->getOperations());
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  b.setInsertionPoint(yield);
  SmallVector<Value> yielded = packAll(b, loc, yield.getOperands(), starts);
  yield->setOperands(yielded);
  b.setInsertionPointAfter(packed);
  loop.replaceAllUsesWith(
      unpackAll(b, loc, packed.getResults(), starts, count));
  loop.erase();
}

} // namespace

void mlir::sage::packLoopCarriedHalves(ModuleOp module) {
  SmallVector<scf::ForOp> loops;
  module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops)
    packLoop(loop);
}
