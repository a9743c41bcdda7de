// The compiler library assembles a cubin with ptxas when asked, and reports
// ptxas' register and spill counts.
// REQUIRES: ptxas
// RUN: sage-translate %S/../../../examples/quant_matmul.mlir --emit=cubin -o %t.cubin 2>&1 | FileCheck %s
// RUN: od -An -c -N4 %t.cubin | FileCheck %s --check-prefix=ELF
// CHECK: Compiling entry function 'quant_matmul' for 'sm_90a'
// CHECK: 0 bytes spill stores, 0 bytes spill loads
// ELF: 177   E   L   F

// A ptxas that is not there is an error, not a silent PTX-only result.
// RUN: env SAGE_PTXAS=%t.missing not sage-translate %S/../../../examples/quant_matmul.mlir --emit=cubin -o %t.none 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: a cubin needs ptxas (CUDA toolkit): none at $SAGE_PTXAS
// A failing ptxas reports its output.
// RUN: env SAGE_PTXAS=%S/Inputs/failing-ptxas.sh not sage-translate %S/../../../examples/quant_matmul.mlir --emit=cubin -o %t.none 2>&1 | FileCheck %s --check-prefix=FAILS
// FAILS: error: ptxas failed
// FAILS: ptxas fatal : pretend failure
