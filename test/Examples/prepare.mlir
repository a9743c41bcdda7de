// The example kernels parse, verify and go through the sage-prepare
// pipeline: after it no composite op is left.
// RUN: sage-opt %S/../../examples/quant_matmul.mlir --sage-prepare='arch=sm_80 num-warps=8' | FileCheck %s --check-prefix=QMM
// RUN: sage-opt %S/../../examples/sagebwd_forward.mlir --sage-prepare | FileCheck %s --check-prefix=FWD

// QMM: module attributes {sage.num_warps = 8 : i32, sage.target = "sm_80"}
// QMM-LABEL: func.func @quant_matmul
// QMM-NOT: sage.quantize
// QMM: sage.reduce absmax
// QMM: math.roundeven
// QMM: sage.qmatmul
// QMM: sage.store

// FWD-LABEL: func.func @sagebwd_forward
// FWD-NOT: sage.softmax_update
// FWD-NOT: sage.quantize
// FWD: scf.for
// FWD: sage.qmatmul {{.*}} contract(1, 1)
// FWD: sage.reduce max
// FWD: math.exp2
// FWD: math.roundeven
// FWD: sage.qmatmul {{.*}} acc {{.*}} contract(1, 0)
// FWD: scf.yield
// FWD: math.log2
