// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// A loop that runs one round is its body, run once on the init operands: no loop is left, and the
// function reads what the body computed. Its condition is not tested.
builtin.module {
  jx.func @once(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = jx.const[0] "0" : tensor<i32>
    %i, %a = jx.while(%0, %x) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) rounds 1 cond {
    ^bb0(%1: tensor<i32>, %2: tensor<4xf32>):
      %3 = jx.const[1] "1" : tensor<i32>
      %4 = jx.prim "lt"[2](%1, %3) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      jx.yield %4 : tensor<i1>
    } do {
    ^bb0(%5: tensor<i32>, %6: tensor<4xf32>):
      %7 = jx.const[3] "1" : tensor<i32>
      %8 = jx.prim "add"[4](%5, %7) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %9 = jx.prim "sin"[5](%6) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %8, %9 : tensor<i32>, tensor<4xf32>
    }
    jx.yield %a : tensor<4xf32>
  }

  // A loop that runs at most one round is a case on its condition, tested once on the init
  // operands: branch 0 (the condition false) hands them back, branch 1 runs the body. Its result
  // is the init operand or the value the body computed, and nothing is carried round.
  jx.func @at_most_once(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = jx.const[0] "0" : tensor<i32>
    %i, %a = jx.while(%0, %x) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) at_most 1 cond {
    ^bb0(%1: tensor<i32>, %2: tensor<4xf32>):
      %3 = jx.const[1] "1" : tensor<i32>
      %4 = jx.prim "lt"[2](%1, %3) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %5 = jx.prim "reduce_sum"[3](%2) {axes = "(0,)"} : (tensor<4xf32>) -> tensor<f32>
      %6 = jx.const[4] "0.0" : tensor<f32>
      %7 = jx.prim "gt"[5](%5, %6) : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %8 = jx.prim "and"[6](%4, %7) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      jx.yield %8 : tensor<i1>
    } do {
    ^bb0(%9: tensor<i32>, %10: tensor<4xf32>):
      %11 = jx.const[7] "1" : tensor<i32>
      %12 = jx.prim "add"[8](%9, %11) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %13 = jx.prim "sin"[9](%10) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %12, %13 : tensor<i32>, tensor<4xf32>
    }
    jx.yield %a : tensor<4xf32>
  }

  // A loop that may run two rounds stays a loop.
  jx.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = jx.const[0] "0" : tensor<i32>
    %i, %a = jx.while(%0, %x) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) at_most 2 cond {
    ^bb0(%1: tensor<i32>, %2: tensor<4xf32>):
      %3 = jx.const[1] "2" : tensor<i32>
      %4 = jx.prim "lt"[2](%1, %3) : (tensor<i32>, tensor<i32>) -> tensor<i1>
      jx.yield %4 : tensor<i1>
    } do {
    ^bb0(%5: tensor<i32>, %6: tensor<4xf32>):
      %7 = jx.const[3] "1" : tensor<i32>
      %8 = jx.prim "add"[4](%5, %7) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %9 = jx.prim "sin"[5](%6) : (tensor<4xf32>) -> tensor<4xf32>
      jx.yield %8, %9 : tensor<i32>, tensor<4xf32>
    }
    jx.yield %a : tensor<4xf32>
  }
}

// CHECK-LABEL: jx.func @once
// CHECK-NEXT:    %a = jx.prim "sin"[5](%x) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    jx.yield %a : tensor<4xf32>

// CHECK-LABEL: jx.func @at_most_once
// CHECK-NOT:     jx.while
// CHECK:         %[[SUM:.*]] = jx.prim "reduce_sum"[3](%x)
// CHECK:         %[[TEST:.*]] = jx.prim "and"[6]
// CHECK-NEXT:    %[[INDEX:.*]] = jx.prim "convert_element_type"[{{[0-9]+}}](%[[TEST]]) {new_dtype = "int32", weak_type = "False"} : (tensor<i1>) -> tensor<i32>
// CHECK-NEXT:    %a = jx.case(%[[INDEX]]) : (tensor<i32>) -> tensor<4xf32> {
// CHECK-NEXT:      jx.yield %x : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %[[SIN:.*]] = jx.prim "sin"[9](%x)
// CHECK-NEXT:      jx.yield %[[SIN]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    jx.yield %a : tensor<4xf32>

// CHECK-LABEL: jx.func @twice
// CHECK:         jx.while({{.*}}) at_most 2 cond {
