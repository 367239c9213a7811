// RUN: xdsl-opt %s --parsing-diagnostics | filecheck %s
// A jx.case has one index operand; more is a parse error, not a crash.

builtin.module {
  jx.func @f(%x: tensor<f32>, %i: tensor<i32>) -> tensor<f32> {
    %r = jx.case(%i, %i) : (tensor<i32>, tensor<i32>) -> tensor<f32> {
      jx.yield %x : tensor<f32>
    }
    jx.yield %r : tensor<f32>
  }
}
// CHECK: jx.case takes exactly one index operand
