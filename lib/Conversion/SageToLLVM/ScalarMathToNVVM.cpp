//===- ScalarMathToNVVM.cpp - math the NVPTX backend cannot select --------===//
//
// `llvm.log2.f32`, `llvm.exp.f32` and `llvm.log.f32` have no NVPTX lowering
// (llc aborts the process on them), so scalar f32 log2 becomes the
// `lg2.approx` intrinsic here, and exp and log are rewritten in base 2:
// exp(x) = exp2(x * log2(e)), log(x) = log2(x) * ln(2). exp2 becomes
// `ex2.approx.ftz.f32`: subnormal inputs and results are flushed to zero
// (results below 2^-126 are 0, which no softmax weight can tell apart),
// where `llvm.exp2.f32`'s `ex2.approx.f32` costs a compare and two
// predicated multiplies around every MUFU.EX2 to keep them. Every other math
// op the backend cannot select is left illegal, so the conversion reports it
// instead of LLVM aborting (isSupportedScalarMath).
//
// The INT8 quantizer's last steps, round-to-nearest-even, clamp to
// [-127, 127] and convert, stay off the F2I pipe: `cvt.rni*.s8.f32` runs on
// the same 16/clk/SM unit as `ex2` (hopper-speed.md section 1), which would
// cap the INT8 softmax path at bf16 speed. Instead the clamped value y is
// added to 1.5 * 2^23 with an explicit `add.rn.f32`: every f32 in
// [2^23, 2^24) is an integer, so the sum is round_half_even(y) + 1.5 * 2^23
// exactly, and its low byte is the two's-complement int8 (the bits are
// 0x4B400000 + q). The clamp comes first because clamping to integer bounds
// commutes with rounding. `.rn` keeps the backend and ptxas from fusing the
// add with the scale's multiply into an FMA, which would round once instead
// of twice and break bit equality with the reference.
//
// The sum's low byte then passes through one integer instruction (an `and`
// in inline PTX, which LLVM cannot fold away): ptxas 13.0 turns a byte
// store of a register that an `add.f32` defined into `F2I.U8.TRUNC` of the
// sum, a wrong truncating conversion (found on the H100: quant_matmul was
// wrong exactly where LLVM stored such a byte directly; PRMT byte packing of
// the same registers is compiled correctly). An integer-typed value keeps
// ptxas from doing so. Bytes that are only packed into vectors of two or
// more (the register-A words of a P quantized for the next matmul, vector
// stores) skip it: one instruction per element.
//
// A word of four such bytes that round f16 values (an f32 rounded to f16 in
// the IR, then quantized with scale 1: P~ in the SageBwd forward) is made
// from f16 pairs instead: `cvt.rn.f16x2.f32` rounds two f32 to f16 at once,
// `add.rn.f16x2` of 1.5 * 2^10 rounds each half to an integer held in its
// low byte (every f16 in [2^10, 2^11) is an integer), and one PRMT takes
// the four bytes: 1.25 instructions an element where the f32 path takes an
// FADD and 0.75 PRMT, and the adds run on the FMA pipe.
//
//===----------------------------------------------------------------------===//

#include "sage/Conversion/SageToLLVM/Patterns.h"
#include "sage/Conversion/SageToLLVM/PtxAsm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {
/// A unary math op on scalar f32 -> one NVVM intrinsic: log2 ->
/// lg2.approx, exp2 -> ex2.approx.ftz (see the file comment).
template <typename OpTy>
struct IntrinsicLowering : public OpRewritePattern<OpTy> {
  IntrinsicLowering(MLIRContext *ctx, StringRef intrinsic)
      : OpRewritePattern<OpTy>(ctx), intrinsic(intrinsic) {}
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rw) const override {
    if (!op.getType().isF32())
      return rw.notifyMatchFailure(op, "only scalar f32");
    rw.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(op, op.getType(),
                                                 rw.getStringAttr(intrinsic),
                                                 ValueRange{op.getOperand()});
    return success();
  }
  std::string intrinsic;
};

/// exp(x) -> exp2(x * log2(e)), f32.
struct ExpLowering : public OpRewritePattern<math::ExpOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::ExpOp op,
                                PatternRewriter &rw) const override {
    if (!op.getType().isF32())
      return rw.notifyMatchFailure(op, "only scalar f32");
    Value log2e = arith::ConstantOp::create(
        rw, op.getLoc(), rw.getF32FloatAttr(1.4426950408889634));
    Value scaled =
        arith::MulFOp::create(rw, op.getLoc(), op.getOperand(), log2e);
    rw.replaceOpWithNewOp<math::Exp2Op>(op, scaled);
    return success();
  }
};

/// log(x) -> log2(x) * ln(2), f32 (the log2 then becomes lg2.approx).
struct LogLowering : public OpRewritePattern<math::LogOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::LogOp op,
                                PatternRewriter &rw) const override {
    if (!op.getType().isF32())
      return rw.notifyMatchFailure(op, "only scalar f32");
    Value log2 = math::Log2Op::create(rw, op.getLoc(), op.getOperand());
    Value ln2 = arith::ConstantOp::create(
        rw, op.getLoc(), rw.getF32FloatAttr(0.6931471805599453));
    rw.replaceOpWithNewOp<arith::MulFOp>(op, log2, ln2);
    return success();
  }
};

/// 1.5 * 2^23 (bits 0x4B400000): adding it rounds |y| < 2^22 to an integer
/// held in the low mantissa bits.
constexpr double kMagic = 12582912.0;

/// Whether `v` is a float constant equal to `expected`.
bool isFloatConstant(Value v, double expected) {
  FloatAttr attr;
  return matchPattern(v, m_Constant(&attr)) &&
         attr.getValueAsDouble() == expected;
}

/// fptosi(minimumf(maximumf(roundeven(x), -127), 127)) : f32 -> i8 becomes
/// trunc(and(bitcast(add.rn(minimumf(maximumf(x, -127), 127), 0x1.8p23)),
/// 255)); the unclamped fptosi(roundeven(x)) (an `unsaturated` quantize,
/// whose |x| < 127.5 the producer guarantees) the same without the clamp.
/// An unsigned quantize's fptoui (bounds 0 and 255; with a computed scale
/// only the lower one) the same way: the low byte of the sum is the u8.
/// Unclamped, a contractable multiply before the rounding (an unsaturated
/// quantize rounds the exact product) fuses into fma.rn(x, inv, 0x1.8p23).
template <typename ConvertOp>
struct MagicRoundToByte : public OpRewritePattern<ConvertOp> {
  MagicRoundToByte(MLIRContext *ctx, double lo, double hi)
      : OpRewritePattern<ConvertOp>(ctx), lo(lo), hi(hi) {}

  /// The value `in` rounds, with the clamp to [lo, hi] (or to lo alone)
  /// that `in` applies after rounding applied before it instead (clamping
  /// to integer bounds commutes with rounding); null if `in` is not such a
  /// chain.
  Value unrounded(PatternRewriter &rw, Location loc, Value in) const {
    if (auto round = in.getDefiningOp<math::RoundEvenOp>())
      return round.getOperand();
    Value upperBound;
    if (auto upper = in.getDefiningOp<arith::MinimumFOp>()) {
      if (!isFloatConstant(upper.getRhs(), hi))
        return {};
      upperBound = upper.getRhs();
      in = upper.getLhs();
    }
    auto lower = in.getDefiningOp<arith::MaximumFOp>();
    if (!lower || !isFloatConstant(lower.getRhs(), lo))
      return {};
    auto round = lower.getLhs().getDefiningOp<math::RoundEvenOp>();
    if (!round || (!upperBound && lo < 0.0)) // a signed clamp has both
      return {};
    Value clamped =
        arith::MaximumFOp::create(rw, loc, round.getOperand(), lower.getRhs());
    return upperBound ? arith::MinimumFOp::create(rw, loc, clamped, upperBound)
                            .getResult()
                      : clamped;
  }

  LogicalResult matchAndRewrite(ConvertOp op,
                                PatternRewriter &rw) const override {
    if (!op.getType().isInteger(8) || !op.getIn().getType().isF32())
      return failure();
    Location loc = op.getLoc();
    Value clamped = unrounded(rw, loc, op.getIn());
    if (!clamped)
      return failure();
    Value magic =
        arith::ConstantOp::create(rw, loc, rw.getF32FloatAttr(kMagic));
    // An unclamped rounding of a contractable product (an unsaturated
    // quantize's, which rounds the exact product) takes the product into
    // the add: one fma.rn.
    auto mul = clamped.getDefiningOp<arith::MulFOp>();
    bool fuse = mul && mul->hasOneUse() &&
                arith::bitEnumContainsAll(mul.getFastmath(),
                                          arith::FastMathFlags::contract);
    auto add = fuse ? LLVM::CallIntrinsicOp::create(
                          rw, loc, rw.getF32Type(),
                          rw.getStringAttr("llvm.nvvm.fma.rn.f"),
                          ValueRange{mul.getLhs(), mul.getRhs(), magic})
                    : LLVM::CallIntrinsicOp::create(
                          rw, loc, rw.getF32Type(),
                          rw.getStringAttr("llvm.nvvm.add.rn.f"),
                          ValueRange{clamped, magic});
    Value sum = add->getResult(0);
    Value bits = LLVM::BitcastOp::create(rw, loc, rw.getI32Type(), sum);
    // Bytes only packed into wider vectors (register A words, vector
    // stores: PRMT) need no `and`; one that may be stored alone does. Dead
    // users (a widening that a dp4a sum of the packed words replaced) do
    // not count.
    bool packedOnly = llvm::all_of(op->getUsers(), [](Operation *user) {
      auto insert = dyn_cast<LLVM::InsertElementOp>(user);
      return (insert && insert.getVector().getType().getNumElements() >= 2) ||
             isOpTriviallyDead(user);
    });
    Value byte = bits;
    if (!packedOnly)
      byte = sage::inlinePtx(rw, loc, rw.getI32Type(), ValueRange{bits},
                             "and.b32 $0, $1, 255;", "=r,r",
                             /*sideEffects=*/false);
    rw.replaceOpWithNewOp<LLVM::TruncOp>(op, op.getType(), byte);
    return success();
  }

  double lo, hi;
};

/// The f16 value a byte rounds, if it is one: the byte is
/// trunc(bitcast(add.rn.f(extf(h : f16), 1.5 * 2^23))), the magic-number
/// rounding of an f16 with scale 1 and no clamp (MagicRoundToByte's
/// result), and h is arith.truncf of an f32. Returns that f32.
Value roundedHalf(Value byte) {
  auto trunc = byte.getDefiningOp<LLVM::TruncOp>();
  auto bits = trunc ? trunc.getArg().getDefiningOp<LLVM::BitcastOp>() : nullptr;
  auto round =
      bits ? bits.getArg().getDefiningOp<LLVM::CallIntrinsicOp>() : nullptr;
  if (!round)
    return {};
  // add.rn(x, magic), or fma.rn(x, 1, magic) where the scale 1 was not
  // folded before the magic-number rounding took the multiply in.
  ValueRange args = round.getArgs();
  bool add = round.getIntrin() == "llvm.nvvm.add.rn.f" && args.size() == 2;
  bool fma = round.getIntrin() == "llvm.nvvm.fma.rn.f" && args.size() == 3 &&
             isFloatConstant(args[1], 1.0);
  if (!(add || fma) || !isFloatConstant(args.back(), kMagic))
    return {};
  auto widen = args[0].getDefiningOp<arith::ExtFOp>();
  if (!widen || !widen.getIn().getType().isF16())
    return {};
  auto narrow = widen.getIn().getDefiningOp<arith::TruncFOp>();
  if (!narrow || !narrow.getIn().getType().isF32())
    return {};
  return narrow.getIn();
}

/// A vector<4k x i8> built by insertelements at every position, in order,
/// of bytes that round f16s (roundedHalf) -> k words of two f16 pairs: per
/// pair `cvt.rn.f16x2.f32` (the two truncf) and `add.rn.f16x2` of
/// 1.5 * 2^10 (round half to even: the low byte of each half is the byte
/// for any value in [-512, 512), where the quantizer's promise puts it),
/// then `prmt` of bytes 0 and 2 of each (see the file comment).
struct RoundF16PairsToBytes : public OpRewritePattern<LLVM::InsertElementOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LLVM::InsertElementOp op,
                                PatternRewriter &rw) const override {
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || type.getNumElements() % 4 ||
        !type.getElementType().isInteger(8))
      return rw.notifyMatchFailure(op, "not a vector<4k x i8>");
    int64_t count = type.getNumElements();
    SmallVector<Value> halves(count);
    Value vector = op;
    for (int64_t at = count - 1; at >= 0; --at) {
      auto insert = vector.getDefiningOp<LLVM::InsertElementOp>();
      IntegerAttr index;
      if (!insert || !matchPattern(insert.getPosition(), m_Constant(&index)) ||
          index.getInt() != at || (insert != op && !insert->hasOneUse()))
        return rw.notifyMatchFailure(op, "not one insert a position, in order");
      halves[at] = roundedHalf(insert.getValue());
      if (!halves[at])
        return rw.notifyMatchFailure(op, "a byte that rounds no f16");
      vector = insert.getVector();
    }
    if (!vector.getDefiningOp<LLVM::PoisonOp>() &&
        !vector.getDefiningOp<LLVM::UndefOp>())
      return rw.notifyMatchFailure(op, "inserts into a vector with contents");
    Location loc = op.getLoc();
    Type i32 = rw.getI32Type();
    // 1.5 * 2^10 in each f16 half.
    Value magic = LLVM::ConstantOp::create(rw, loc, i32, int64_t(0x66006600));
    auto pair = [&](Value lo, Value hi) {
      return sage::inlinePtx(
          rw, loc, i32, ValueRange{lo, hi, magic},
          "{\n\t.reg .b32 h;\n\tcvt.rn.f16x2.f32 h, $2, $1;\n\t"
          "add.rn.f16x2 $0, h, $3;\n\t}",
          "=r,f,f,r", /*sideEffects=*/false);
    };
    auto wordsType = VectorType::get({count / 4}, i32);
    Value words = LLVM::PoisonOp::create(rw, loc, wordsType);
    for (int64_t w = 0; w < count / 4; ++w) {
      Value low = pair(halves[4 * w], halves[4 * w + 1]);
      Value high = pair(halves[4 * w + 2], halves[4 * w + 3]);
      Value word = sage::inlinePtx(rw, loc, i32, ValueRange{low, high},
                                   "prmt.b32 $0, $1, $2, 0x6420;", "=r,r,r",
                                   /*sideEffects=*/false);
      words = LLVM::InsertElementOp::create(
          rw, loc, words, word, LLVM::ConstantOp::create(rw, loc, i32, w));
    }
    rw.replaceOpWithNewOp<LLVM::BitcastOp>(op, type, words);
    return success();
  }
};

/// extf : bf16 -> f32 of an element of a vector<2n x bf16> (a vector load,
/// a loop-carried pair) as its 32-bit word with the other half cleared:
/// `and 0xffff0000` for an odd element, `shl 16` for an even one (exact: a
/// bf16 is the top half of the f32 it widens to). `cvt.f32.bf16` of the
/// extracted half costs ptxas a PRMT to extract it and an IMAD to shift it.
struct WidenBF16Pair : public OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rw) const override {
    if (!op.getIn().getType().isBF16() || !op.getType().isF32())
      return rw.notifyMatchFailure(op, "only scalar bf16 -> f32");
    auto extract = op.getIn().getDefiningOp<LLVM::ExtractElementOp>();
    IntegerAttr index;
    if (!extract || !matchPattern(extract.getPosition(), m_Constant(&index)))
      return rw.notifyMatchFailure(op, "not a constant element of a vector");
    auto vector = cast<VectorType>(extract.getVector().getType());
    int64_t count = vector.getNumElements();
    if (count % 2)
      return rw.notifyMatchFailure(op, "no whole 32-bit words");
    Location loc = op.getLoc();
    Type i32 = rw.getI32Type();
    int64_t at = index.getInt();
    Value words = LLVM::BitcastOp::create(
        rw, loc, VectorType::get({count / 2}, i32), extract.getVector());
    Value word = LLVM::ExtractElementOp::create(
        rw, loc, words,
        LLVM::ConstantOp::create(rw, loc, i32, int64_t(at / 2)));
    Value bits =
        at % 2 ? LLVM::AndOp::create(rw, loc, word,
                                     LLVM::ConstantOp::create(
                                         rw, loc, i32, int64_t(0xffff0000u)))
                     .getResult()
               : LLVM::ShlOp::create(
                     rw, loc, word,
                     LLVM::ConstantOp::create(rw, loc, i32, int64_t(16)))
                     .getResult();
    rw.replaceOpWithNewOp<LLVM::BitcastOp>(op, rw.getF32Type(), bits);
    return success();
  }
};
} // namespace

void mlir::sage::populateScalarMathToNVVMPatterns(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<IntrinsicLowering<math::Log2Op>>(ctx, "llvm.nvvm.lg2.approx.f");
  patterns.add<IntrinsicLowering<math::Exp2Op>>(ctx,
                                                "llvm.nvvm.ex2.approx.ftz.f");
  patterns.add<ExpLowering, LogLowering>(ctx);
}

bool mlir::sage::isSupportedScalarMath(Operation *op) {
  // What NVPTX selects natively; log2, exp2, exp and log only after the
  // patterns above have rewritten them.
  return isa<math::SqrtOp, math::AbsFOp, math::FmaOp, math::RoundEvenOp,
             math::RoundOp, math::FloorOp, math::CeilOp, math::TruncOp>(op);
}

void mlir::sage::populateScalarPeepholePatterns(RewritePatternSet &patterns) {
  patterns.add<WidenBF16Pair, RoundF16PairsToBytes>(patterns.getContext());
  patterns.add<MagicRoundToByte<arith::FPToSIOp>>(patterns.getContext(), -127.0,
                                                  127.0);
  patterns.add<MagicRoundToByte<arith::FPToUIOp>>(patterns.getContext(), 0.0,
                                                  255.0);
}
