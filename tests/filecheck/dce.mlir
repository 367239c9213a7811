// RUN: xdsl-opt %s -p jx-dce | filecheck %s
// jx-dce removes what neither an output nor an op with an effect needs: ops, loop positions
// (with their init operands and yields) and case results; an op with an effect and the loop
// around it stay.

builtin.module {
  jx.func @f(%x: tensor<4xf32>, %p: tensor<i32>) -> tensor<4xf32> {
    %dead = jx.prim "sin"[0](%x) : (tensor<4xf32>) -> tensor<4xf32>
    %i0 = jx.const[1] "0" : tensor<i32>
    %i, %a, %b = jx.while(%i0, %x, %x) : (tensor<i32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>, tensor<4xf32>) cond {
    ^bb0(%ci: tensor<i32>, %ca: tensor<4xf32>, %cb: tensor<4xf32>):
      %n = jx.const[2] "3" : tensor<i32>
      %go = jx.prim "lt"[3](%ci, %n) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      jx.yield %go : tensor<i1>
    } do {
    ^bb0(%bi: tensor<i32>, %ba: tensor<4xf32>, %bb: tensor<4xf32>):
      %one = jx.const[4] "1" : tensor<i32>
      %next = jx.prim "add"[5](%bi, %one) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %na = jx.prim "cos"[6](%ba) : (tensor<4xf32>) -> tensor<4xf32>
      %nb = jx.prim "exp"[7](%ba) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %next, %na, %nb : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    }
    %r, %s = jx.case(%p) : (tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %t = jx.prim "tanh"[8](%a) : (tensor<4xf32>) -> tensor<4xf32>
      %u = jx.prim "neg"[9](%a) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %t, %u : tensor<4xf32>, tensor<4xf32>
    }, {
      jx.yield %a, %a : tensor<4xf32>, tensor<4xf32>
    }
    %j0 = jx.const[10] "0" : tensor<i32>
    %j = jx.while(%j0) : (tensor<i32>) -> tensor<i32> cond {
    ^bb0(%cj: tensor<i32>):
      %m = jx.const[11] "2" : tensor<i32>
      %more = jx.prim "lt"[12](%cj, %m) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      jx.yield %more : tensor<i1>
    } do {
    ^bb0(%bj: tensor<i32>):
      jx.prim "debug_callback"[13](%bj) effect : (tensor<i32>) -> ()
      %one2 = jx.const[14] "1" : tensor<i32>
      %nj = jx.prim "add"[15](%bj, %one2) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      jx.yield %nj : tensor<i32>
    }
    jx.yield %r : tensor<4xf32>
  }
}

// CHECK-LABEL: jx.func @f
// CHECK-NOT:     "sin"
// CHECK:         %{{.*}}, %[[A:.*]] = jx.while(%{{.*}}, %x) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) cond {
// CHECK-NEXT:    ^bb0(%ci: tensor<i32>, %ca: tensor<4xf32>):
// CHECK:         } do {
// CHECK-NEXT:    ^bb0(%bi: tensor<i32>, %ba: tensor<4xf32>):
// CHECK-NOT:       "exp"
// CHECK:           jx.yield %next, %na : tensor<i32>, tensor<4xf32>
// CHECK:         %r = jx.case(%p) : (tensor<i32>) -> tensor<4xf32> {
// CHECK-NEXT:      %t = jx.prim "tanh"
// CHECK-NEXT:      jx.yield %t : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      jx.yield %[[A]] : tensor<4xf32>
// CHECK:         jx.while
// CHECK:           jx.prim "debug_callback"[13](%bj) effect : (tensor<i32>) -> ()
// CHECK:         jx.yield %r : tensor<4xf32>
