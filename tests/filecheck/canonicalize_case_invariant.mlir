// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// A case result that every branch yields as one value from outside the case (%x) is that value:
// the function reads %x where it read it, and the case keeps only the result its branches differ
// on (`jx-dce`, which the pass runs after its rewrites, drops the other).
builtin.module {
  jx.func @invariant(%x: tensor<4xf32>, %y: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %a, %b = jx.case(%n) : (tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
      jx.yield %x, %y : tensor<4xf32>, tensor<4xf32>
    }, {
      %0 = jx.prim "neg"[0](%y) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %x, %0 : tensor<4xf32>, tensor<4xf32>
    }
    jx.yield %a, %b : tensor<4xf32>, tensor<4xf32>
  }
}

// CHECK-LABEL: jx.func @invariant
// CHECK:         %b = jx.case(%n) : (tensor<i32>) -> tensor<4xf32> {
// CHECK-NEXT:      jx.yield %y : tensor<4xf32>
// CHECK:         jx.yield %x, %b : tensor<4xf32>, tensor<4xf32>
