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
