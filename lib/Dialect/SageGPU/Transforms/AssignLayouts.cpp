//===- AssignLayouts.cpp - infer every tile's distributed encoding --------===//
//
// Layout inference over groups of tied tiles (union-find), anchored at the
// matmul accumulators; slice relations give the statistics their parents'
// slices; converts are inserted only where constraints meet and disagree.
// Passes.td states the rules.
//
//===----------------------------------------------------------------------===//

#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Dialect/SageGPU/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/EquivalenceClasses.h"

namespace mlir::sagegpu {
#define GEN_PASS_DEF_SAGEGPUASSIGNLAYOUTS
#include "sage/Dialect/SageGPU/Transforms/Passes.h.inc"
} // namespace mlir::sagegpu

using namespace mlir;
using namespace mlir::sagegpu;

namespace {

bool isTile(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 2;
}

RankedTensorType withEncoding(Type type, Attribute encoding) {
  auto tile = cast<RankedTensorType>(type);
  return RankedTensorType::get(tile.getShape(), tile.getElementType(),
                               encoding);
}

/// Whether two encodings distribute a tile of `shape` identically.
bool sameLayout(Attribute a, Attribute b, ArrayRef<int64_t> shape) {
  if (a == b)
    return true;
  auto la = cast<DistributedEncodingAttrInterface>(a).toLinearLayout(shape);
  auto lb = cast<DistributedEncodingAttrInterface>(b).toLinearLayout(shape);
  return la == lb;
}

/// Whether `store` writes its tile through a transposed view (unit stride
/// along rows, not along columns): plain stores only.
bool isTransposedStore(sage::StoreOp store) {
  APInt stride;
  ValueRange strides = store.getStrides().take_back(2);
  return !store.getAtomicAdd() &&
         matchPattern(strides[0], m_ConstantInt(&stride)) && stride == 1 &&
         !(matchPattern(strides[1], m_ConstantInt(&stride)) && stride == 1);
}

/// The encoding that lets a tile stored by the transposed `store` be loaded
/// and stored without a conversion (null when there is none).
Attribute transposingEncoding(sage::StoreOp store, unsigned numWarps) {
  auto type = cast<RankedTensorType>(store.getValue().getType());
  return getTransposingBlockedEncoding(
      store.getContext(), numWarps, type.getShape(),
      std::max<int64_t>(1, type.getElementTypeBitWidth() / 8));
}

/// The encoding `rel.slice` takes from `parent`, the encoding of
/// `rel.parent`: its slice, or grouped slice, along `rel.dim`.
Attribute sliceEncoding(const sage::SliceRelation &rel, Attribute parent) {
  auto parentType = cast<RankedTensorType>(rel.parent.getType());
  unsigned extent = rel.groups ? parentType.getDimSize(rel.dim) : 0;
  return SliceEncodingAttr::get(parent.getContext(), rel.dim,
                                cast<DistributedEncodingAttrInterface>(parent),
                                rel.groups, extent);
}

/// The state of one run: groups, slice relations, chosen encodings.
class LayoutInference {
public:
  void collect(ModuleOp module);
  void resolve(ModuleOp module);
  void rewrite(ModuleOp module);

private:
  /// Groups of tiles that must share one encoding.
  llvm::EquivalenceClasses<Value> groups;
  SmallVector<sage::SliceRelation> slices;
  /// Encoding of each group, keyed by its leader.
  DenseMap<Value, Attribute> encodingOf;

  void tie(Value a, Value b) {
    if (isTile(a) && isTile(b))
      groups.unionSets(a, b);
  }
  Value leader(Value v) { return groups.getLeaderValue(v); }
  Attribute encoding(Value v) { return encodingOf.lookup(leader(v)); }
};

void LayoutInference::collect(ModuleOp module) {
  module.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (isTile(v))
        groups.insert(v);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (isTile(arg))
            groups.insert(arg);

    if (auto rel = dyn_cast<sage::LayoutRelationsOpInterface>(op)) {
      SmallVector<std::pair<Value, Value>> tied;
      rel.getTiedTiles(tied);
      for (auto [a, b] : tied)
        tie(a, b);
      rel.getSlicedTiles(slices);
    } else if (OpTrait::hasElementwiseMappableTraits(op)) {
      Value first;
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
        if (!isTile(v))
          continue;
        if (first)
          tie(first, v);
        else
          first = v;
      }
    }
    if (auto loop = dyn_cast<LoopLikeOpInterface>(op)) {
      auto results = loop.getLoopResults();
      for (auto [i, init] : llvm::enumerate(loop.getInits())) {
        tie(init, loop.getRegionIterArgs()[i]);
        tie(init, loop.getYieldedValues()[i]);
        if (results)
          tie(init, (*results)[i]);
      }
    }
    if (auto branch = dyn_cast<scf::IfOp>(op))
      for (auto [i, result] : llvm::enumerate(branch.getResults())) {
        tie(result, branch.thenYield().getOperand(i));
        if (!branch.getElseRegion().empty())
          tie(result, branch.elseYield().getOperand(i));
      }
  });
}

void LayoutInference::resolve(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  unsigned numWarps = sage::SageDialect::getNumWarps(module);
  // 1. Anchors: the first matmul of a group decides its accumulator layout;
  //    later ones with another accumulator convert (see rewrite).
  module.walk([&](Operation *op) {
    if (!isa<sage::QMatmulOp, sage::MatmulOp>(op))
      return;
    auto kind = op->getAttrOfType<sage::MmaKindAttr>("mma");
    if (!kind)
      return;
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value head = leader(op->getResult(0));
    if (!encodingOf.count(head))
      encodingOf[head] =
          getAccumulatorEncoding(ctx, kind.getValue(), type.getDimSize(0),
                                 type.getDimSize(1), numWarps);
  });
  // 2. Slices follow their parents.
  Attribute blocked = getDefaultBlockedEncoding(ctx, numWarps);
  auto propagate = [&] {
    bool changed = false;
    for (const sage::SliceRelation &rel : slices) {
      Attribute parent = encoding(rel.parent);
      if (!parent || encoding(rel.slice))
        continue;
      encodingOf[leader(rel.slice)] = sliceEncoding(rel, parent);
      changed = true;
    }
    return changed;
  };
  while (propagate()) {
  }
  // 3. A group no matmul reaches that is stored through a transposed view
  //    holds a few rows and columns a thread: loaded along its rows and
  //    stored along its columns, both as vectors, with no conversion.
  module.walk([&](sage::StoreOp store) {
    Value value = store.getValue();
    if (!isTile(value) || encoding(value) || !isTransposedStore(store))
      return;
    if (Attribute want = transposingEncoding(store, numWarps)) {
      encodingOf[leader(value)] = want;
      while (propagate()) {
      }
    }
  });
  // 4. The rest is blocked, parents first so that their statistics slice
  //    them.
  for (const sage::SliceRelation &rel : slices)
    if (!encoding(rel.parent)) {
      encodingOf[leader(rel.parent)] = blocked;
      while (propagate()) {
      }
    }
  for (const auto *member : groups)
    if (member->isLeader() && !encodingOf.count(member->getData()))
      encodingOf[member->getData()] = blocked;
}

void LayoutInference::rewrite(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  unsigned numWarps = sage::SageDialect::getNumWarps(module);
  // Types first, everywhere; then the converts where constraints disagree.
  module.walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (isTile(arg))
            arg.setType(withEncoding(arg.getType(), encoding(arg)));
    for (OpResult result : op->getResults())
      if (isTile(result))
        result.setType(withEncoding(result.getType(), encoding(result)));
    if (auto cst = dyn_cast<arith::ConstantOp>(op))
      if (auto dense = dyn_cast<DenseElementsAttr>(cst.getValue()))
        cst.setValueAttr(dense.reshape(cast<ShapedType>(cst.getType())));
  });
  module.walk([&](func::FuncOp func) {
    if (func.isExternal())
      return;
    func.setFunctionType(FunctionType::get(
        ctx, func.getBody().getArgumentTypes(),
        func.getBody().back().getTerminator()->getOperandTypes()));
  });

  auto convert = [&](OpBuilder &b, Location loc, Value v, Attribute to) {
    return ConvertLayoutOp::create(b, loc, withEncoding(v.getType(), to), v)
        .getResult();
  };
  module.walk([&](Operation *op) {
    OpBuilder b(op);
    // A matmul whose group took another accumulator layout computes in its
    // own and converts.
    if (isa<sage::QMatmulOp, sage::MatmulOp>(op)) {
      auto kind = op->getAttrOfType<sage::MmaKindAttr>("mma");
      Value result = op->getResult(0);
      auto type = cast<RankedTensorType>(result.getType());
      if (!kind)
        return;
      Attribute own =
          getAccumulatorEncoding(ctx, kind.getValue(), type.getDimSize(0),
                                 type.getDimSize(1), numWarps);
      if (sameLayout(own, type.getEncoding(), type.getShape()))
        return;
      Attribute group = type.getEncoding();
      result.setType(withEncoding(type, own));
      b.setInsertionPointAfter(op);
      Value back = convert(b, op->getLoc(), result, group);
      result.replaceAllUsesExcept(back, back.getDefiningOp());
      auto rel = cast<sage::LayoutRelationsOpInterface>(op);
      SmallVector<std::pair<Value, Value>> tied;
      rel.getTiedTiles(tied);
      b.setInsertionPoint(op);
      for (OpOperand &operand : op->getOpOperands())
        for (auto [acc, res] : tied)
          if (operand.get() == acc)
            operand.set(convert(b, op->getLoc(), acc, own));
      return;
    }
    // A tile stored through a transposed view (unit stride along rows)
    // in another blocked layout than the transposing one goes column-wise
    // first: from a row-wise layout, each byte would be a store of its own.
    if (auto store = dyn_cast<sage::StoreOp>(op)) {
      auto type = cast<RankedTensorType>(store.getValue().getType());
      if (!isa<BlockedEncodingAttr>(type.getEncoding()) ||
          !isTransposedStore(store))
        return;
      Attribute transposing = transposingEncoding(store, numWarps);
      if (transposing &&
          sameLayout(transposing, type.getEncoding(), type.getShape()))
        return;
      Attribute want = getColumnBlockedEncoding(
          ctx, numWarps, type.getShape(),
          std::max<int64_t>(1, type.getElementTypeBitWidth() / 8));
      if (!sameLayout(want, type.getEncoding(), type.getShape()))
        store.getValueMutable().assign(
            convert(b, op->getLoc(), store.getValue(), want));
      return;
    }
    // Reductions land in the (grouped) slice of their input; broadcasts
    // read the (grouped) slice of their result.
    if (auto reduce = dyn_cast<sage::ReduceOp>(op)) {
      auto in = cast<RankedTensorType>(reduce.getInput().getType());
      auto out = reduce.getResult().getType();
      SmallVector<sage::SliceRelation> rels;
      reduce.getSlicedTiles(rels);
      Attribute want = sliceEncoding(rels.front(), in.getEncoding());
      if (sameLayout(want, out.getEncoding(), out.getShape()))
        return;
      Attribute group = out.getEncoding();
      reduce.getResult().setType(withEncoding(out, want));
      b.setInsertionPointAfter(op);
      Value back = convert(b, op->getLoc(), reduce.getResult(), group);
      reduce.getResult().replaceAllUsesExcept(back, back.getDefiningOp());
      return;
    }
    if (auto bcast = dyn_cast<sage::BroadcastOp>(op)) {
      SmallVector<sage::SliceRelation> rels;
      bcast.getSlicedTiles(rels);
      for (const sage::SliceRelation &rel : rels) {
        auto src = cast<RankedTensorType>(rel.slice.getType());
        auto dst = cast<RankedTensorType>(rel.parent.getType());
        Attribute want = sliceEncoding(rel, dst.getEncoding());
        if (!sameLayout(want, src.getEncoding(), src.getShape()))
          bcast.getSourceMutable().assign(
              convert(b, op->getLoc(), rel.slice, want));
      }
    }
  });
}

struct AssignLayoutsPass
    : public sagegpu::impl::SageGPUAssignLayoutsBase<AssignLayoutsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    LayoutInference inference;
    inference.collect(module);
    inference.resolve(module);
    inference.rewrite(module);
  }
};

} // namespace
