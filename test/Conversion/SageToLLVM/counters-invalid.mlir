// Counters are the program's: inside a warp-specialised role, where only
// some of the threads run, they are reported, not miscompiled.
// RUN: sage-opt %s --convert-sage-to-llvm --split-input-file -verify-diagnostics

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @in_a_role(%c: !sage.ptr<i32>, %n: i32) attributes {sage.kernel} {
  sagegpu.warp_specialize producer(registers = 40) {
  } consumers(registers = 232) {
    // expected-error @+2 {{'sage.counter_wait' op needs every thread of the program, not a warp-specialised role's}}
    // expected-error @+1 {{failed to legalize operation 'sage.counter_wait'}}
    sage.counter_wait %c, %n : !sage.ptr<i32>
  }
  return
}
}

// -----

module attributes {sage.target = "sm_90a", sage.num_warps = 4 : i32} {
func.func @in_the_producer(%c: !sage.ptr<i32>, %n: i32) attributes {sage.kernel} {
  sagegpu.warp_specialize producer(registers = 40) {
    // expected-error @+2 {{'sage.counter_add' op needs every thread of the program, not a warp-specialised role's}}
    // expected-error @+1 {{failed to legalize operation 'sage.counter_add'}}
    %old = sage.counter_add %c, %n : !sage.ptr<i32>
  } consumers(registers = 232) {
  }
  return
}
}
