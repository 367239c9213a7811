// RUN: xdsl-opt %s -p jx-fuse --split-input-file | filecheck %s

// A row that a `dynamic_slice` reads out of an argument of the function (a layer's bias, one row of
// the stacked parameters `nnx.scan` runs a layer of each round), which the elementwise ops reading it
// broadcast, joins their fusion, as XLA reads a dynamic slice inside the fusion that reads it; a row
// of a value the function computes stays an op of its own.
builtin.module {
  jx.func @rows(%x: tensor<4x8xf32>, %biases: tensor<3x8xf32>, %i: tensor<i32>) -> tensor<4x8xf32> {
    %zero = jx.const[0] "0" : tensor<i32>
    %bias = jx.prim "dynamic_slice"[1](%biases, %i, %zero) {slice_sizes = "(1, 8)"} : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
    %shifted = jx.prim "add"[2](%x, %bias) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    %y = jx.prim "tanh"[3](%shifted) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %sines = jx.prim "sin"[4](%biases) : (tensor<3x8xf32>) -> tensor<3x8xf32>
    %sine = jx.prim "dynamic_slice"[5](%sines, %i, %zero) {slice_sizes = "(1, 8)"} : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
    %z = jx.prim "mul"[6](%y, %sine) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    jx.yield %z : tensor<4x8xf32>
  }
}

// CHECK-LABEL: jx.func @rows
// CHECK:        %sines = jx.prim "sin"[4](%biases)
// CHECK-NEXT:   %sine = jx.prim "dynamic_slice"[5](%sines, %i, %zero)
// CHECK-NEXT:   %z = "jx.fused"(%biases, %i, %zero, %x, %sine) ({
// CHECK-NEXT:   ^bb0(%0: tensor<3x8xf32>, %1: tensor<i32>, %2: tensor<i32>, %3: tensor<4x8xf32>, %4: tensor<1x8xf32>):
// CHECK-NEXT:     %bias = jx.prim "dynamic_slice"[1](%0, %1, %2)
// CHECK-NEXT:     %shifted = jx.prim "add"[2](%3, %bias)
// CHECK-NEXT:     %y = jx.prim "tanh"[3](%shifted)
// CHECK-NEXT:     %z_1 = jx.prim "mul"[6](%y, %4)
