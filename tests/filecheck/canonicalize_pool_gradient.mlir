// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// The gradient of a max pool whose 2x2 windows tile its input: each window's choice among its
// elements in XLA's order (the first kept where `ge` holds), then one select over the input's
// shape, in place of `select_and_scatter_add` (fresh keys past the module's largest, 0).
builtin.module {
  jx.func @pool_gradient(%g: tensor<1x2x2x1xf32>, %x: tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32> {
    %d = jx.prim "select_and_scatter_add"[0](%g, %x) {select_prim = "ge", window_dimensions = "(1, 2, 2, 1)", window_strides = "(1, 2, 2, 1)", padding = "((0, 0), (0, 0), (0, 0), (0, 0))"} : (tensor<1x2x2x1xf32>, tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
    jx.yield %d : tensor<1x4x4x1xf32>
  }
}

// CHECK-LABEL: jx.func @pool_gradient
// CHECK-NOT:     select_and_scatter_add
// CHECK:         jx.prim "reshape"{{.*}}(%x) {{.*}} -> tensor<1x1x2x2x2x2x1x1xf32>
// CHECK-COUNT-3: jx.prim "ge"
// CHECK:         jx.prim "iota"
// CHECK:         jx.prim "eq"
// CHECK:         %[[ROUTED:.*]] = jx.prim "select_n"{{.*}} -> tensor<1x1x2x2x2x2x1x1xf32>
// CHECK:         %[[D:.*]] = jx.prim "reshape"{{.*}}(%[[ROUTED]]) {{.*}} -> tensor<1x4x4x1xf32>
// CHECK-NEXT:    jx.yield %[[D]] : tensor<1x4x4x1xf32>
