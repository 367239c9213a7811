// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// A float division by a smaller operand becomes a product with its reciprocal (rebound ops take
// fresh keys past the module's largest, 5), a scalar constant's a constant read from its printed
// form; a division by an operand of the result's shape, and an integer division, stay.
builtin.module {
  jx.func @divisions(%x: tensor<3x4xf32>, %s: tensor<f32>, %v: tensor<1x4xf32>, %n: tensor<3x4xi32>, %m: tensor<i32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xi32>, tensor<3x4xf32>) {
    %a = jx.prim "div"[0](%x, %s) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
    %b = jx.prim "div"[1](%x, %v) : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
    %c = jx.prim "div"[2](%x, %x) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %d = jx.prim "div"[3](%n, %m) : (tensor<3x4xi32>, tensor<i32>) -> tensor<3x4xi32>
    %k = jx.const[4] "3.0" : tensor<f32>
    %e = jx.prim "div"[5](%x, %k) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
    jx.yield %a, %b, %c, %d, %e : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xi32>, tensor<3x4xf32>
  }
}

// CHECK-LABEL: jx.func @divisions
// CHECK-NEXT:    %a = jx.prim "integer_pow"[6](%s) {y = "-1"} : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    %a_1 = jx.prim "mul"[7](%x, %a) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %b = jx.prim "integer_pow"[8](%v) {y = "-1"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %b_1 = jx.prim "mul"[9](%x, %b) : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %c = jx.prim "div"[2](%x, %x)
// CHECK-NEXT:    %d = jx.prim "div"[3](%n, %m)
// CHECK-NEXT:    %e = jx.const[10] "0.3333333432674408" : tensor<f32>
// CHECK-NEXT:    %e_1 = jx.prim "mul"[11](%x, %e) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK-NEXT:    jx.yield %a_1, %b_1, %c, %d, %e_1
