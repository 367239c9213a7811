// RUN: xdsl-opt %s -p jx-liveness | filecheck %s
// Half-open lifetimes on each block's schedule; a use inside a loop counts at the loop op.

builtin.module {
  jx.func @f(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
    %a = jx.prim "mul"[0](%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %b = jx.prim "sin"[1](%x) : (tensor<4xf32>) -> tensor<4xf32>
    %r = jx.while(%b) : (tensor<4xf32>) -> tensor<4xf32> cond {
    ^bb0(%c: tensor<4xf32>):
      %p = jx.const[2] "True" : tensor<i1>
      jx.yield %p : tensor<i1>
    } do {
    ^bb0(%d: tensor<4xf32>):
      %e = jx.prim "add"[3](%d, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      jx.yield %e : tensor<4xf32>
    }
    jx.yield %r : tensor<4xf32>
  }
}

// %a is defined at op 0 and read inside the loop body: it lives until the loop (op 2) ends.
// CHECK:      %a = jx.prim "mul"[0](%x, %w) attributes {mem.live = ["[0, 3)"]}
// CHECK-NEXT: %b = jx.prim "sin"[1](%x) attributes {mem.live = ["[1, 3)"]}
// CHECK-NEXT: %r = jx.while(%b) : (tensor<4xf32>) -> tensor<4xf32> attributes {mem.live = ["[2, 4)"]} cond {
// CHECK:      %p = jx.const[2] "True" attributes {mem.live = ["[0, 2)"]} : tensor<i1>
// CHECK:      %e = jx.prim "add"[3](%d, %a) attributes {mem.live = ["[0, 2)"]}
