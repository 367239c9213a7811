// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// Random bits of a Threefry key are the hash of each element's index under the key's two words,
// spelled out round by round (fresh keys past the module's largest, 0), in place of the op that
// JAX's CPU lowering runs as a loop with state the size of the draw.
builtin.module {
  jx.func @bits(%k: tensor<!jx.key<threefry2x32>>) -> tensor<4x8xui32> {
    %b = jx.prim "random_bits"[0](%k) {bit_width = "32", shape = "(4, 8)"} : (tensor<!jx.key<threefry2x32>>) -> tensor<4x8xui32>
    jx.yield %b : tensor<4x8xui32>
  }
}

// CHECK-LABEL: jx.func @bits
// CHECK-NOT:     random_bits
// CHECK:         jx.prim "random_unwrap"{{.*}}(%k)
// CHECK-COUNT-2: jx.prim "iota"
// CHECK-COUNT-20: jx.prim "shift_left"
// CHECK:         %b = jx.prim "xor"{{.*}} -> tensor<4x8xui32>
// CHECK-NEXT:    jx.yield %b : tensor<4x8xui32>
