// RUN: xdsl-opt %s -p jx-canonicalize --split-input-file | filecheck %s

// A split whose parts lie one after another in memory (along its first dimension of more than one
// element) is one slice per part (fresh keys past the module's largest, 1), so that `jx-fuse` may
// compute each part inside the fusion that reads it.
builtin.module {
  jx.func @gates(%x: tensor<1x6xf32>) -> (tensor<1x2xf32>, tensor<1x4xf32>) {
    %a, %b = jx.prim "split"[0](%x) {sizes = "(2, 4)", axis = "1"} : (tensor<1x6xf32>) -> (tensor<1x2xf32>, tensor<1x4xf32>)
    %c = jx.prim "tanh"[1](%b) : (tensor<1x4xf32>) -> tensor<1x4xf32>
    jx.yield %a, %c : tensor<1x2xf32>, tensor<1x4xf32>
  }
}

// CHECK-LABEL: jx.func @gates
// CHECK-NEXT:    %a = jx.prim "slice"[2](%x) {start_indices = "(0, 0)", limit_indices = "(1, 2)"} : (tensor<1x6xf32>) -> tensor<1x2xf32>
// CHECK-NEXT:    %b = jx.prim "slice"[3](%x) {start_indices = "(0, 2)", limit_indices = "(1, 6)"} : (tensor<1x6xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %c = jx.prim "tanh"[1](%b) : (tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    jx.yield %a, %c : tensor<1x2xf32>, tensor<1x4xf32>

// -----

// Parts across rows (each row of a batch holds a piece of every part) stay a split.
builtin.module {
  jx.func @batch(%x: tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>) {
    %a, %b = jx.prim "split"[0](%x) {sizes = "(2, 4)", axis = "1"} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
    jx.yield %a, %b : tensor<2x2xf32>, tensor<2x4xf32>
  }
}

// CHECK-LABEL: jx.func @batch
// CHECK-NEXT:    %a, %b = jx.prim "split"[0](%x)
