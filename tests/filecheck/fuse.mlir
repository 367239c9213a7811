// RUN: xdsl-opt %s -p jx-fuse | filecheck %s
// RUN: xdsl-opt %s -p 'jx-fuse,jx-assign-buffers{alignment=64 include-outputs=true},jx-verify-plan' | filecheck %s --check-prefix=PLANNED

// A GELU-like chain after a matmul: the links used once become one jx.fused op; %h, read three
// times, stays an operand; the reduction ends the chain.
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
// CHECK-NEXT: %g = "jx.fused"(%c, %h) ({
// CHECK-NEXT: ^bb0(%0: tensor<f32>, %1: tensor<8x16xf32>):
// CHECK-NEXT:   %a = jx.prim "mul"[2](%0, %1)
// CHECK-NEXT:   %t = jx.prim "tanh"[3](%1)
// CHECK-NEXT:   %s = jx.prim "add"[4](%t, %1)
// CHECK-NEXT:   %g_1 = jx.prim "mul"[5](%a, %s)
// CHECK-NEXT:   jx.yield %g_1 : tensor<8x16xf32>
// CHECK-NEXT: }) : (tensor<f32>, tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %r = jx.prim "reduce_sum"[6](%g)

// Only %h, the fused result and %r are planned: the fused op runs in place over %h, which dies there.
// PLANNED:      mem.arena = #mem.arena<bytes = 576>
// PLANNED:      %h = jx.prim "dot_general"[0](%x, %w) attributes {mem.slot = #mem.slot<offset = 0, size = 512>}
// PLANNED:      %g = "jx.fused"(%c, %h) ({
// PLANNED-NOT:  mem.slot
// PLANNED:      jx.yield %g_1
// PLANNED-NEXT: }) {mem.slot = #mem.slot<offset = 0, size = 512>}
