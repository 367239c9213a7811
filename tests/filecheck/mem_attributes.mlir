// RUN: xdsl-opt %s | xdsl-opt | filecheck %s
// The plan attributes print readably and parse back.

builtin.module {
  jx.func @f(%x: tensor<1024xf32>) -> tensor<1024xf32> attributes {mem.arena = #mem.arena<bytes = 12288, outputs>} {
    %y = jx.prim "tanh"[0](%x) attributes {mem.slot = #mem.slot<offset = 0, size = 4096>} : (tensor<1024xf32>) -> tensor<1024xf32>
    %r = jx.while(%y) : (tensor<1024xf32>) -> tensor<1024xf32> attributes {mem.views = [#mem.views<initial = [0], slots = [#mem.slot<offset = 4096, size = 4096>, #mem.slot<offset = 8192, size = 4096>]>]} cond {
    ^bb0(%a: tensor<1024xf32>):
      %p = jx.const[1] "True" : tensor<i1>
      jx.yield %p : tensor<i1>
    } do {
    ^bb0(%b: tensor<1024xf32>):
      jx.yield %b : tensor<1024xf32>
    }
    jx.yield %r : tensor<1024xf32>
  }
}

// CHECK:      jx.func @f(%x: tensor<1024xf32>) -> tensor<1024xf32> attributes {mem.arena = #mem.arena<bytes = 12288, outputs>} {
// CHECK-NEXT:   %y = jx.prim "tanh"[0](%x) attributes {mem.slot = #mem.slot<offset = 0, size = 4096>} : (tensor<1024xf32>) -> tensor<1024xf32>
// CHECK-NEXT:   %r = jx.while(%y) : (tensor<1024xf32>) -> tensor<1024xf32> attributes {mem.views = [#mem.views<initial = [0], slots = [#mem.slot<offset = 4096, size = 4096>, #mem.slot<offset = 8192, size = 4096>]>]} cond {
