// Compilation errors come back as diagnostics and a non-zero exit.
// RUN: not sage-translate %s --arch=sm_75 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not sage-translate %s --num-warps=3 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not sage-translate %s.missing 2>&1 | FileCheck %s --check-prefix=FILE
// ARCH: error: 'sage.target' must be one of
// WARPS: error: 'sage.num_warps' must be an integer in {1, 2, 4, 8, 16}
// FILE: sage-translate: cannot read

func.func @k(%p: !sage.ptr<f32>) attributes {sage.kernel} {
  return
}

// RUN: not sage-translate %s --arch=sm_90a --ptx-version=78 2>&1 | FileCheck %s --check-prefix=PTX
// PTX: error: sm_90a needs PTX ISA 8.0 or newer, got 7.8
