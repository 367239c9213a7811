// RUN: xdsl-opt %s -p jx-fuse --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p 'jx-fuse,jx-assign-buffers{alignment=64 include-outputs=true},jx-verify-plan' --split-input-file | filecheck %s --check-prefix=PLANNED

// A GELU-like chain after a matmul: the links used once become one jx.fused op; %h, read three
// times, stays an operand; the reduction ends the chain, inside the fusion (as in XLA, the product
// it sums is never stored).
builtin.module {
  jx.func @f(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<f32> {
    %h = jx.prim "dot_general"[0](%x, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %c = jx.const[1] "0.5" : tensor<f32>
    %a = jx.prim "mul"[2](%c, %h) : (tensor<f32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %t = jx.prim "tanh"[3](%h) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %s = jx.prim "add"[4](%t, %h) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %g = jx.prim "mul"[5](%a, %s) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %r = jx.prim "reduce_sum"[6](%g) {axes = "(0, 1)"} : (tensor<8x16xf32>) -> tensor<f32>
    jx.yield %r : tensor<f32>
  }
}

// CHECK:      %h = jx.prim "dot_general"[0](%x, %w)
// CHECK-NEXT: %c = jx.const[1] "0.5" : tensor<f32>
// CHECK-NEXT: %r = "jx.fused"(%c, %h) ({
// CHECK-NEXT: ^bb0(%0: tensor<f32>, %1: tensor<8x16xf32>):
// CHECK-NEXT:   %a = jx.prim "mul"[2](%0, %1)
// CHECK-NEXT:   %t = jx.prim "tanh"[3](%1)
// CHECK-NEXT:   %s = jx.prim "add"[4](%t, %1)
// CHECK-NEXT:   %g = jx.prim "mul"[5](%a, %s)
// CHECK-NEXT:   %r_1 = jx.prim "reduce_sum"[6](%g)
// CHECK-NEXT:   jx.yield %r_1 : tensor<f32>
// CHECK-NEXT: }) : (tensor<f32>, tensor<8x16xf32>) -> tensor<f32>
// CHECK-NEXT: jx.yield %r

// Only %h and the fused result are planned: the sum cannot take %h's place (it is smaller).
// PLANNED:      mem.arena = #mem.arena<bytes = 576, outputs>
// PLANNED:      %h = jx.prim "dot_general"[0](%x, %w) attributes {mem.slot = #mem.slot<offset = 0, size = 512>}
// PLANNED:      %r = "jx.fused"(%c, %h) ({
// PLANNED-NOT:  mem.slot
// PLANNED:      jx.yield %r_1
// PLANNED-NEXT: }) {mem.slot = #mem.slot<offset = 512, size = 64>}

// RUN: xdsl-opt %s -p jx-fuse --split-input-file | filecheck %s --check-prefix=BOUND
// -----

// No fusion raises the bound: moving %a into %b's fusion would keep %u and %v (1 KiB each) alive
// across %big (8 KiB, the peak) in place of %a, so %a and %b stay ops of their own. %p, a cheap
// product read by two fusible ops, is computed again in each fusion and never planned.
builtin.module {
  jx.func @g(%x: tensor<8x32xf32>, %y: tensor<8x32xf32>, %s: tensor<32x32xf32>, %w: tensor<32x256xf32>, %m: tensor<8x32xf32>, %k: tensor<f32>) -> (tensor<8x32xf32>, tensor<f32>, tensor<8x32xf32>, tensor<8x32xf32>) {
    %u = jx.prim "dot_general"[0](%x, %s) : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %v = jx.prim "dot_general"[1](%y, %s) : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %a = jx.prim "add"[2](%u, %v) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %big = jx.prim "dot_general"[3](%x, %w) : (tensor<8x32xf32>, tensor<32x256xf32>) -> tensor<8x256xf32>
    %c = jx.prim "reduce_sum"[4](%big) {axes = "(0, 1)"} : (tensor<8x256xf32>) -> tensor<f32>
    %b = jx.prim "exp"[5](%a) : (tensor<8x32xf32>) -> tensor<8x32xf32>
    %p = jx.prim "mul"[6](%m, %k) : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
    %q = jx.prim "add"[7](%p, %m) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %r = jx.prim "mul"[8](%p, %p) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    jx.yield %b, %c, %q, %r : tensor<8x32xf32>, tensor<f32>, tensor<8x32xf32>, tensor<8x32xf32>
  }
}

// BOUND:      %a = jx.prim "add"[2](%u, %v)
// BOUND-NEXT: %big = jx.prim "dot_general"[3](%x, %w)
// BOUND-NEXT: %c = jx.prim "reduce_sum"[4](%big)
// BOUND-NEXT: %b = jx.prim "exp"[5](%a)
// BOUND-NEXT: %q = "jx.fused"(%m, %k) ({
// BOUND-NEXT: ^bb0(%0: tensor<8x32xf32>, %1: tensor<f32>):
// BOUND-NEXT:   %p = jx.prim "mul"[6](%0, %1)
// BOUND-NEXT:   %q_1 = jx.prim "add"[7](%p, %0)
// BOUND-NEXT:   jx.yield %q_1 : tensor<8x32xf32>
// BOUND-NEXT: })
// BOUND-NEXT: %r = "jx.fused"(%m, %k) ({
// BOUND-NEXT: ^bb0(%2: tensor<8x32xf32>, %3: tensor<f32>):
// BOUND-NEXT:   %p_1 = jx.prim "mul"[6](%2, %3)
// BOUND-NEXT:   %r_1 = jx.prim "mul"[8](%p_1, %p_1)
// BOUND-NEXT:   jx.yield %r_1 : tensor<8x32xf32>
// BOUND-NEXT: })
// BOUND-NEXT: jx.yield %b, %c, %q, %r

// RUN: xdsl-opt %s -p jx-fuse --split-input-file | filecheck %s --check-prefix=CUT
// -----

// A comparison (a bool result) and a broadcast join the select that reads them, as in XLA, where a
// broadcast inside a fusion indexes its operand; so does %e, read twice in that one fusion: only the
// select's result is planned.
builtin.module {
  jx.func @h(%x: tensor<8x16xf32>, %z: tensor<16xf32>) -> tensor<8x16xf32> {
    %e = jx.prim "exp"[0](%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %c = jx.const[1] "1.0" : tensor<f32>
    %m = jx.prim "gt"[2](%e, %c) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xi1>
    %b = jx.prim "broadcast_in_dim"[3](%z) {shape = "(8, 16)", broadcast_dimensions = "(1,)"} : (tensor<16xf32>) -> tensor<8x16xf32>
    %s = jx.prim "select_n"[4](%m, %e, %b) : (tensor<8x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    jx.yield %s : tensor<8x16xf32>
  }
}

// CUT:      %c = jx.const[1] "1.0" : tensor<f32>
// CUT-NEXT: %s = "jx.fused"(%x, %c, %z) ({
// CUT-NEXT: ^bb0(%0: tensor<8x16xf32>, %1: tensor<f32>, %2: tensor<16xf32>):
// CUT-NEXT:   %e = jx.prim "exp"[0](%0)
// CUT-NEXT:   %m = jx.prim "gt"[2](%e, %1)
// CUT-NEXT:   %b = jx.prim "broadcast_in_dim"[3](%2)
// CUT-NEXT:   %s_1 = jx.prim "select_n"[4](%m, %e, %b)
// CUT-NEXT:   jx.yield %s_1 : tensor<8x16xf32>
// CUT-NEXT: })

// -----

// A chain read late: moving all of it to %r would keep %u and %v alive across %big, the peak, in
// place of %b. The chain is cut at its last link: %b stays where it is, a fusion of the links
// before it, and %r reads it.
builtin.module {
  jx.func @late(%x: tensor<8x32xf32>, %s: tensor<32x32xf32>, %w: tensor<32x256xf32>, %y: tensor<8x32xf32>) -> (tensor<f32>, tensor<8x32xf32>) {
    %u = jx.prim "dot_general"[0](%x, %s) : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %v = jx.prim "dot_general"[1](%y, %s) : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %a = jx.prim "add"[2](%u, %v) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %n = jx.prim "neg"[3](%a) : (tensor<8x32xf32>) -> tensor<8x32xf32>
    %b = jx.prim "exp"[4](%n) : (tensor<8x32xf32>) -> tensor<8x32xf32>
    %big = jx.prim "dot_general"[5](%x, %w) : (tensor<8x32xf32>, tensor<32x256xf32>) -> tensor<8x256xf32>
    %c = jx.prim "reduce_sum"[6](%big) {axes = "(0, 1)"} : (tensor<8x256xf32>) -> tensor<f32>
    %r = jx.prim "mul"[7](%b, %y) : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    jx.yield %c, %r : tensor<f32>, tensor<8x32xf32>
  }
}

// CUT:      %v = jx.prim "dot_general"[1](%y, %s)
// CUT-NEXT: %b = "jx.fused"(%u, %v) ({
// CUT-NEXT: ^bb0(%0: tensor<8x32xf32>, %1: tensor<8x32xf32>):
// CUT-NEXT:   %a = jx.prim "add"[2](%0, %1)
// CUT-NEXT:   %n = jx.prim "neg"[3](%a)
// CUT-NEXT:   %b_1 = jx.prim "exp"[4](%n)
// CUT-NEXT:   jx.yield %b_1 : tensor<8x32xf32>
// CUT-NEXT: })
// CUT-NEXT: %big = jx.prim "dot_general"[5](%x, %w)
// CUT-NEXT: %c = jx.prim "reduce_sum"[6](%big)
// CUT-NEXT: %r = jx.prim "mul"[7](%b, %y)
