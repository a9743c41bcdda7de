// RUN: sage-opt %s --split-input-file --convert-sage-to-llvm | FileCheck %s

// CHECK-LABEL: func.func @ids
// CHECK-SAME: (%[[P:.*]]: !llvm.ptr<1>, %[[OFF:.*]]: i64) -> (!llvm.ptr<1>, i32, i32, i32, i32)
func.func @ids(%p: !sage.ptr<bf16>, %off: i64) -> (!sage.ptr<bf16>, i32, i32, i32, i32) {
  // CHECK: nvvm.read.ptx.sreg.ctaid.x : i32
  %0 = sage.program_id 0
  // CHECK: nvvm.read.ptx.sreg.ctaid.y : i32
  %1 = sage.program_id 1
  // CHECK: nvvm.read.ptx.sreg.ctaid.z : i32
  %2 = sage.program_id 2
  // CHECK: nvvm.read.ptx.sreg.nctaid.x : i32
  %3 = sage.num_programs 0
  // Offsets count elements: the GEP is typed by the pointee.
  // CHECK: %[[Q:.*]] = llvm.getelementptr %[[P]][%[[OFF]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
  %q = sage.addptr %p, %off : !sage.ptr<bf16>
  // CHECK: return %[[Q]]
  return %q, %0, %1, %2, %3 : !sage.ptr<bf16>, i32, i32, i32, i32
}

// -----

// A cluster barrier: arrive (release), then wait (acquire), every thread.
module attributes {sage.target = "sm_90a", sage.num_ctas = 4 : i32} {
  // CHECK-LABEL: func.func @cluster
  func.func @cluster() {
    // CHECK: nvvm.cluster.arrive {aligned}
    // CHECK-NEXT: nvvm.cluster.wait {aligned}
    sage.cluster_barrier
    return
  }
}

// -----

// Programmatic dependent launch: the wait and the signal, every thread.
module attributes {sage.target = "sm_90a"} {
  // CHECK-LABEL: func.func @grid_dependency
  func.func @grid_dependency() {
    // CHECK: nvvm.griddepcontrol launch_dependents
    sage.launch_dependents
    // CHECK-NEXT: nvvm.griddepcontrol wait
    sage.grid_dependency_wait
    return
  }
}

// -----

// Counters: thread 0 adds (acq_rel at GPU scope) after a barrier; an unused
// old value is not handed over. A wait: thread 0 polls with acquire loads,
// then every thread fences the proxies and meets the others.
module attributes {sage.target = "sm_90a"} {
  // CHECK-LABEL: func.func @counters
  // CHECK-SAME: sage.early_launch
  func.func @counters(%c: !sage.ptr<i32>, %n: i32) {
    // CHECK: nvvm.read.ptx.sreg.tid.x
    // CHECK: llvm.ptrtoint
    // CHECK: nvvm.barrier0
    // CHECK: llvm.inline_asm has_side_effects {{.*}}"{ .reg .pred p; .reg .b32 old; setp.eq.u32 p, $0, 0; @p atom.acq_rel.gpu.global.add.u32 old, [$1], $2; }", "r,l,r"
    // CHECK-NOT: st.shared
    %old = sage.counter_add %c, %n : !sage.ptr<i32>
    // CHECK: nvvm.read.ptx.sreg.tid.x
    // CHECK: llvm.inline_asm has_side_effects {{.*}}ld.acquire.gpu.global.b32 v, [$1];{{.*}}nanosleep.u32 64;
    // CHECK-NEXT: llvm.inline_asm has_side_effects {{.*}}"fence.proxy.async.global;"
    // CHECK-NEXT: nvvm.barrier0
    sage.counter_wait %c, %n : !sage.ptr<i32>
    return
  }
}

// -----

// A kernel without waits is not marked for an early launch.
module attributes {sage.target = "sm_90a"} {
  // CHECK-LABEL: func.func @signals_only
  // CHECK-NOT: sage.early_launch
  // CHECK: return
  func.func @signals_only(%c: !sage.ptr<i32>, %n: i32) {
    %old = sage.counter_add %c, %n : !sage.ptr<i32>
    return
  }
}
