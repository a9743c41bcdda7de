//===- SageGPUOps.td - sagegpu operations -------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "sage/Dialect/SageGPU/IR/SageGPUAttrs.td"
include "sage/Dialect/SageGPU/IR/SageGPUTypes.td"
include "sage/Dialect/Sage/IR/SageTypes.td"

class SageGPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<SageGPU_Dialect, mnemonic, traits>;

def SageGPU_ConvertLayoutOp : SageGPU_Op<"convert_layout", [Pure,
    SameOperandsAndResultShape, SameOperandsAndResultElementType]> {
  let summary = "redistribute a tile over the program's threads";
  let description = [{
    The same values in another encoding. The lowering classifies the change
    from the two linear layouts: a renaming of each thread's registers, warp
    shuffles when only lanes change, or a round trip through shared memory.
    A conversion of a `sage.load` used nowhere else canonicalizes to the
    load in the new encoding (each thread loads what it needs).
    `sagegpu-remove-layout-conversions` deletes the ones that propagation
    makes redundant.

    ```mlir
    %b = sagegpu.convert_layout %a : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #blocked>
    ```
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

def SageGPU_SharedTile : Type<CPred<"::llvm::isa<::mlir::sagegpu::SharedTileType>($_self) && "
    "!::llvm::cast<::mlir::sagegpu::SharedTileType>($_self).isMbarrier() && "
    "!::llvm::cast<::mlir::sagegpu::SharedTileType>($_self).isRing()">,
    "shared-memory tile", "::mlir::sagegpu::SharedTileType">;
def SageGPU_AnyShared : Type<CPred<"::llvm::isa<::mlir::sagegpu::SharedTileType>($_self)">,
    "shared-memory buffer", "::mlir::sagegpu::SharedTileType">;
def SageGPU_Mbarrier : Type<CPred<"::llvm::isa<::mlir::sagegpu::SharedTileType>($_self) && "
    "::llvm::cast<::mlir::sagegpu::SharedTileType>($_self).isMbarrier()">,
    "shared-memory mbarrier", "::mlir::sagegpu::SharedTileType">;

// Every op that touches shared memory says so, so that nothing moves one
// across another (the barrier pass reads the order the IR gives).
def SageGPU_SharedResource : Resource<"::mlir::sagegpu::SharedMemoryResource">;

def SageGPU_LocalAllocOp : SageGPU_Op<"local_alloc", [
    MemoryEffects<[MemAlloc<SageGPU_SharedResource>,
                   MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "name a buffer of shared memory, optionally filled from registers";
  let description = [{
    A shared-memory tile, live from here to its last use. With `init`, the
    threads store their elements of the register tile into it (the tile's
    encoding says which they hold, the buffer's which bytes they go to).
    `offset` (bytes from the start of the program's shared memory) is set by
    `sagegpu-allocate-shared-memory`; the lowering needs it.

    ```mlir
    %a = sagegpu.local_alloc %t : tensor<64x128xi8, #blocked> -> !sagegpu.smem<64x128xi8, #shared>
    %b = sagegpu.local_alloc {offset = 8192 : i64} : !sagegpu.smem<64x128xi8, #shared>
    ```
  }];
  let arguments = (ins Optional<Sage_AnyTile>:$init, OptionalAttr<I64Attr>:$offset);
  let results = (outs SageGPU_AnyShared:$result);
  let assemblyFormat = [{
    ($init^ `:` type($init) `->`)? attr-dict qualified(type($result))
  }];
  let hasVerifier = 1;
}

def SageGPU_RingSlotOp : SageGPU_Op<"ring_slot", [Pure]> {
  let summary = "one buffer of a ring of shared buffers";
  let description = [{
    Slot `index` (0 to the ring's size - 1) of a ring of tiles
    (`!sagegpu.smem<S x R x C>` -> `!sagegpu.smem<R x C>`, same encoding)
    or of mbarriers (`!sagegpu.smem<S x i64>` -> `!sagegpu.smem<1xi64>`):
    the bytes at `index` times the slot's size from the ring's start. A
    pipelined loop (`sagegpu-pipeline`) takes the slot of an iteration's
    stage. Analyses that place or order shared memory count a use of a
    slot as a use of its whole ring.

    ```mlir
    %k = sagegpu.ring_slot %ring[%i] : !sagegpu.smem<2x64x64xi8, #shared> -> !sagegpu.smem<64x64xi8, #shared>
    ```
  }];
  let arguments = (ins SageGPU_AnyShared:$ring, I32:$index);
  let results = (outs SageGPU_AnyShared:$result);
  let assemblyFormat = [{
    $ring `[` $index `]` attr-dict `:` qualified(type($ring)) `->`
    qualified(type($result))
  }];
  let hasVerifier = 1;
}

def SageGPU_LocalLoadOp : SageGPU_Op<"local_load", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>]>]> {
  let summary = "read a shared-memory tile into registers";
  let description = [{
    Each thread loads the elements its result encoding gives it, in vectors
    where consecutive registers hold consecutive bytes of the buffer.
  }];
  let arguments = (ins SageGPU_SharedTile:$source);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = "$source attr-dict `:` qualified(type($source)) `->` type($result)";
  let hasVerifier = 1;
}

def SageGPU_LocalStoreOp : SageGPU_Op<"local_store", [
    MemoryEffects<[MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "write a register tile into a shared-memory tile";
  let arguments = (ins Sage_AnyTile:$value, SageGPU_SharedTile:$dest);
  let assemblyFormat = "$value `,` $dest attr-dict `:` type($value) `->` qualified(type($dest))";
  let hasVerifier = 1;
}

def SageGPU_AsyncCopyOp : SageGPU_Op<"async_copy", [AttrSizedOperandSegments,
    MemoryEffects<[MemRead, MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "copy a tile of a strided 2-D view into shared memory with cp.async";
  let description = [{
    The tile at `ptr[offsets]` of the view with `strides` and `bounds` (as
    `sage.load` reads it) moves into `dest` in 16-byte pieces, each thread
    issuing some; pieces past the bounds are zero-filled. The copies join the
    thread's current group: `sagegpu.async_commit_group` closes it and
    `sagegpu.async_wait` waits for all but the newest groups. The
    contiguous dimension of `dest` must be the view's unit-stride dimension,
    and every piece 16-byte aligned (`sagegpu-promote-operands` proves it
    before choosing this copy).
  }];
  let arguments = (ins Sage_PtrType:$ptr, Variadic<I64>:$offsets,
                   Variadic<I64>:$strides, Variadic<I64>:$bounds,
                   SageGPU_SharedTile:$dest);
  let assemblyFormat = [{
    $ptr `[` $offsets `]` `strides` `[` $strides `]` `bounds` `[` $bounds `]`
    `into` $dest attr-dict `:` qualified(type($ptr)) `->` qualified(type($dest))
  }];
  let hasVerifier = 1;
}

def SageGPU_AsyncCommitGroupOp : SageGPU_Op<"async_commit_group"> {
  let summary = "close the running thread's group of cp.async copies";
  let assemblyFormat = "attr-dict";
}

def SageGPU_AsyncWaitOp : SageGPU_Op<"async_wait", [
    MemoryEffects<[MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "wait until at most `pending` groups of this thread's cp.async copies are in flight";
  let description = [{
    After it, the thread's own copies of the older groups have landed; other
    threads see them after a barrier (`sagegpu-insert-barriers`).
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntNonNegative]>:$pending);
  let assemblyFormat = "$pending attr-dict";
}

def SageGPU_MbarrierInitOp : SageGPU_Op<"mbarrier_init", [
    MemoryEffects<[MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "one thread initialises an mbarrier expecting `count` arrivals";
  let arguments = (ins SageGPU_Mbarrier:$barrier,
                   ConfinedAttr<I32Attr, [IntPositive]>:$count);
  let assemblyFormat = "$barrier `,` $count attr-dict `:` qualified(type($barrier))";
}

// Waiting also orders what the barrier's arrivals wrote (a TMA box) before
// the ops after it, so it counts as a write: nothing may move across it.
def SageGPU_MbarrierWaitOp : SageGPU_Op<"mbarrier_wait", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>,
                   MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "wait until the mbarrier's phase `phase` (0 or 1) completes";
  let arguments = (ins SageGPU_Mbarrier:$barrier, I32:$phase);
  let assemblyFormat = "$barrier `,` $phase attr-dict `:` qualified(type($barrier))";
}

// Arriving publishes the thread's earlier shared-memory accesses (release):
// it orders them like a write.
def SageGPU_MbarrierArriveOp : SageGPU_Op<"mbarrier_arrive", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>,
                   MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "every thread that runs it arrives once on the mbarrier";
  let description = [{
    `mbarrier.arrive` by each executing thread: the barrier's current phase
    completes when its expected count of arrivals (its `mbarrier_init`
    count) have arrived. The consumer warpgroups of a
    `sagegpu.warp_specialize` free a ring slot this way once every one of
    their threads has finished reading it.
  }];
  let arguments = (ins SageGPU_Mbarrier:$barrier);
  let assemblyFormat = "$barrier attr-dict `:` qualified(type($barrier))";
}

def SageGPU_MbarrierInvalOp : SageGPU_Op<"mbarrier_inval", [
    MemoryEffects<[MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "one thread invalidates an mbarrier so its bytes can be reused";
  let arguments = (ins SageGPU_Mbarrier:$barrier);
  let assemblyFormat = "$barrier attr-dict `:` qualified(type($barrier))";
}

def SageGPU_TmaLoadOp : SageGPU_Op<"tma_load", [
    MemoryEffects<[MemRead, MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "the copy engine moves a box of a tensor map into shared memory";
  let description = [{
    One thread arms `barrier` with the box's bytes and asks the copy engine
    for the box of `map` at (`outer`, `inner`) (element indices of the
    view's strided and unit-stride dimensions); the bytes land in `dest`
    with its encoding's swizzle and complete the barrier's current phase,
    one copy per swizzle-wide slab of the inner dimension. Out-of-bounds
    elements read as zero. The map's box is the tile, its inner dimension
    the encoding's contiguous one and its swizzle the encoding's. A map
    with leading dimensions (a batch, a head) takes one index in each,
    `leading`, outermost first.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_TensorMapType:$map, Variadic<I64>:$leading,
                   I64:$outer, I64:$inner, SageGPU_Mbarrier:$barrier,
                   SageGPU_SharedTile:$dest);
  let assemblyFormat = [{
    $map `[` $outer `,` $inner `]` (`leading` `[` $leading^ `]`)? `,` $barrier
    `into` $dest
    attr-dict `:` qualified(type($barrier)) `,` qualified(type($dest))
  }];
}

def SageGPU_BulkLoadOp : SageGPU_Op<"bulk_load", [
    MemoryEffects<[MemRead, MemWrite<SageGPU_SharedResource>]>]> {
  let summary = "the copy engine moves contiguous elements into shared memory";
  let description = [{
    One thread arms `barrier` with the tile's bytes and asks the copy engine
    for as many contiguous elements from `ptr[offset]` (an element index) as
    `dest` holds (`cp.async.bulk` with `complete_tx`); they land in `dest`,
    unswizzled, and complete the barrier's current phase, as a
    `sagegpu.tma_load` does, but with no tensor map and **no bounds
    check**: whoever creates the op proves the elements lie inside the
    tensor (`sagegpu-promote-operands` does for a view that ends with the
    tile, from an offset that integer range analysis shows to be >= 0). The tile is a row or a column (one dimension 1; an unswizzled
    tile's rows are whole 16-byte pieces), and the address must be 16-byte
    aligned.

    ```mlir
    sagegpu.bulk_load %scales[%col], %bar into %tile
        : !sage.ptr<f32>, !sagegpu.shared<1xi64>, !sagegpu.shared<1x128xf32, #plain>
    ```
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_PtrType:$ptr, I64:$offset,
                   SageGPU_Mbarrier:$barrier, SageGPU_SharedTile:$dest);
  let assemblyFormat = [{
    $ptr `[` $offset `]` `,` $barrier `into` $dest attr-dict `:`
    qualified(type($ptr)) `,` qualified(type($barrier)) `,` qualified(type($dest))
  }];
}

def SageGPU_TmaStoreOp : SageGPU_Op<"tma_store", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>, MemWrite]>]> {
  let summary = "the copy engine stores a shared tile to the box of a tensor map";
  let description = [{
    One thread asks the copy engine to write `source` to the box of `map` at
    (`outer`, `inner`), one copy per swizzle-wide slab of the inner
    dimension (`cp.async.bulk.tensor ... .bulk_group`), commits them and
    waits until the engine has read `source` (`cp.async.bulk.wait_group.read
    0`): after the op its bytes may be written again (after a barrier, for
    the other threads; `sagegpu-insert-barriers` counts the read here and
    puts a fenced barrier between the threads' writes of `source` and the
    op). Elements of the box outside the tensor are not written. The map's
    box is the tile and its leading indices `leading`, as for
    `sagegpu.tma_load`. With `add` the engine adds the tile to memory
    instead (a bulk reduction, `cp.reduce.async.bulk.tensor ... .add`:
    each element's addition is atomic, done at L2), which is how programs
    that share an output combine f32 results without a per-thread atomic.
  }];
  let hasVerifier = 1;
  let arguments = (ins Sage_TensorMapType:$map, Variadic<I64>:$leading,
                   I64:$outer, I64:$inner, SageGPU_SharedTile:$source,
                   UnitAttr:$add);
  let assemblyFormat = [{
    (`add` $add^)? $source `into` $map `[` $outer `,` $inner `]`
    (`leading` `[` $leading^ `]`)? attr-dict
    `:` qualified(type($source))
  }];
}

def SageGPU_BarrierOp : SageGPU_Op<"barrier"> {
  let summary = "the threads of the program, or of its warp role, meet";
  let description = [{
    Inserted by `sagegpu-insert-barriers` between shared-memory accesses of
    different threads that must not overlap. All threads of the program meet
    (`bar.sync 0`), except inside a region of `sagegpu.warp_specialize`:
    there only that region's warps do (the consumers at named barrier 1, the
    producer at 2, with their thread counts), as the other role runs other
    code. With `fence_async`, the threads
    first make their generic-proxy shared-memory writes visible to the async
    proxy (`fence.proxy.async.shared::cta`), which wgmma and TMA read
    through.
  }];
  let arguments = (ins UnitAttr:$fence_async);
  let assemblyFormat = "attr-dict";
}

def SageGPU_WarpgroupTurnOp : SageGPU_Op<"warpgroup_turn"> {
  let summary = "consumer warpgroups take turns (ping-pong): wait for or pass the turn";
  let description = [{
    The `warpgroups` consumer warpgroups of a warp-specialised kernel take
    turns, in order, issuing a loop's matmuls (FA3's ping-pong), so that one
    warpgroup's softmax runs while the next one's matmuls keep the tensor
    cores busy. Warpgroup `g` waits for its turn at named barrier
    `kFirstBarrier + g` (`bar.sync id, 256`); with `pass` it hands the turn
    to warpgroup `(g + 1) % warpgroups` (`bar.arrive id', 256`). With `only
    = k` only warpgroup `k` does it (the last one passes the first turn to
    warpgroup 0 before the loop; warpgroup 0 takes the extra turn after it,
    so that every barrier's arrivals are matched). `sagegpu-warp-specialize`
    places them for loops marked `sage.ping_pong`.

    ```mlir
    sagegpu.warpgroup_turn {warpgroups = 2 : i32}         // my turn
    %s = sagegpu.dot ...
    %o = sagegpu.dot ...
    sagegpu.warpgroup_turn {pass, warpgroups = 2 : i32}   // the next one's
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<2>, IntMaxValue<4>]>:$warpgroups,
                   UnitAttr:$pass, OptionalAttr<I32Attr>:$only);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The first named barrier of the turns (0 is the program's, 1 and 2
    /// the warp roles').
    static constexpr int64_t kFirstBarrier = 3;
  }];
}

//===----------------------------------------------------------------------===//
// Tensor cores and tile plumbing
//===----------------------------------------------------------------------===//

def SageGPU_DotOp : SageGPU_Op<"dot", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>]>,
    TypesMatchWith<"accumulator type matches result", "result", "acc", "$_self">]> {
  let summary = "tensor-core product of prepared operands into an accumulator";
  let description = [{
    `result = acc + sum_k lhs[m, k] * rhs[n, k]` with the contraction
    dimensions given as in `sage.qmatmul`: i8 operands accumulate exactly in
    i32, f16/bf16 in f32. `lhs` is a shared tile (mma.sync and wgmma read it
    from there) or a register tile in the `#sagegpu.dot_op` A encoding of
    the result's `#sagegpu.mma` (wgmma's register-A form, or mma.sync's
    fragments); `rhs` is a shared tile. Shared operands are K-major: their
    encoding's contiguous dimension is the contracted one; on wgmma a
    swizzled 16-bit `rhs` may instead be MN-major (contiguous along N, as
    V is in attention's P·V: the instruction's transposed-B form). A register A
    with `sigma16` feeds physical k slot `s` from its logical column
    `sigma16Token(s)`, and `rhs` is read as it is: then
    `result = acc + sum_k lhs[m, k] * rhs[n, sigma16Slot(k)]`, the contract
    of `sage.qmatmul`'s `rhs_sigma16`. With `lhs_unsigned` an i8 lhs holds
    unsigned bytes (`sage.qmatmul`'s `lhs_unsigned`: u8 x s8 products).
    The accumulator and result carry the instruction's `#sagegpu.mma`
    encoding, which chooses mma.sync or wgmma and tiles it over the warps.
    Scales and other epilogues are ordinary tile ops on the result.

    mma.sync is synchronous: its result is ready when the op returns. wgmma
    is asynchronous: the op issues the instructions as one wgmma group per
    warpgroup (fence, wgmma..., commit) and its result stays *in flight*,
    its registers still being written and its shared operands still being
    read, until a `sagegpu.dot_wait` completes it. So the result of a
    wgmma dot may only be used by `sagegpu.dot_wait`, whose results are the
    readable values.

    ```mlir
    %d = sagegpu.dot %a, %b, %zero contract(1, 1)
        : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared>
          -> tensor<64x64xi32, #mma>
    ```
  }];
  let arguments = (ins AnyType:$lhs, SageGPU_SharedTile:$rhs, Sage_AnyTile:$acc,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$lhs_contract_dim,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$rhs_contract_dim,
                   UnitAttr:$lhs_unsigned);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $acc `contract` `(` $lhs_contract_dim `,` $rhs_contract_dim `)`
    (`lhs_unsigned` $lhs_unsigned^)? attr-dict `:` qualified(type($lhs)) `,` qualified(type($rhs)) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The instruction family the accumulator encoding names.
    ::mlir::sage::MmaKind getMmaKind();
    /// Whether `rhs` is read MN-major (wgmma's transposed B: a swizzled
    /// 16-bit tile whose contiguous dimension is not the contracted one).
    bool isMNMajorRhs();
  }];
}

// A wait orders shared memory: the dots' reads end there, so the op reads
// and writes the shared resource (never removed or moved as dead code, even
// without operands).
def SageGPU_DotWaitOp : SageGPU_Op<"dot_wait", [
    MemoryEffects<[MemRead<SageGPU_SharedResource>,
                   MemWrite<SageGPU_SharedResource>]>,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wait for in-flight wgmma dots; their results become readable";
  let description = [{
    Waits until at most `pendings` of the running warpgroup's most recent
    wgmma groups (one per `sagegpu.dot` on wgmma, in program order) are in
    flight (`wgmma.wait_group.sync.aligned pendings`). Its operands are
    results of wgmma `sagegpu.dot`s whose groups are older than those it
    lets stay in flight, or the results of `scf.for` loops that carry one
    out (an accumulator left in flight from the last iteration); its results
    are the same values, readable from here on. Without operands it only
    bounds the groups in flight: in a loop that accumulates into a carried,
    in-flight accumulator (`sagegpu-pipeline`) `pendings = 1` completes the
    last iteration's group, so that its shared operands may be refilled while
    this iteration's runs. Until then the dots' shared operands are still being read
    (`sagegpu-allocate-shared-memory` keeps them live, and
    `sagegpu-insert-barriers` counts their reads here as well as at the
    dot). The lowering ties every 32-bit register of the operands to the
    wait, so that nothing reads or writes them across it.

    With `fenced`, a `fence.acq_rel.cta` precedes the wait in PTX. ptxas
    otherwise hoists a wait that has work scheduled before it as far up as
    it can, ahead of the work that was to run while the dots do (the
    softmax under FlashAttention's P·V); it moves no instruction across the
    fence. `sagegpu-promote-operands` sets it on the wait of a dot whose
    register A a loop carries.

    ```mlir
    %s = sagegpu.dot %q, %k, %zero contract(1, 1)
        : !sagegpu.smem<64x128xi8, #shared>, !sagegpu.smem<64x128xi8, #shared>
          -> tensor<64x64xi32, #wgmma>
    // ... work independent of %s runs while the wgmma does ...
    %r = sagegpu.dot_wait %s {pendings = 0 : i32} : tensor<64x64xi32, #wgmma>
    ```
  }];
  let arguments = (ins Variadic<Sage_AnyTile>:$inputs,
                   ConfinedAttr<I32Attr, [IntNonNegative]>:$pendings,
                   UnitAttr:$fenced);
  let results = (outs Variadic<Sage_AnyTile>:$outputs);
  let assemblyFormat = "$inputs attr-dict (`:` type($inputs)^)?";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Warp specialisation
//===----------------------------------------------------------------------===//

def SageGPU_WarpSpecializeOp : SageGPU_Op<"warp_specialize", [
    RecursiveMemoryEffects, NoRegionArguments,
    SingleBlockImplicitTerminator<"WarpYieldOp">]> {
  let summary = "a producer warpgroup and the consumer warpgroups run apart";
  let description = [{
    The program runs with one more warpgroup than its `sage.num_warps`: the
    consumer warpgroups (the program's warps, threads 0 to 32 * num_warps -
    1, which every tile layout is written for) run `consumers`; the extra
    warpgroup, the producer (the next 128 threads), runs `producer`. The
    producer issues copies (one elected thread of it), waits for slots that
    the consumers freed and holds no tiles, so it gives registers back
    (`setmaxnreg.dec` to `producer_registers`) and the consumers take them
    (`setmaxnreg.inc` to `consumer_registers`): 128 * producer_registers +
    32 * num_warps * consumer_registers must fit the 65536 registers of an
    SM. The two roles meet only through mbarriers set up before the op
    (full: the copy engine completes them; empty: the consumers arrive) and
    never at a program-wide barrier: `sagegpu.barrier` in a region orders
    that role's warps only. Built by `sagegpu-warp-specialize` from a loop
    marked `sage.warp_specialize`; it is the last op of its function before
    the return.

    ```mlir
    sagegpu.warp_specialize producer(registers = 40) {
      scf.for %k = %c0 to %K step %c64 : i32 {
        sagegpu.mbarrier_wait %empty_slot, %free_phase : !sagegpu.smem<1xi64>
        sagegpu.tma_load %map[%row, %k64], %full_slot into %ring_slot : ...
      }
    } consumers(registers = 232) {
      // the rest of the kernel: wait full, dot, arrive empty, epilogue
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<24>, IntMaxValue<256>]>:$producer_registers,
                   ConfinedAttr<I32Attr, [IntMinValue<24>, IntMaxValue<256>]>:$consumer_registers);
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumers);
  let assemblyFormat = [{
    `producer` `(` `registers` `=` $producer_registers `)` $producer
    `consumers` `(` `registers` `=` $consumer_registers `)` $consumers
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The producer is one warpgroup (setmaxnreg works on warpgroups).
    static constexpr int64_t kProducerThreads = 128;
    /// The threads of the consumer warpgroups: the program's warps.
    int64_t getConsumerThreads() { return getConsumerThreadsOf(*this); }
    /// The consumer threads of a warp-specialised kernel holding `op`:
    /// 32 x the module's sage.num_warps.
    static int64_t getConsumerThreadsOf(::mlir::Operation *op);
  }];
}

def SageGPU_WarpYieldOp : SageGPU_Op<"warp_yield", [
    Pure, Terminator, HasParent<"WarpSpecializeOp">]> {
  let summary = "ends a region of sagegpu.warp_specialize";
  let assemblyFormat = "attr-dict";
}

def SageGPU_TransOp : SageGPU_Op<"trans", [Pure]> {
  let summary = "transpose a tile";
  let description = [{
    `result[c][r] = source[r][c]`. The two encodings are independent, so the
    lowering goes through shared memory; it serves small tiles such as a
    column of per-token scales that a matmul epilogue needs as a row. A
    transposed `sage.load` canonicalizes to a load of the transposed view.
  }];
  let hasCanonicalizer = 1;
  let arguments = (ins Sage_AnyTile:$source);
  let results = (outs Sage_AnyTile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUOPS_TD
