//===- TensorMapToNVVM.cpp - tensor maps and TMA copies -------------------===//
//
// sage.make_tensor_map assembles the 128-byte map in shared memory with
// tensormap.replace (warp 0; lane 0 writes the fields), then publishes it to
// the program's global slot with tensormap.cp_fenceproxy: the copy engine
// reads maps only from global, constant or parameter memory. The view is
// described as a 2-D tensor of bytes {inner bytes, outer} with the map's
// swizzle mode and a box one swizzle wide (see sage.make_tensor_map).
//
// sagegpu.tma_load asks the copy engine for the tile, one box per swizzle-
// wide slab of its inner dimension (the copy leader, a lane of warp 0
// elected at the copy, arms the mbarrier with the tile's bytes and issues
// them: CopyLeaders.h, LeaderRegion below); the mbarrier ops wrap PTX's. In
// the producer of a warp-specialised kernel, "warp 0" is the producer's
// first.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/CopyLeaders.h"
#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"
#include "sage/Conversion/SageToLLVM/SharedMemory.h"
#include "sage/Conversion/SageToLLVM/TileDistribution.h"
#include "sage/Dialect/Sage/IR/SageDialect.h"
#include "sage/Dialect/Sage/IR/TensorMapGeometry.h"
#include "sage/Dialect/SageGPU/IR/SageGPUDialect.h"
#include "sage/Layout/Encodings.h"
#include "sage/Layout/SharedLayouts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::sage;

namespace {

struct MakeTensorMapLowering : public OpConversionPattern<MakeTensorMapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MakeTensorMapOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    auto func = op->getParentOfType<FunctionOpInterface>();
    auto scratchBytes = func ? func->getAttrOfType<IntegerAttr>(
                                   SageDialect::kGlobalScratchAttrName)
                             : IntegerAttr();
    if (!scratchBytes)
      return rw.notifyMatchFailure(op, "function has no global scratch");
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    Type i32 = rw.getI32Type(), i64 = rw.getI64Type();
    auto i64Const = [&](int64_t v) {
      return arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(v));
    };
    auto toI64 = [&](Value v) {
      return arith::ExtUIOp::create(rw, loc, i64, v);
    };
    auto toI32 = [&](Value v) {
      return arith::TruncIOp::create(rw, loc, i32, v);
    };

    // This program's slot: scratch + (program * maps + slot) * 128.
    Value program = toI64(NVVM::BlockIdZOp::create(rw, loc, i32));
    program = arith::AddIOp::create(
        rw, loc, toI64(NVVM::BlockIdYOp::create(rw, loc, i32)),
        arith::MulIOp::create(rw, loc, program,
                              toI64(NVVM::GridDimYOp::create(rw, loc, i32))));
    program = arith::AddIOp::create(
        rw, loc, toI64(NVVM::BlockIdXOp::create(rw, loc, i32)),
        arith::MulIOp::create(rw, loc, program,
                              toI64(NVVM::GridDimXOp::create(rw, loc, i32))));
    int64_t maps = scratchBytes.getInt() / MakeTensorMapOp::kBytes;
    Value offset = arith::MulIOp::create(
        rw, loc,
        arith::AddIOp::create(
            rw, loc, arith::MulIOp::create(rw, loc, program, i64Const(maps)),
            i64Const(op.getSlot())),
        i64Const(MakeTensorMapOp::kBytes));
    Value map = LLVM::GEPOp::create(rw, loc, adaptor.getScratch().getType(),
                                    rw.getI8Type(), adaptor.getScratch(),
                                    ValueRange{offset});
    Value mapAddress = LLVM::PtrToIntOp::create(rw, loc, i64, map);

    // The copy engine's view (sage::getTensorMapGeometry): extents in i32,
    // byte strides of dimensions 1 and up in i64.
    TensorMapGeometry geometry = getTensorMapGeometry(op);
    ValueRange bounds = adaptor.getBounds(), strides = adaptor.getStrides();
    auto scaled = [&](Value v, int64_t scale) -> Value {
      return scale == 1 ? v
                        : arith::MulIOp::create(rw, loc, v, i64Const(scale))
                              .getResult();
    };
    SmallVector<Value> globalDims, boxDims, byteStrides;
    for (const TensorMapDim &dim : geometry.dims) {
      globalDims.push_back(toI32(scaled(bounds[dim.bound], dim.boundScale)));
      boxDims.push_back(c.constant(dim.box));
      if (dim.stride)
        byteStrides.push_back(scaled(strides[*dim.stride], dim.strideScale));
    }

    // Warp 0 (of the role that runs the op) zeroes the staging bytes, lane
    // 0 fills in every field.
    Value staging = sharedAddress(rw, loc, c.constant(getScratchOffset(op)));
    Value warp0 = arith::CmpIOp::create(
        rw, loc, arith::CmpIPredicate::eq, c.warp,
        c.constant(sagegpu::getRoleFirstThread(op) / layout::kWarpSize));
    Value lane0 = arith::AndIOp::create(
        rw, loc, warp0,
        arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, c.lane,
                              c.constant(0)));
    Value word = arith::AddIOp::create(
        rw, loc, staging,
        arith::MulIOp::create(rw, loc, c.lane, c.constant(4)));
    inlinePtx(rw, loc, Type(), {word, warp0}, "@$1 st.shared.b32 [$0], 0;",
              "r,b");
    inlinePtx(rw, loc, Type(), {}, "bar.warp.sync -1;", "");
    // `name` is the field and its width; `ord` picks the dimension.
    auto field = [&](StringRef name, std::optional<int64_t> ord, Value value,
                     StringRef constraint) {
      std::string dim = ord ? (Twine(*ord) + ", ").str() : std::string();
      inlinePtx(rw, loc, Type(), {staging, value, lane0},
                ("@$2 tensormap.replace.tile." + name + ".shared::cta.b1024." +
                 (constraint == "l" ? "b64" : "b32") + " [$0], " + dim + "$1;")
                    .str(),
                ("r," + constraint + ",b").str());
    };
    field("global_address", std::nullopt,
          LLVM::PtrToIntOp::create(rw, loc, i64, adaptor.getPtr()), "l");
    // rank holds the rank minus one; the geometry's element type and
    // swizzle, no interleave, zero fill.
    for (auto [name, value] :
         {std::pair<StringRef, int64_t>{"rank", int64_t(globalDims.size()) - 1},
          {"elemtype", geometry.elementType},
          {"interleave_layout", 0},
          {"swizzle_mode", geometry.swizzleMode},
          {"fill_mode", 0}})
      inlinePtx(rw, loc, Type(), {staging, lane0},
                ("@$1 tensormap.replace.tile." + name +
                 ".shared::cta.b1024.b32 [$0], " + Twine(value) + ";")
                    .str(),
                "r,b");
    for (auto [d, dims] : llvm::enumerate(llvm::zip(globalDims, boxDims))) {
      field("box_dim", d, std::get<1>(dims), "r");
      field("global_dim", d, std::get<0>(dims), "r");
      field("element_stride", d, c.constant(1), "r");
    }
    // Dimension 0's stride is implied (one byte); field d is dimension
    // d+1's.
    for (auto [d, stride] : llvm::enumerate(byteStrides))
      field("global_stride", d, stride, "l");
    inlinePtx(rw, loc, Type(), {}, "bar.warp.sync -1;", "");
    inlinePtx(rw, loc, Type(), {mapAddress, staging, warp0},
              "@$2 tensormap.cp_fenceproxy.global.shared::cta.tensormap::"
              "generic.release.gpu.sync.aligned [$0], [$1], 128;",
              "l,r,b");
    // Warp 0 (whose first thread issues every copy) sees the published map.
    inlinePtx(rw, loc, Type(), {mapAddress, warp0},
              "@$1 fence.proxy.tensormap::generic.acquire.gpu [$0], 128;",
              "l,b");
    // A global address is its generic address (the copy engine takes
    // either): the same bits, with no cvta (copies take the integer back).
    rw.replaceOp(op, LLVM::IntToPtrOp::create(
                         rw, loc, LLVM::LLVMPointerType::get(rw.getContext()),
                         mapAddress));
    return success();
  }
};

/// One-thread PTX statements, run as one region by a lane of the role's
/// leader warp elected right there: a uniform branch takes the other warps
/// around it, and `elect.sync` (among the active lanes) picks the lane.
/// With the election at the copy, not once at the function's entry, ptxas
/// keeps a copy's operands (the map's address, the coordinates) in uniform
/// registers and issues it once, without moving them from per-lane
/// registers first: the SageBwd forward's key loop is 10 instructions a trip
/// shorter at D = 128
/// (bench/results/2026-11-27-h100-leader-elected-at-copy.md).
class LeaderRegion {
public:
  /// Adds `statement` (one PTX statement, without its predicate), whose
  /// `$k` is `args[k]` with constraint letter k of `constraints` (comma
  /// separated).
  void add(StringRef statement, ValueRange args, StringRef constraints) {
    int64_t base = operands.size();
    body += "\n\t@sage_leader ";
    for (size_t i = 0; i < statement.size(); ++i) {
      char ch = statement[i];
      body += ch;
      if (ch != '$' || i + 1 >= statement.size() ||
          !llvm::isDigit(statement[i + 1]))
        continue;
      size_t end = i + 1;
      while (end < statement.size() && llvm::isDigit(statement[end]))
        ++end;
      int64_t index = std::stoll(statement.substr(i + 1, end - i - 1).str());
      body += std::to_string(base + index);
      i = end - 1;
    }
    llvm::append_range(operands, args);
    if (!constraints.empty())
      allConstraints += (allConstraints.empty() ? "" : ",") + constraints.str();
  }

  /// Emits the region at `b`'s insertion point; `warp` (i1, uniform in each
  /// warp) holds in the leader's warp.
  void emit(OpBuilder &b, Location loc, Value warp) {
    std::string w = std::to_string(operands.size());
    operands.push_back(warp);
    allConstraints += allConstraints.empty() ? "b" : ",b";
    // The braces scope the registers and the label to this region.
    inlinePtx(b, loc, Type(), operands,
              "{\n\t.reg .pred sage_leader;\n\t.reg .b32 sage_lanes;\n\t@!$" +
                  w +
                  " bra.uni sage_led;\n\tactivemask.b32 sage_lanes;\n\t"
                  "elect.sync _|sage_leader, sage_lanes;" +
                  body + "\n\tsage_led:\n\t}",
              allConstraints);
  }

private:
  SmallVector<Value> operands;
  std::string body, allConstraints;
};

/// A pattern for an op that one thread of its role (the role's copy leader,
/// elected at the op: LeaderRegion) runs.
template <typename Op>
struct OneThreadPattern : public OpConversionPattern<Op> {
  OneThreadPattern(const TypeConverter &converter, MLIRContext *ctx,
                   const CopyLeaders &leaders)
      : OpConversionPattern<Op>(converter, ctx), leaders(leaders) {}
  LogicalResult
  matchAndRewrite(Op op, typename OpConversionPattern<Op>::OpAdaptor adaptor,
                  ConversionPatternRewriter &rw) const final {
    Value warp = leaders.get(op);
    if (!warp)
      return rw.notifyMatchFailure(op, "no copy leader's warp was found");
    LeaderRegion region;
    if (failed(lower(op, adaptor, rw, region)))
      return failure();
    region.emit(rw, op.getLoc(), warp);
    rw.eraseOp(op);
    return success();
  }
  /// Lowers `op`: its one-thread statements go to `region`, whatever
  /// precedes them (addresses, coordinates) is built with `rw`.
  virtual LogicalResult
  lower(Op op, typename OpConversionPattern<Op>::OpAdaptor adaptor,
        ConversionPatternRewriter &rw, LeaderRegion &region) const = 0;

private:
  const CopyLeaders &leaders;
};

/// The shared-window address of a converted `!sagegpu.smem` value.
Value addressOf(OpBuilder &b, Location loc, Value ptr) {
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), ptr);
}

struct MbarrierInitLowering : public OneThreadPattern<sagegpu::MbarrierInitOp> {
  using OneThreadPattern::OneThreadPattern;
  LogicalResult lower(sagegpu::MbarrierInitOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rw,
                      LeaderRegion &region) const override {
    Location loc = op.getLoc();
    region.add("mbarrier.init.shared::cta.b64 [$0], $1;",
               {addressOf(rw, loc, adaptor.getBarrier()),
                arith::ConstantOp::create(rw, loc,
                                          rw.getI32IntegerAttr(op.getCount()))},
               "r,r");
    // The copy engine (async proxy) must see the initialised barrier.
    region.add("fence.mbarrier_init.release.cluster;", {}, "");
    return success();
  }
};

/// The leading indices of a TMA copy as i32 coordinates, innermost first
/// (the map's dimensions 2 and up).
template <typename Adaptor>
SmallVector<Value> leadingCoordinates(OpBuilder &b, Location loc,
                                      Adaptor adaptor) {
  SmallVector<Value> coords;
  for (Value index : llvm::reverse(adaptor.getLeading()))
    coords.push_back(
        arith::TruncIOp::create(b, loc, b.getI32Type(), index).getResult());
  return coords;
}

/// "$first, $first+1, ...": the operands of `rank` coordinates.
std::string coordinateList(int64_t rank, int64_t first) {
  std::string list;
  for (int64_t d = 0; d < rank; ++d)
    list += (d ? ", $" : "$") + std::to_string(first + d);
  return list;
}

/// ",r" per coordinate.
std::string coordinateConstraints(int64_t rank) {
  std::string constraints;
  for (int64_t d = 0; d < rank; ++d)
    constraints += ",r";
  return constraints;
}

/// The slabs of a TMA copy between `tile` (a swizzled shared tile of `type`
/// at shared address `base`) and the box of `map` at (`outer`, `inner`):
/// calls `fn(sharedAddress, innerByte, outerRow)` once per swizzle-wide slab
/// of the inner dimension (slab s: `outer` rows of `swizzle` bytes at byte
/// s * rows * swizzle of the tile, from byte inner * elemBytes + s * swizzle
/// of the rows). With `elements` (a typed map) the inner coordinate counts
/// elements: inner + s * swizzle / elemBytes.
void forEachSlab(ConversionPatternRewriter &rw, Location loc, ThreadCoords &c,
                 sagegpu::SharedTileType type, Value base, Value outer,
                 Value inner, function_ref<void(Value, Value, Value)> fn,
                 bool elements = false) {
  Type i32 = rw.getI32Type();
  int64_t elemBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
  // A typed map's coordinates count elements, not bytes.
  int64_t unit = elements ? elemBytes : 1;
  auto encoding = cast<sagegpu::SharedEncodingAttr>(type.getEncoding());
  int64_t swizzle = encoding.getSwizzle();
  unsigned innerDim = encoding.getInner();
  int64_t rows = type.getShape()[1 - innerDim];
  int64_t slabs = type.getShape()[innerDim] * elemBytes / swizzle;
  Value innerCoord = arith::TruncIOp::create(
      rw, loc, i32,
      arith::MulIOp::create(
          rw, loc, inner,
          arith::ConstantOp::create(rw, loc,
                                    rw.getI64IntegerAttr(elemBytes / unit))));
  Value outerRow = arith::TruncIOp::create(rw, loc, i32, outer);
  for (int64_t slab = 0; slab < slabs; ++slab)
    fn(arith::AddIOp::create(rw, loc, base, c.constant(slab * rows * swizzle)),
       arith::AddIOp::create(rw, loc, innerCoord,
                             c.constant(slab * swizzle / unit)),
       outerRow);
}

/// The copy's mbarrier armed (in the leader's `region`) with the `bytes`
/// the copy engine will deliver; its shared-window address.
Value armBarrier(ConversionPatternRewriter &rw, ThreadCoords &c, Value barrier,
                 Value bytes, LeaderRegion &region) {
  Value bar = addressOf(rw, c.loc, barrier);
  region.add("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
             {bar, bytes}, "r,r");
  return bar;
}

struct TmaLoadLowering : public OneThreadPattern<sagegpu::TmaLoadOp> {
  using OneThreadPattern::OneThreadPattern;
  LogicalResult lower(sagegpu::TmaLoadOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rw,
                      LeaderRegion &region) const override {
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    sagegpu::SharedTileType type = op.getDest().getType();
    Value bar = armBarrier(rw, c, adaptor.getBarrier(),
                           c.constant(type.getSizeInBytes()), region);
    Value mapAddress =
        LLVM::PtrToIntOp::create(rw, loc, rw.getI64Type(), adaptor.getMap());
    SmallVector<Value> leading = leadingCoordinates(rw, loc, adaptor);
    forEachSlab(rw, loc, c, type, addressOf(rw, loc, adaptor.getDest()),
                adaptor.getOuter(), adaptor.getInner(),
                [&](Value dest, Value x, Value y) {
                  SmallVector<Value> operands{dest, mapAddress, x, y};
                  llvm::append_range(operands, leading);
                  int64_t rank = 2 + leading.size();
                  operands.push_back(bar);
                  region.add(("cp.async.bulk.tensor." + Twine(rank) +
                              "d.shared::cluster.global.tile.mbarrier::"
                              "complete_tx::bytes [$0], [$1, {" +
                              coordinateList(rank, 2) + "}], [$" +
                              Twine(rank + 2) + "];")
                                 .str(),
                             operands,
                             "r,l" + coordinateConstraints(rank) + ",r");
                });
    return success();
  }
};

/// One thread arms the barrier with the tile's bytes and asks the copy engine
/// for them: a 1-D bulk copy (no tensor map, no bounds: the op's creator
/// proved them).
struct BulkLoadLowering : public OneThreadPattern<sagegpu::BulkLoadOp> {
  using OneThreadPattern::OneThreadPattern;
  LogicalResult lower(sagegpu::BulkLoadOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rw,
                      LeaderRegion &region) const override {
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    sagegpu::SharedTileType type = op.getDest().getType();
    Value bytes = c.constant(type.getSizeInBytes());
    Value bar = armBarrier(rw, c, adaptor.getBarrier(), bytes, region);
    Value src = LLVM::GEPOp::create(rw, loc, adaptor.getPtr().getType(),
                                    type.getElementType(), adaptor.getPtr(),
                                    ValueRange{adaptor.getOffset()});
    region.add("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [$0], [$1], $2, [$3];",
               {addressOf(rw, loc, adaptor.getDest()), src, bytes, bar},
               "r,l,r,r");
    return success();
  }
};

struct TmaStoreLowering : public OneThreadPattern<sagegpu::TmaStoreOp> {
  using OneThreadPattern::OneThreadPattern;
  LogicalResult lower(sagegpu::TmaStoreOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rw,
                      LeaderRegion &region) const override {
    Location loc = op.getLoc();
    ThreadCoords c(rw, loc);
    Value mapAddress =
        LLVM::PtrToIntOp::create(rw, loc, rw.getI64Type(), adaptor.getMap());
    SmallVector<Value> leading = leadingCoordinates(rw, loc, adaptor);
    forEachSlab(
        rw, loc, c, op.getSource().getType(),
        addressOf(rw, loc, adaptor.getSource()), adaptor.getOuter(),
        adaptor.getInner(),
        [&](Value src, Value x, Value y) {
          SmallVector<Value> operands{mapAddress, x, y};
          llvm::append_range(operands, leading);
          int64_t rank = 2 + leading.size();
          operands.push_back(src);
          // A bulk reduction adds the tile (f32) instead.
          std::string copy =
              op.getAdd()
                  ? "cp.reduce.async.bulk.tensor." + std::to_string(rank) +
                        "d.global.shared::cta.add.tile"
                  : "cp.async.bulk.tensor." + std::to_string(rank) +
                        "d.global.shared::cta";
          region.add((copy + ".bulk_group [$0, {" + coordinateList(rank, 1) +
                      "}], [$" + Twine(rank + 1) + "];")
                         .str(),
                     operands, "l" + coordinateConstraints(rank) + ",r");
        },
        /*elements=*/op.getAdd());
    // The tile's bytes are free once the engine has read them (its writes
    // to global memory complete on their own).
    region.add("cp.async.bulk.commit_group;", {}, "");
    region.add("cp.async.bulk.wait_group.read 0;", {}, "");
    return success();
  }
};

struct MbarrierWaitLowering
    : public OpConversionPattern<sagegpu::MbarrierWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::MbarrierWaitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    // The braces scope the label to this instance.
    inlinePtx(rw, loc, Type(),
              {addressOf(rw, loc, adaptor.getBarrier()), adaptor.getPhase()},
              "{\n\t.reg .pred done;\n\tsage_mbarrier_wait:\n\t"
              "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n\t"
              "@!done bra sage_mbarrier_wait;\n\t}",
              "r,r");
    rw.eraseOp(op);
    return success();
  }
};

struct MbarrierArriveLowering
    : public OpConversionPattern<sagegpu::MbarrierArriveOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(sagegpu::MbarrierArriveOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    inlinePtx(rw, op.getLoc(), Type(),
              {addressOf(rw, op.getLoc(), adaptor.getBarrier())},
              "mbarrier.arrive.shared::cta.b64 _, [$0];", "r");
    rw.eraseOp(op);
    return success();
  }
};

struct MbarrierInvalLowering
    : public OneThreadPattern<sagegpu::MbarrierInvalOp> {
  using OneThreadPattern::OneThreadPattern;
  LogicalResult lower(sagegpu::MbarrierInvalOp op, OpAdaptor adaptor,
                      ConversionPatternRewriter &rw,
                      LeaderRegion &region) const override {
    Location loc = op.getLoc();
    region.add("mbarrier.inval.shared::cta.b64 [$0];",
               {addressOf(rw, loc, adaptor.getBarrier())}, "r");
    return success();
  }
};

} // namespace

void mlir::sage::populateTensorMapToNVVMPatterns(const TypeConverter &converter,
                                                 RewritePatternSet &patterns,
                                                 const CopyLeaders &leaders) {
  MLIRContext *ctx = patterns.getContext();
  patterns
      .add<MakeTensorMapLowering, MbarrierWaitLowering, MbarrierArriveLowering>(
          converter, ctx);
  patterns.add<MbarrierInitLowering, TmaLoadLowering, BulkLoadLowering,
               TmaStoreLowering, MbarrierInvalLowering>(converter, ctx,
                                                        leaders);
}
