// RUN: xdsl-opt %s -p 'jx-fuse{library=true}' | filecheck %s
// RUN: xdsl-opt %s -p jx-fuse | filecheck %s --check-prefix=PLAIN

// A CNN stage on the CPU: XLA hands the convolution, its bias, the ReLU and the max pooling to its
// library as one graph, and the next convolution and its pooling with them, up to the mean's sum:
// with `library=true` they are one jx.fused op, where the convolutions' results and the ReLUs'
// are never planned. Without it the convolutions stay ops of their own.
builtin.module {
  jx.func @f(%x: tensor<2x16x16x3xf32>, %k1: tensor<3x3x3x24xf32>, %b: tensor<1x1x1x24xf32>, %k2: tensor<3x3x24x32xf32>) -> tensor<2x32xf32> {
    %c = jx.prim "conv_general_dilated"[0](%x, %k1) {window_strides = "(1, 1)", padding = "((1, 1), (1, 1))", lhs_dilation = "(1, 1)", rhs_dilation = "(1, 1)", dimension_numbers = "ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))", feature_group_count = "1", batch_group_count = "1"} : (tensor<2x16x16x3xf32>, tensor<3x3x3x24xf32>) -> tensor<2x16x16x24xf32>
    %h = jx.prim "add"[1](%c, %b) : (tensor<2x16x16x24xf32>, tensor<1x1x1x24xf32>) -> tensor<2x16x16x24xf32>
    %z = jx.const[2] "0.0" : tensor<f32>
    %r = jx.prim "max"[3](%h, %z) : (tensor<2x16x16x24xf32>, tensor<f32>) -> tensor<2x16x16x24xf32>
    %p = jx.prim "reduce_window_max"[4](%r) {window_dimensions = "(1, 2, 2, 1)", window_strides = "(1, 2, 2, 1)", padding = "((0, 0), (0, 0), (0, 0), (0, 0))", base_dilation = "(1, 1, 1, 1)", window_dilation = "(1, 1, 1, 1)"} : (tensor<2x16x16x24xf32>) -> tensor<2x8x8x24xf32>
    %d = jx.prim "conv_general_dilated"[5](%p, %k2) {window_strides = "(1, 1)", padding = "((1, 1), (1, 1))", lhs_dilation = "(1, 1)", rhs_dilation = "(1, 1)", dimension_numbers = "ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))", feature_group_count = "1", batch_group_count = "1"} : (tensor<2x8x8x24xf32>, tensor<3x3x24x32xf32>) -> tensor<2x8x8x32xf32>
    %s = jx.prim "max"[6](%d, %z) : (tensor<2x8x8x32xf32>, tensor<f32>) -> tensor<2x8x8x32xf32>
    %m = jx.prim "reduce_sum"[7](%s) {axes = "(1, 2)"} : (tensor<2x8x8x32xf32>) -> tensor<2x32xf32>
    jx.yield %m : tensor<2x32xf32>
  }
}

// CHECK:      %z = jx.const[2] "0.0" : tensor<f32>
// CHECK-NEXT: %m = "jx.fused"(%x, %k1, %b, %z, %k2) ({
// CHECK-NEXT: ^bb0(%0: tensor<2x16x16x3xf32>, %1: tensor<3x3x3x24xf32>, %2: tensor<1x1x1x24xf32>, %3: tensor<f32>, %4: tensor<3x3x24x32xf32>):
// CHECK-NEXT:   %c = jx.prim "conv_general_dilated"[0](%0, %1)
// CHECK-NEXT:   %h = jx.prim "add"[1](%c, %2)
// CHECK-NEXT:   %r = jx.prim "max"[3](%h, %3)
// CHECK-NEXT:   %p = jx.prim "reduce_window_max"[4](%r)
// CHECK-NEXT:   %d = jx.prim "conv_general_dilated"[5](%p, %4)
// CHECK-NEXT:   %s = jx.prim "max"[6](%d, %3)
// CHECK-NEXT:   %m_1 = jx.prim "reduce_sum"[7](%s)
// CHECK-NEXT:   jx.yield %m_1 : tensor<2x32xf32>
// CHECK-NEXT: }) : (tensor<2x16x16x3xf32>, tensor<3x3x3x24xf32>, tensor<1x1x1x24xf32>, tensor<f32>, tensor<3x3x24x32xf32>) -> tensor<2x32xf32>
// CHECK-NEXT: jx.yield %m

// PLAIN:      %c = jx.prim "conv_general_dilated"[0](%x, %k1)
// PLAIN:      %p = jx.prim "reduce_window_max"[4]
// PLAIN:      %d = jx.prim "conv_general_dilated"[5](%p, %k2)
// PLAIN:      %m = "jx.fused"(%d, %z)
