//===- PackLoopCarriedWords.cpp - narrow loop values carried in words -----===//
//
// After the tile conversion a 16-bit or 8-bit tile carried by an scf.for is
// one scalar per element, and each becomes its own PTX register across the
// back edge: ptxas gives each a 32-bit register and rebuilds the packed
// words an instruction reads (a PRMT per word, and for bytes a mask per
// element), so a carried operand costs two or four times its registers plus
// the moves. FlashAttention's bf16 P and SageBwd's INT8 P^, carried to the
// next trip's P·V, are such operands. Consecutive 16-bit float values of a
// loop are carried as vector<2xT>, consecutive i8 values as vector<4xi8>
// (one 32-bit register each); the tile conversion orders a tile's scalars
// by register slot, so a group is the parts of one word wherever the
// consumer packs slots 2k, 2k+1 (4k .. 4k+3 for bytes: wgmma's register A,
// the packed conversions), and LLVM folds the unpack/pack around the loop
// away. Any other grouping stays correct.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace {

/// How many values of `type` one 32-bit word carries: 2 for a 16-bit
/// float, 4 for an i8, else 1 (carried as it is).
unsigned perWord(Type type) {
  if (type.isF16() || type.isBF16())
    return 2;
  return type.isInteger(8) ? 4 : 1;
}

/// A carried word: the iter_arg index of its first value and how many
/// values it holds.
struct Group {
  unsigned start, size;
};

/// The carried words: runs of one packable type, grouped from their first
/// value.
SmallVector<Group> wordGroups(TypeRange types) {
  SmallVector<Group> groups;
  for (unsigned i = 0; i < types.size(); ++i) {
    unsigned size = perWord(types[i]);
    if (size == 1 || i + size > types.size() ||
        !llvm::all_of(types.slice(i, size),
                      [&](Type type) { return type == types[i]; }))
      continue;
    groups.push_back({i, size});
    i += size - 1;
  }
  return groups;
}

Value pack(OpBuilder &b, Location loc, ValueRange parts) {
  Value vec = LLVM::PoisonOp::create(
      b, loc, VectorType::get({int64_t(parts.size())}, parts[0].getType()));
  for (auto [j, part] : llvm::enumerate(parts))
    vec = LLVM::InsertElementOp::create(
        b, loc, vec, part,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
  return vec;
}

Value unpack(OpBuilder &b, Location loc, Value vec, int32_t j) {
  return LLVM::ExtractElementOp::create(
      b, loc, vec, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
}

/// `values` with each group packed into a word.
SmallVector<Value> packAll(OpBuilder &b, Location loc, ValueRange values,
                           ArrayRef<Group> groups) {
  SmallVector<Value> out;
  const Group *next = groups.begin();
  for (unsigned i = 0; i < values.size(); ++i) {
    if (next != groups.end() && next->start == i) {
      out.push_back(pack(b, loc, values.slice(i, next->size)));
      i += next->size - 1;
      ++next;
      continue;
    }
    out.push_back(values[i]);
  }
  return out;
}

/// The unpacked values of `packed` (as packAll laid them out).
SmallVector<Value> unpackAll(OpBuilder &b, Location loc, ValueRange packed,
                             ArrayRef<Group> groups, unsigned count) {
  SmallVector<Value> out;
  const Group *next = groups.begin();
  unsigned p = 0;
  for (unsigned i = 0; i < count; ++i, ++p) {
    if (next != groups.end() && next->start == i) {
      for (unsigned j = 0; j < next->size; ++j)
        out.push_back(unpack(b, loc, packed[p], j));
      i += next->size - 1;
      ++next;
      continue;
    }
    out.push_back(packed[p]);
  }
  return out;
}

void packLoop(scf::ForOp loop) {
  SmallVector<Group> groups = wordGroups(loop.getResultTypes());
  if (groups.empty())
    return;
  Location loc = loop.getLoc();
  unsigned count = loop.getNumResults();
  OpBuilder b(loop);
  SmallVector<Value> inits = packAll(b, loc, loop.getInitArgs(), groups);
  auto packed = scf::ForOp::create(b, loc, loop.getLowerBound(),
                                   loop.getUpperBound(), loop.getStep(), inits);
  packed->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  Block *body = packed.getBody();
  if (!body->empty())
    body->getTerminator()->erase();
  b.setInsertionPointToStart(body);
  SmallVector<Value> args =
      unpackAll(b, loc, body->getArguments().drop_front(), groups, count);
  Block *old = loop.getBody();
  old->getArgument(0).replaceAllUsesWith(packed.getInductionVar());
  for (auto [arg, value] : llvm::zip(old->getArguments().drop_front(), args))
    arg.replaceAllUsesWith(value);
  body->getOperations().splice(body->end(), old->getOperations());
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  b.setInsertionPoint(yield);
  SmallVector<Value> yielded = packAll(b, loc, yield.getOperands(), groups);
  yield->setOperands(yielded);
  b.setInsertionPointAfter(packed);
  loop.replaceAllUsesWith(
      unpackAll(b, loc, packed.getResults(), groups, count));
  loop.erase();
}

} // namespace

void mlir::sage::packLoopCarriedWords(ModuleOp module) {
  SmallVector<scf::ForOp> loops;
  module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops)
    packLoop(loop);
}
