//===- SageGPUTypes.td - sagegpu types ----------------------*- tablegen -*-===//

#ifndef SAGE_DIALECT_SAGEGPU_IR_SAGEGPUTYPES_TD
#define SAGE_DIALECT_SAGEGPU_IR_SAGEGPUTYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "sage/Dialect/SageGPU/IR/SageGPUDialect.td"

def SageGPU_SharedTileType : TypeDef<SageGPU_Dialect, "SharedTile"> {
  let mnemonic = "smem";
  let summary = "a tile that lives in the program's shared memory";
  let description = [{
    A buffer of shared memory holding a statically shaped tile, named by
    `sagegpu.local_alloc`. Its encoding, `#sagegpu.shared`, says where each
    element sits (no swizzle, or a 32/64/128-byte swizzle with one dimension
    contiguous), which is what wgmma descriptors, fragment loads, cp.async
    and TMA agree on. A rank-3 buffer with an encoding is a ring of
    `shape[0]` such tiles, one after the other (a pipelined loop's stages;
    `sagegpu.ring_slot` names one). A rank-1 `i64` buffer without encoding
    holds mbarriers, one per element.

    Values of this type are the IR's account of shared memory: passes move
    the copies that fill them (pipelining), `sagegpu-allocate-shared-memory`
    gives each a byte offset from its liveness, and
    `sagegpu-insert-barriers` orders the threads' accesses to them.

    ```mlir
    !sagegpu.smem<64x128xi8, #sagegpu.shared<swizzle = 0, bits = 8>>
    !sagegpu.smem<2x64x128xi8, #sagegpu.shared<swizzle = 128, bits = 8>>
    !sagegpu.smem<1xi64>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "::mlir::Type":$elementType,
                        "::mlir::Attribute":$encoding);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumElements() const;
    /// Bytes the buffer occupies.
    int64_t getSizeInBytes() const;
    /// The element offset -> (row, col) map (rank-2 tiles with an encoding).
    ::mlir::sage::layout::LinearLayout getLinearLayout() const;
    bool isMbarrier() const { return !getEncoding(); }
    /// A ring of tiles (rank 3 with an encoding).
    bool isRing() const { return getEncoding() && getShape().size() == 3; }
  }];
}

#endif // SAGE_DIALECT_SAGEGPU_IR_SAGEGPUTYPES_TD
