// sage-attach-target records the target facts the lowering reads.
// RUN: sage-opt %s --sage-attach-target | FileCheck %s --check-prefix=KEEP
// RUN: sage-opt %s --sage-attach-target='num-warps=2' | FileCheck %s --check-prefix=WARPS2
// RUN: echo "module {}" | sage-opt --sage-attach-target | FileCheck %s --check-prefix=DEFAULT
// RUN: sage-opt %s --sage-attach-target='arch=sm_80 num-warps=8' | FileCheck %s --check-prefix=SM80
// RUN: not sage-opt %s --sage-attach-target='arch=sm_75' 2>&1 | FileCheck %s --check-prefix=BADARCH
// RUN: not sage-opt %s --sage-attach-target='num-warps=6' 2>&1 | FileCheck %s --check-prefix=BADWARPS

// KEEP: module attributes {sage.num_warps = 4 : i32, sage.target = "sm_86"}
// WARPS2: module attributes {sage.num_warps = 2 : i32, sage.target = "sm_86"}
// DEFAULT: module attributes {sage.num_warps = 4 : i32, sage.target = "sm_90a"}
// SM80: module attributes {sage.num_warps = 8 : i32, sage.target = "sm_80"}
// BADARCH: error: 'sage.target' must be one of "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"
// BADWARPS: error: 'sage.num_warps' must be an integer in {1, 2, 4, 8, 16}

// Options given replace the module's settings; absent ones keep them.
module attributes {sage.target = "sm_86"} {
  func.func @k() attributes {sage.kernel} {
    return
  }
}
