// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// A loop position that hands back its own init operand (%z, from outside the loop) or yields its
// carried value unchanged holds its init operand after any number of rounds: the function reads
// %z and %x where it read those results. The position the body still reads stays; the other goes
// (`jx-dce`, which the pass runs after its rewrites).
builtin.module {
  jx.func @invariant(%x: tensor<4xf32>, %z: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0 = jx.const[0] "0" : tensor<i32>
    %i, %a, %b, %c = jx.while(%0, %x, %z, %x) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) cond {
    ^bb0(%1: tensor<i32>, %2: tensor<4xf32>, %3: tensor<4xf32>, %4: tensor<4xf32>):
      %5 = jx.prim "lt"[1](%1, %n) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      jx.yield %5 : tensor<i1>
    } do {
    ^bb0(%6: tensor<i32>, %7: tensor<4xf32>, %8: tensor<4xf32>, %9: tensor<4xf32>):
      %10 = jx.const[2] "1" : tensor<i32>
      %11 = jx.prim "add"[3](%6, %10) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %12 = jx.prim "mul"[4](%7, %8) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      jx.yield %11, %12, %z, %9 : tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    }
    jx.yield %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }

  // A position handed the carried value of such a position with the same init operand holds it too:
  // (%p, %q) -> (%q, %q) from (%x, %x) is %x in every round: the function reads %x, and the loop,
  // whose results nothing reads then, goes.
  jx.func @handed(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
    %0 = jx.const[0] "0" : tensor<i32>
    %i, %p, %q = jx.while(%0, %x, %x) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>) cond {
    ^bb0(%1: tensor<i32>, %2: tensor<4xf32>, %3: tensor<4xf32>):
      %4 = jx.prim "reduce_sum"[1](%3) {axes = "(0,)"} : (tensor<4xf32>) -> tensor<f32>
      %5 = jx.const[2] "100.0" : tensor<f32>
      %6 = jx.prim "lt"[3](%4, %5) : (tensor<f32>, tensor<f32>) -> tensor<i1>
      jx.yield %6 : tensor<i1>
    } do {
    ^bb0(%7: tensor<i32>, %8: tensor<4xf32>, %9: tensor<4xf32>):
      %10 = jx.const[4] "1" : tensor<i32>
      %11 = jx.prim "add"[5](%7, %10) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      jx.yield %11, %9, %9 : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    }
    jx.yield %p : tensor<4xf32>
  }
}

// CHECK-LABEL: jx.func @invariant
// CHECK:         %i, %a, %b = jx.while(%0, %x, %z) :
// CHECK:         jx.yield %9, %10, %z : tensor<i32>, tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    jx.yield %a, %z, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>

// CHECK-LABEL: jx.func @handed
// CHECK-NEXT:    jx.yield %x : tensor<4xf32>
