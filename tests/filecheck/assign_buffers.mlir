// RUN: xdsl-opt %s -p 'jx-assign-buffers{alignment=64}' | filecheck %s
// RUN: xdsl-opt %s -p 'jx-assign-buffers{alignment=64},jx-verify-plan' | filecheck %s --check-prefix=VERIFIED
// RUN: xdsl-opt %s -p 'jx-assign-buffers{alignment=64 include-outputs=true}' | filecheck %s --check-prefix=OUTPUTS

// y = tanh(x @ w) folds the tanh into the matmul's buffer; a view takes no memory of its own;
// the last op's result is the function's output, outside the arena by default.
builtin.module {
  jx.func @f(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<256xf32> {
    %a = jx.prim "dot_general"[0](%x, %w) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %b = jx.prim "tanh"[1](%a) : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %c = jx.prim "dot_general"[2](%b, %w) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %d = jx.prim "reshape"[3](%c) : (tensor<16x16xf32>) -> tensor<256xf32>
    %e = jx.prim "neg"[4](%d) : (tensor<256xf32>) -> tensor<256xf32>
    jx.yield %e : tensor<256xf32>
  }
}

// CHECK:      jx.func @f(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<256xf32> attributes {mem.arena = #mem.arena<bytes = 1024>} {
// CHECK-NEXT:   %a = jx.prim "dot_general"[0](%x, %w) attributes {mem.slot = #mem.slot<offset = 0, size = 1024>}
// CHECK-NEXT:   %b = jx.prim "tanh"[1](%a) attributes {mem.slot = #mem.slot<offset = 0, size = 1024>}
// c, its view d and the in-place neg e share the output buffer, outside the arena:
// CHECK-NEXT:   %c = jx.prim "dot_general"[2](%b, %w) :
// CHECK-NEXT:   %d = jx.prim "reshape"[3](%c) :
// CHECK-NEXT:   %e = jx.prim "neg"[4](%d) :

// VERIFIED: mem.arena = #mem.arena<bytes = 1024>

// With the outputs in the arena, b and c conflict (b is read by the matmul that makes c).
// OUTPUTS:      mem.arena = #mem.arena<bytes = 2048, outputs>
// OUTPUTS:      %b = jx.prim "tanh"[1](%a) attributes {mem.slot = #mem.slot<offset = [[B:[0-9]+]], size = 1024>}
// OUTPUTS-NEXT: %c = jx.prim "dot_general"[2](%b, %w) attributes {mem.slot = #mem.slot<offset = [[C:[0-9]+]], size = 1024>}
// OUTPUTS-NEXT: %d = jx.prim "reshape"[3](%c) attributes {mem.slot = #mem.slot<offset = [[C]], size = 1024>}
// OUTPUTS-NEXT: %e = jx.prim "neg"[4](%d) attributes {mem.slot = #mem.slot<offset = [[C]], size = 1024>}
