//===- SageOps.td - sage operations -------------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGE_IR_SAGEOPS_TD
#define SAGE_DIALECT_SAGE_IR_SAGEOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "sage/Dialect/Sage/IR/SageAttrs.td"
include "sage/Dialect/Sage/IR/SageTypes.td"

class Sage_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sage_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Program structure
//===----------------------------------------------------------------------===//

def Sage_ProgramIdOp : Sage_Op<"program_id", [Pure]> {
  let summary = "index of this program along a launch-grid axis";
  let description = [{
    `sage.program_id 0` is the index (from 0) of the running program along
    grid axis 0; axes are 0, 1 and 2.
  }];
  let hasVerifier = 1;
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict";
}

def Sage_NumProgramsOp : Sage_Op<"num_programs", [Pure]> {
  let summary = "number of programs along a launch-grid axis";
  let hasVerifier = 1;
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict";
}

def Sage_ClusterBarrierOp : Sage_Op<"cluster_barrier"> {
  let summary = "wait for every program of this thread-block cluster";
  let description = [{
    Every thread of every program of the running program's cluster (the
    module's `sage.num_ctas` consecutive programs along grid axis 0, from a
    multiple of it) must reach the barrier before any passes it. Memory
    writes (global or shared) made before it are visible to the cluster's
    programs after it (release and acquire at cluster scope), so programs
    that cooperate on one problem can exchange partial results through
    global memory: the cluster's programs are resident together, so no
    program waits for one that cannot start. Needs sm_90 and a module with
    `sage.num_ctas` > 1.
  }];
  let hasVerifier = 1;
  let assemblyFormat = "attr-dict";
}

def Sage_GridDependencyWaitOp : Sage_Op<"grid_dependency_wait"> {
  let summary = "wait for the previous kernel of the stream to finish";
  let description = [{
    Blocks until the kernel launched before this one on the same stream has
    finished and its memory writes are visible (PTX `griddepcontrol.wait`).
    A kernel that has this op is launched so that it may start early, while
    that kernel is still running (programmatic dependent launch; the PTX
    header says `early_launch=1`): what runs before the wait overlaps the
    previous kernel's tail, and must neither read what that kernel writes
    nor write what it reads or writes. Every kernel before that one has
    finished when this one starts. Launched without the early start (a
    driver that cannot), the wait returns at once. Needs sm_90.
  }];
  let hasVerifier = 1;
  let assemblyFormat = "attr-dict";
}

def Sage_LaunchDependentsOp : Sage_Op<"launch_dependents"> {
  let summary = "let the next kernel of the stream start early";
  let description = [{
    Signals that the kernel launched after this one on the same stream may
    be scheduled once every program of this kernel has signalled or
    finished (PTX `griddepcontrol.launch_dependents`), if that kernel was
    launched for an early start (it has `sage.grid_dependency_wait` or
    `sage.counter_wait`). It orders no memory: that kernel still waits, at
    its `sage.grid_dependency_wait` for this one to finish, or at its
    counters for what this one releases. Without the signal it starts when
    this kernel finishes. Needs sm_90.
  }];
  let hasVerifier = 1;
  let assemblyFormat = "attr-dict";
}

def Sage_CounterAddOp : Sage_Op<"counter_add",
                                 [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "add to a counter in global memory, once for the program";
  let description = [{
    Programs that depend on each other's results signal through i32
    counters in global memory. `counter_add` adds `value` to the counter
    once for the whole program (not once per thread) and returns the value
    it held before, the same in every thread. Every memory write of the
    program before the op is visible to a program that sees the new value
    (release), and every write released before the old value was stored is
    visible to this program after the op (acquire): acq_rel at GPU scope.

    ```mlir
    %old = sage.counter_add %ready, %one : !sage.ptr<i32>
    ```

    Every thread of the program must execute it (it meets the program's
    other threads at barriers).
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_PtrType:$counter, I32:$value);
  let results = (outs I32:$old);
  let assemblyFormat =
      "$counter `,` $value attr-dict `:` qualified(type($counter))";
}

def Sage_CounterWaitOp : Sage_Op<"counter_wait",
                                 [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "wait until a counter in global memory reaches a value";
  let description = [{
    Blocks the program until the i32 counter holds at least `target`
    (signed), then makes every write released by the `sage.counter_add`s
    that raised it visible to all of the program's threads, including to
    the copy engine's reads (acquire at GPU scope, then a proxy fence).

    A program may only wait for programs that run: ones of an earlier
    launch, or of its own launch that are resident beside it. A kernel with
    this op is launched so that it may start while the previous kernel of
    its stream runs, if that kernel lets it (`sage.launch_dependents`): it
    may wait for that kernel's programs, which are all resident by then.
    Every thread of the program must execute it.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_PtrType:$counter, I32:$target);
  let assemblyFormat =
      "$counter `,` $target attr-dict `:` qualified(type($counter))";
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def Sage_AddPtrOp : Sage_Op<"addptr", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "advance a pointer by a number of elements";
  let arguments = (ins Sage_PtrType:$ptr, I64:$offset);
  let results = (outs Sage_PtrType:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` qualified(type($ptr))";
}

def Sage_LoadOp : Sage_Op<"load", [AttrSizedOperandSegments,
                                   MemoryEffects<[MemRead]>]> {
  let summary = "load a tile from a strided view, padding out-of-bounds";
  let description = [{
    Reads element `(i, j)` of the result from
    `ptr + (offsets[0] + i) * strides[0] + (offsets[1] + j) * strides[1]`
    when `0 <= offsets[d] + idx[d] < bounds[d]` for both dimensions, and
    yields 0 otherwise (sequence tails are masked this way). All offsets,
    strides and bounds count elements.

    ```mlir
    %t = sage.load %q[%row, %c0] strides [%ld, %c1] bounds [%n, %d]
        : !sage.ptr<f16> -> tensor<64x128xf16>
    ```

    The view may have up to 3 *leading* dimensions before the tile's two,
    each indexed by a single offset (a batch and a head): with `L` of them
    the offsets, strides and bounds have `L + 2` entries, the leading ones
    first, each adding `offsets[l] * strides[l]` to the address, and the
    whole tile reads 0 unless `0 <= offsets[l] < bounds[l]` for every
    leading `l`. A view over the whole tensor does not change with the
    batch or head a program works on, so the tensor map a TMA copy of it
    needs is built once (a persistent kernel's loop over tiles keeps it):

    ```mlir
    %t = sage.load %k[%b, %h, %col, %c0] strides [%sb, %sh, %sn, %c1]
        bounds [%B, %H, %n, %d] : !sage.ptr<f16> -> tensor<128x128xf16>
    ```

    Copies that are not tensor maps fold the leading dimensions into the
    pointer and the first tile bound (`sage::foldLeadingDims`).

    A load that only feeds a matmul operand becomes a copy straight into
    shared memory (`sagegpu.async_copy` or `sagegpu.tma_load`) in
    `sagegpu-promote-operands`.

    With `sigma16_rows` the rows come in sigma16 order: row `i` of the result
    is row `sigma16Token(i)` of the view (the row index permuted inside every
    16, `include/sage/Layout/Encodings.h`), bounds applying to the row read.
    A pre-pass that stores such a tile writes a copy whose rows are in slot
    order, as `sage.qmatmul`'s `rhs_sigma16` reads it. The result needs a
    multiple of 16 rows.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_PtrType:$ptr, Variadic<I64>:$offsets,
                   Variadic<I64>:$strides, Variadic<I64>:$bounds,
                   UnitAttr:$sigma16_rows);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` `strides` `[` $strides `]` `bounds` `[` $bounds `]`
    (`sigma16_rows` $sigma16_rows^)?
    attr-dict `:` qualified(type($ptr)) `->` type($result)
  }];
}

def Sage_MakeTensorMapOp : Sage_Op<"make_tensor_map", [
    AttrSizedOperandSegments, MemoryEffects<[MemWrite]>]> {
  let summary = "build a TMA tensor map of a strided view on the device";
  let description = [{
    Describes the view `ptr`/`strides`/`bounds` (as `sage.load` reads it) to
    the copy engine, for boxes of `box` elements. Dimension `inner` of the
    2-D tile has unit stride and the other strides span multiples of 16
    bytes. Leading dimensions (the entries of `strides` and `bounds` before
    the last two, at most 3) are dimensions of the map with a box of 1:
    a copy names one index in each (`sagegpu.tma_load`'s `leading`).
    With `typed` (f32 only) the map counts f32 elements instead of bytes
    (copies then name element coordinates): what a bulk reduction needs,
    the copy engine adding values of the map's element type. The map is
    written to the 128 bytes at `scratch + (program * count + slot) * 128`,
    where `program` is the linear program index and `count` the number of
    maps each program builds (the function's `sage.global_scratch` divided by
    128); the launcher allocates that global scratch. Every thread of the
    program must reach the op.

    The copy engine sees the view as 2-D bytes (`inner` extent x rows) with
    a `swizzle`-byte (32, 64 or 128) swizzle mode, and copies `swizzle`
    bytes of the inner dimension per request: a box lands in shared memory
    as slabs `[inner / swizzle][outer][swizzle bytes]`, each row's 16-byte
    chunks XOR-swizzled inside it, which is `#sagegpu.shared<swizzle = S>`
    and the K-major layout wgmma descriptors read with the same swizzle.
    The inner dimension of the box must span whole swizzle widths. Boxes
    past the bounds are zero-filled, element by element, so tails need no
    masking.

    ```mlir
    %m = sage.make_tensor_map %a strides [%k, %c1] bounds [%m, %k]
        box [64, 128] inner 1 swizzle 128 scratch %s[0]
        : !sage.ptr<i8>, !sage.ptr<i8>
    ```

    `sagegpu-promote-operands` creates these for the operand copies of
    matmuls (`sagegpu.tma_load`), hoisted to where their operands are
    defined, so that a loop builds its maps once.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_PtrType:$ptr, Variadic<I64>:$strides,
                   Variadic<I64>:$bounds, Sage_PtrType:$scratch,
                   DenseI64ArrayAttr:$box,
                   ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<1>]>:$inner,
                   I64Attr:$swizzle,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$slot,
                   UnitAttr:$typed);
  let results = (outs Sage_TensorMapType:$result);
  let assemblyFormat = [{
    $ptr `strides` `[` $strides `]` `bounds` `[` $bounds `]` `box` $box
    `inner` $inner `swizzle` $swizzle (`typed` $typed^)? `scratch` $scratch
    `[` $slot `]` attr-dict `:` qualified(type($ptr)) `,`
    qualified(type($scratch))
  }];
  let extraClassDeclaration = [{
    /// Bytes of one tensor map in global memory.
    static constexpr int64_t kBytes = 128;
    /// A box dimension spans at most this many entries (rows, bytes).
    static constexpr int64_t kMaxBoxEntries = 256;
    /// Whether TMA can copy a `box` of `elem` with unit stride along `inner`
    /// into `swizzle`-byte slabs: a 32, 64 or 128-byte swizzle, whole
    /// swizzle widths of the inner dimension and 8 to 256 rows.
    static bool isValidBox(::llvm::ArrayRef<int64_t> box, int64_t inner,
                           ::mlir::Type elem, int64_t swizzle);
    /// The number of leading dimensions (each a box of one element).
    int64_t getNumLeading() { return getStrides().size() - 2; }
    /// The strides and bounds of the tile's two dimensions.
    ::mlir::OperandRange getTileStrides() {
      return getStrides().drop_front(getNumLeading());
    }
    ::mlir::OperandRange getTileBounds() {
      return getBounds().drop_front(getNumLeading());
    }
  }];
}

def Sage_StoreOp : Sage_Op<"store", [AttrSizedOperandSegments,
                                     MemoryEffects<[MemWrite]>]> {
  let summary = "store a tile to a strided view, skipping out-of-bounds";
  let description = [{
    Writes the elements of `value` that are in bounds (same addressing,
    leading dimensions and bounds rule as `sage.load`); the others are
    dropped. With `atomic_add`
    each element is added atomically to memory instead (f32 only), which is
    how programs that share an output (dQ in the backward) combine results.
    With `tma` the tile is written to shared memory and the copy engine
    stores it (`sagegpu.tma_store`), where the target and the view allow it
    (`sagegpu-promote-operands`); otherwise, and in the interpreter, it is a
    plain store. The result is the same either way. Both together are a
    bulk reduction: the copy engine adds the tile (`sagegpu.tma_store add`),
    else per-element atomics do.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_AnyTile:$value, Sage_PtrType:$ptr,
                   Variadic<I64>:$offsets, Variadic<I64>:$strides,
                   Variadic<I64>:$bounds, UnitAttr:$atomic_add, UnitAttr:$tma);
  let assemblyFormat = [{
    (`atomic_add` $atomic_add^)? (`tma` $tma^)? $value `,` $ptr `[` $offsets `]`
    `strides` `[` $strides `]` `bounds` `[` $bounds `]`
    attr-dict `:` type($value) `,` qualified(type($ptr))
  }];
}

//===----------------------------------------------------------------------===//
// Tile construction, broadcasting, reductions
//===----------------------------------------------------------------------===//

def Sage_SplatOp : Sage_Op<"splat", [Pure]> {
  let summary = "a tile with every element equal to a scalar";
  let hasVerifier = 1;
  let arguments = (ins Sage_Scalar:$value);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = "$value attr-dict `:` type($value) `->` type($result)";
}

def Sage_IotaOp : Sage_Op<"iota", [Pure]> {
  let summary = "a tile holding each element's index along one axis";
  let description = [{
    `%r = sage.iota 0 : tensor<64x1xi32>` gives `r[i][j] = i`; axis 1 gives
    `j`. Used with `arith.cmpi` and `arith.select` to build masks (causal
    masking, key tails).
  }];
  let hasVerifier = 1;
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs Sage_I32Tile:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Sage_BroadcastOp : Sage_Op<"broadcast", [Pure,
    DeclareOpInterfaceMethods<Sage_LayoutRelationsOpInterface,
                              ["getTiedTiles", "getSlicedTiles"]>]> {
  let summary = "expand dimensions of size 1";
  let description = [{
    Every dimension of the result equals the source's, or the source has size
    1 there and its values are repeated.
    `sage.broadcast %m : tensor<64x1xf32> -> tensor<64x128xf32>`.

    With `groups m` (a nonzero bit mask, not every bit of the index), one
    dimension is a grouped one instead, the inverse of `sage.reduce`'s
    groups: there the source has extent `2^popcount(m)`, the result a larger
    power of two, and result index `i` reads source index `pext(i, m)` (the
    bits of `i` in `m`, packed).
    `sage.broadcast %s groups 6 : tensor<64x4xf32> -> tensor<64x128xf32>`:
    column `c` takes `%s[., (c / 2) % 4]`.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_AnyTile:$source,
                   OptionalAttr<ConfinedAttr<I32Attr, [IntPositive]>>:$groups);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = [{
    $source (`groups` $groups^)? attr-dict `:` type($source) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The grouped dimension (with `groups`): the one where the source's
    /// extent is neither 1 nor the result's.
    std::optional<unsigned> getGroupedDim();
  }];
}

def Sage_ReduceOp : Sage_Op<"reduce", [Pure,
    DeclareOpInterfaceMethods<Sage_LayoutRelationsOpInterface, ["getSlicedTiles"]>]> {
  let summary = "reduce a tile along one axis, keeping the axis with size 1";
  let description = [{
    `sum`, `max`, `min` or `absmax` (max of |x|) along `axis`. The result has
    the input's element type and shape, with the reduced axis of size 1.
    Sums of f16/bf16 accumulate in f32 and are rounded once; the order of a
    floating-point sum is unspecified. `max`/`min` of a set holding NaN give
    NaN.

    With `groups m` (a nonzero bit mask below the axis's extent, a power of
    two, and not all of its bits) the axis is reduced per group: indices that
    agree on the bits of `m` form one, and the result keeps `2^popcount(m)`
    entries along the axis, group `g` at `g = pext(i, m)` (the bits of `i` in
    `m`, packed). `sage.reduce max %t axis 1 groups 6 : tensor<64x128xf32> ->
    tensor<64x4xf32>` takes the maximum over the columns `c` with equal
    `(c / 2) % 4`: the columns one lane quad member holds in a tensor-core
    accumulator, so that reduction needs no shuffle.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_ReduceKind:$kind, Sage_AnyTile:$input,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$axis,
                   OptionalAttr<ConfinedAttr<I32Attr, [IntPositive]>>:$groups);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = [{
    $kind $input `axis` $axis (`groups` $groups^)? attr-dict `:` type($input)
    `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// SageBwd building blocks
//===----------------------------------------------------------------------===//

def Sage_SmoothOp : Sage_Op<"smooth", [Pure]> {
  let summary = "subtract the mean over the token axis";
  let description = [{
    Returns `x - mean` and `mean`, where `mean` is the f32 average of the
    tile along `axis` (the token axis: 0 when rows are tokens) and has that
    axis of size 1. Both results are f32. This is K-smoothing (SageAttention)
    and Q-smoothing (SageAttention2) on one tile; a mean over a whole
    sequence is a `sage.reduce sum` over its tiles divided by its length.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_FloatTile:$input, ConfinedAttr<I32Attr, [IntNonNegative]>:$axis);
  let results = (outs Sage_F32Tile:$smoothed, Sage_F32Tile:$mean);
  let assemblyFormat = [{
    $input `axis` $axis attr-dict `:` type($input) `->` type($smoothed) `,`
    type($mean)
  }];
}

def Sage_QuantizeOp : Sage_Op<"quantize", [Pure]> {
  let summary = "quantize a tile with a scheme; returns values and scales";
  let description = [{
    Splits the tile into the scheme's granules and, for each granule with
    `Q = scheme.getQuantMax()` (127 for INT8, 255 for the unsigned
    `#sage.uint8`) and `L = scheme.getQuantMin()` (-Q, or 0 unsigned):

    ```
    absmax = max |x|                          (exact)
    scale  = absmax / Q                       (f32, round to nearest)
    scale  = scale < 2^-126 ? 0 : scale       (a subnormal scale is flushed)
    inv    = scale == 0 ? 0 : 1 / scale       (f32, round to nearest)
    q      = clamp(round(x * inv), L, Q)      (product in f32; round per scheme)
    ```

    A computed scale is a normal float or 0, so |x * inv| is at most
    Q (1 + 2^-24)^3 < Q + 1/2 for every x of its granule and the clamp never
    acts: the lowering leaves it out (`sage-decompose`). Flushing matters
    only for granules whose absmax is below Q * 2^-126 (1.5e-36 for 127):
    they quantize to 0, where a subnormal scale's inexact reciprocal would
    otherwise push x * inv far past Q.

    With the optional `scale` operand the given scales are used instead of
    computing them (the forward's P~ takes its per-row scale from the online
    softmax maxima, with no extra reduction); the `scales` result is then
    that operand. With a given scale, `unsaturated` drops the clamp: the
    caller guarantees `L <= round(x * inv) <= Q` (the forward's P~, at
    most p_max, with scale p_max / Q does), and q is unspecified where it
    does not hold. The clamp (of given scales) costs two instructions per
    element. An unsaturated round-to-nearest-even quantize rounds the exact
    product instead, `q = round(x * inv)` with `x * inv` not rounded to f32
    first: the GPU lowering fuses the multiply into the rounding's
    magic-number add (one FMA per element instead of a multiply and an add).

    An all-zero granule (or one holding only -0.0) gives scale 0 and all
    q = 0: no division by zero, no NaN, and dequantization returns zeros.
    A granule holding NaN or infinity gets a NaN or infinite scale, so the
    problem stays visible; its q values are unspecified.
  }];
  let hasVerifier = 1;
  // The scheme decides which float types it accepts.
  let arguments = (ins Sage_AnyFloatTile:$input,
                   Sage_QuantSchemeAttrInterface:$scheme,
                   Optional<Sage_F32Tile>:$scale, UnitAttr:$unsaturated);
  let results = (outs Sage_QuantizedTile:$output, Sage_F32Tile:$scales);
  let assemblyFormat = [{
    $scheme $input (`scale` $scale^)? (`unsaturated` $unsaturated^)? attr-dict `:` type($input)
    (`,` type($scale)^)? `->` type($output) `,` type($scales)
  }];
}

def Sage_DequantizeOp : Sage_Op<"dequantize", [Pure]> {
  let summary = "multiply quantized values by their scales";
  let description = [{
    `x[i][j] = f32(q[i][j]) * scale[granule(i, j)]`, in f32.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_QuantizedTile:$input, Sage_F32Tile:$scales,
                   Sage_QuantSchemeAttrInterface:$scheme);
  let results = (outs Sage_F32Tile:$output);
  let assemblyFormat = [{
    $scheme $input `,` $scales attr-dict `:` type($input) `,` type($scales)
    `->` type($output)
  }];
}

class Sage_MatmulBase<string mnemonic, list<Trait> traits = []>
    : Sage_Op<mnemonic, !listconcat(traits, [Pure,
        OptionalTypesMatchWith<"accumulator type matches result", "result",
                               "acc", "$_self">,
        DeclareOpInterfaceMethods<Sage_LayoutRelationsOpInterface, ["getTiedTiles"]>])> {
  let hasVerifier = 1;
  code extraMatmulDecl = [{
    /// Size of the contracted dimension.
    int64_t getContractionSize() {
      return getLhs().getType().getDimSize(getLhsContractDim());
    }
  }];
}

def Sage_QMatmulOp : Sage_MatmulBase<"qmatmul"> {
  let summary = "quantized matmul: i8 x i8 -> i32, scaled to f32";
  let description = [{
    Contracts `lhs` over dimension `lhs_contract` with `rhs` over
    `rhs_contract`; the result is `M x N` where `M` is the other dimension of
    `lhs` and `N` the other of `rhs`. So `contract(1, 1)` is `lhs * rhs^T`
    (S = Q K^T), `contract(0, 0)` is `lhs^T * rhs` (dV = P^T dO, dK = dS^T Q)
    and `contract(1, 0)` is `lhs * rhs` (dQ = dS K).

    ```
    dot[m][n]    = sum_k lhs[m,k] * rhs[n,k]         (exact, int32)
    result[m][n] = acc[m][n] + f32(dot) * (lhs_scale[m] * rhs_scale[n])
    ```

    Each scale tile has its operand's rank and is either a single value or
    one value per row of the non-contracted dimension; along the contracted
    dimension it must have size 1, because a scale that varies along the
    contraction cannot be factored out of the integer product. The
    contraction may have at most 131072 elements so that the int32
    accumulator cannot overflow (127 * 127 * 131072 < 2^31).

    With `rhs_sigma16` the rhs holds its contraction index in sigma16 order
    (`sage.load`'s `sigma16_rows`): `dot[m][n] = sum_k lhs[m,k] *
    rhs[n,sigma16Slot(k)]`. Then the lowering feeds lhs as a register A
    operand whose fragments follow the accumulator layout (an INT8 P
    quantized from a matmul result packs in-thread, hopper-speed.md section
    6) and reads rhs as it is. It needs a contraction of a multiple of 16
    and lhs contracted over its columns.

    With `lhs_unsigned` lhs holds unsigned bytes in [0, 255] (a
    `#sage.uint8` quantization) and `dot` reads them as such (the tensor
    cores' u8 x s8 form); the contraction may then have at most 65536
    elements (255 * 127 * 65536 < 2^31).

    `using mma_sync` / `using wgmma` records the tensor-core instruction the
    lowering will use (set by `sage-select-mma`).
  }];
  let arguments = (ins Sage_I8Tile:$lhs, Sage_F32Tile:$lhs_scale,
                   Sage_I8Tile:$rhs, Sage_F32Tile:$rhs_scale,
                   Optional<Sage_F32Tile>:$acc,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$lhs_contract_dim,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$rhs_contract_dim,
                   OptionalAttr<Sage_MmaKind>:$mma, UnitAttr:$rhs_sigma16,
                   UnitAttr:$lhs_unsigned);
  let results = (outs Sage_F32Tile:$result);
  let assemblyFormat = [{
    $lhs `[` $lhs_scale `]` `,` $rhs `[` $rhs_scale `]` (`acc` $acc^)?
    `contract` `(` $lhs_contract_dim `,` $rhs_contract_dim `)`
    (`rhs_sigma16` $rhs_sigma16^)? (`lhs_unsigned` $lhs_unsigned^)? (`using` $mma^)? attr-dict `:` type($lhs) `,` type($lhs_scale) `,` type($rhs) `,` type($rhs_scale)
    `->` type($result)
  }];
  let extraClassDeclaration = extraMatmulDecl;
}

def Sage_MatmulOp : Sage_MatmulBase<"matmul"> {
  let summary = "matmul accumulating in f32 (16-bit inputs) or i32 (i8 inputs)";
  let description = [{
    Contraction as in `sage.qmatmul`; no scales, and the accumulator is the
    tensor cores' own:

    - f16 x f16 or bf16 x bf16, products and sums in f32:
      `result = acc + sum_k f32(lhs) * f32(rhs)`. SageBwd keeps exactly one
      of its seven matmuls in 16 bits: dP = dO V^T.
    - i8 x i8 into i32: `result = acc + sum_k lhs * rhs`, exact, with sums
      that wrap modulo 2^32 as the tensor cores' do. One product may contract
      at most 131072 elements (as `sage.qmatmul`), so that it alone cannot
      overflow; a loop that accumulates K = 131072 elements or fewer of
      operands in [-127, 127] never wraps. An INT8 GEMM accumulates its whole
      contraction this way and scales once, after the loop.

    With an accumulator operand the lowering accumulates in the tensor cores
    (the accumulator is the instruction's C operand): no second tile of
    partial products is live.
  }];
  let arguments = (ins Sage_MatmulInputTile:$lhs, Sage_MatmulInputTile:$rhs,
                   Optional<Sage_MatmulAccTile>:$acc,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$lhs_contract_dim,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$rhs_contract_dim,
                   OptionalAttr<Sage_MmaKind>:$mma);
  let results = (outs Sage_MatmulAccTile:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`acc` $acc^)?
    `contract` `(` $lhs_contract_dim `,` $rhs_contract_dim `)`
    (`using` $mma^)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let extraClassDeclaration = extraMatmulDecl;
}

def Sage_SoftmaxUpdateOp : Sage_Op<"softmax_update", [Pure,
    AllTypesMatch<["logits", "p"]>,
    AllTypesMatch<["row_max", "row_sum", "new_max", "new_sum", "alpha",
                   "p_max"]>]> {
  let summary = "one online-softmax step in the exp2 domain";
  let description = [{
    For logits `s` (`M x N`, f32) and running row statistics `m`, `l`
    (`M x 1`), with `t = s * scale` (log2 units: the softmax scale and
    log2(e) are folded into `scale` or into Q beforehand):

    ```
    rowmax  = max_j t[:, j]
    new_max = max(m, rowmax)
    base    = new_max == -inf ? 0 : new_max       (fully masked rows)
    alpha   = exp2(m - base)                      (rescales l and O)
    p       = exp2(t - base)
    new_sum = alpha * l + sum_j p[:, j]
    p_max   = exp2(rowmax - base)                 (= max_j p: P's per-row scale * 127)
    ```

    A row whose logits so far are all -inf keeps `new_max = -inf`, `p = 0`,
    `alpha = 0`, `new_sum = 0`, `p_max = 0`: no NaN.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_F32Tile:$logits, Sage_F32Tile:$row_max,
                   Sage_F32Tile:$row_sum, DefaultValuedAttr<F32Attr, "1.0">:$scale);
  let results = (outs Sage_F32Tile:$p, Sage_F32Tile:$new_max,
                  Sage_F32Tile:$new_sum, Sage_F32Tile:$alpha,
                  Sage_F32Tile:$p_max);
  let assemblyFormat = [{
    $logits `,` $row_max `,` $row_sum (`scale` $scale^)? attr-dict `:`
    type($logits) `,` type($row_max)
  }];
}

#endif // SAGE_DIALECT_SAGE_IR_SAGEOPS_TD
