// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// equinox's vmap and grad markers are their operands; an unvmap reduction of a scalar is the scalar
// and of an array a plain reduction over every dimension (a fresh key past the module's largest, 4).
// The copy only the dropped select_if_vmap read goes too.
builtin.module {
  jx.func @markers(%p: tensor<i1>, %x: tensor<4xf32>, %y: tensor<4xf32>, %b: tensor<3xi1>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<i1>, tensor<f32>) {
    %c = jx.prim "copy"[0](%y) : (tensor<4xf32>) -> tensor<4xf32>
    %sel = jx.prim "select_if_vmap"[1](%p, %x, %c) : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %nb = jx.prim "nonbatchable"[2](%sel) {allow_constant_across_batch = "True"} : (tensor<4xf32>) -> tensor<4xf32>
    %any = jx.prim "unvmap_any"[3](%b) : (tensor<3xi1>) -> tensor<i1>
    %max = jx.prim "unvmap_max"[4](%s) : (tensor<f32>) -> tensor<f32>
    jx.yield %nb, %any, %max : tensor<4xf32>, tensor<i1>, tensor<f32>
  }
}

// CHECK-LABEL: jx.func @markers
// CHECK-NEXT:    %any = jx.prim "reduce_or"[5](%b) {axes = "(0,)"} : (tensor<3xi1>) -> tensor<i1>
// CHECK-NEXT:    jx.yield %x, %any, %s : tensor<4xf32>, tensor<i1>, tensor<f32>
