// ptxas accepts the PTX of every example for sm_90a and sm_80, with no
// spills. (python/test/test_ptxas.py covers each example with its options.)
// REQUIRES: ptxas
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_90a -o %t.sm90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.sm90.ptx -o %t.sm90.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --arch=sm_80 -o %t.sm80.ptx
// RUN: %ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s
// RUN: sage-translate %S/../../../examples/sagebwd_forward.mlir --arch=sm_90a -o %t.fwd.ptx
// RUN: %ptxas -arch=sm_90a -v %t.fwd.ptx -o %t.fwd.cubin 2>&1 | FileCheck %s

// CHECK-NOT: error
// CHECK: 0 bytes spill stores, 0 bytes spill loads
