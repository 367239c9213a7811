// RUN: xdsl-opt %s -p jx-schedule | filecheck %s
// jx-schedule reorders a block where that lowers the max-live bound: three big values computed
// before any is reduced (3 x 4 KiB live) become three chains, each reduced before the next
// starts (4 KiB); the print with an effect stays before the one after it.

builtin.module {
  jx.func @f(%x: tensor<1024xf32>) -> tensor<f32> {
    %a = jx.prim "sin"[0](%x) : (tensor<1024xf32>) -> tensor<1024xf32>
    %b = jx.prim "cos"[1](%x) : (tensor<1024xf32>) -> tensor<1024xf32>
    %c = jx.prim "exp"[2](%x) : (tensor<1024xf32>) -> tensor<1024xf32>
    jx.prim "debug_callback"[3](%x) effect : (tensor<1024xf32>) -> ()
    %sa = jx.prim "reduce_sum"[4](%a) {axes = "(0,)"} : (tensor<1024xf32>) -> tensor<f32>
    %sb = jx.prim "reduce_sum"[5](%b) {axes = "(0,)"} : (tensor<1024xf32>) -> tensor<f32>
    jx.prim "debug_callback"[6](%x) effect : (tensor<1024xf32>) -> ()
    %sc = jx.prim "reduce_sum"[7](%c) {axes = "(0,)"} : (tensor<1024xf32>) -> tensor<f32>
    %ab = jx.prim "add"[8](%sa, %sb) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %abc = jx.prim "add"[9](%ab, %sc) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    jx.yield %abc : tensor<f32>
  }
}

// CHECK:      jx.prim "debug_callback"[3](%x) effect
// CHECK-NEXT: jx.prim "debug_callback"[6](%x) effect
// CHECK-NEXT: %a = jx.prim "sin"[0](%x)
// CHECK-NEXT: %sa = jx.prim "reduce_sum"[4](%a)
// CHECK-NEXT: %b = jx.prim "cos"[1](%x)
// CHECK-NEXT: %sb = jx.prim "reduce_sum"[5](%b)
// CHECK-NEXT: %ab = jx.prim "add"[8](%sa, %sb)
// CHECK-NEXT: %c = jx.prim "exp"[2](%x)
// CHECK-NEXT: %sc = jx.prim "reduce_sum"[7](%c)
// CHECK-NEXT: %abc = jx.prim "add"[9](%ab, %sc)
