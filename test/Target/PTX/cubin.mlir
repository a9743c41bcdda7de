// The compiler library assembles a cubin with ptxas when asked, and reports
// ptxas' register and spill counts.
// REQUIRES: ptxas
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --emit=cubin -o %t.cubin 2>&1 | FileCheck %s
// RUN: od -An -c -N4 %t.cubin | FileCheck %s --check-prefix=ELF
// CHECK: Compiling entry function 'quant_matmul' for 'sm_90a'
// CHECK: 0 bytes spill stores, 0 bytes spill loads
// ELF: 177   E   L   F
