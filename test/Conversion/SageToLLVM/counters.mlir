// A counter's old value, used: thread 0 stores it to its shared scratch
// slot, the program meets, and every thread loads it.
// RUN: sage-opt %s --sagegpu-allocate-shared-memory --sagegpu-insert-barriers --convert-sage-to-llvm | FileCheck %s

module attributes {sage.target = "sm_90a"} {
  // CHECK-LABEL: func.func @ticket
  func.func @ticket(%c: !sage.ptr<i32>, %out: !sage.ptr<i32>) -> i32 {
    %one = arith.constant 1 : i32
    // CHECK: nvvm.barrier0
    // CHECK: llvm.inline_asm has_side_effects {{.*}}@p atom.acq_rel.gpu.global.add.u32 old, [$1], $2; @p st.shared.b32 [$3], old; }", "r,l,r,r"
    // CHECK-NEXT: nvvm.barrier0
    // CHECK: %[[OLD:.*]] = llvm.load {{.*}} : !llvm.ptr<3> -> i32
    %old = sage.counter_add %c, %one : !sage.ptr<i32>
    // CHECK: return %[[OLD]]
    return %old : i32
  }
}
