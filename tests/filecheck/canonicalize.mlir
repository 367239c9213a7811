// RUN: xdsl-opt %s -p jx-canonicalize | filecheck %s

// Each rewrite of jx-canonicalize on IR text alone (no side table: rebound ops take fresh keys past
// the module's largest, 28, and print their new parameters).
builtin.module {
  jx.func @transposes(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<2x5xf32>) -> (tensor<2x3x5xf32>, tensor<5x3xf32>, tensor<3x4x2xf32>, tensor<3x4xf32>, tensor<4x3x5xf32>) {
    // a transpose read only by a dot_general becomes its dimension numbers (rhs contracts its dim 1)
    %wt = jx.prim "transpose"[0](%w) {permutation = "(1, 0)"} : (tensor<5x4xf32>) -> tensor<4x5xf32>
    %d = jx.prim "dot_general"[1](%x, %wt) {dimension_numbers = "(((2,), (0,)), ((), ()))", precision = "(Precision.HIGHEST, Precision.DEFAULT)", preferred_element_type = "float32"} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    // a transpose swapping a dot_general result's free dims swaps its operands (and precisions)
    %e = jx.prim "dot_general"[2](%a, %b) {dimension_numbers = "(((1,), (0,)), ((), ()))", precision = "(Precision.HIGHEST, Precision.DEFAULT)", preferred_element_type = "float32"} : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %et = jx.prim "transpose"[3](%e) {permutation = "(1, 0)"} : (tensor<3x5xf32>) -> tensor<5x3xf32>
    // two transposes compose into one, (1, 0, 2) then (0, 2, 1) = (1, 2, 0), or cancel
    %p = jx.prim "transpose"[4](%x) {permutation = "(1, 0, 2)"} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
    %q = jx.prim "transpose"[5](%p) {permutation = "(0, 2, 1)"} : (tensor<3x2x4xf32>) -> tensor<3x4x2xf32>
    %r = jx.prim "transpose"[6](%a) {permutation = "(1, 0)"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
    %s = jx.prim "transpose"[7](%r) {permutation = "(1, 0)"} : (tensor<4x3xf32>) -> tensor<3x4xf32>
    // kept: folded, dot_general would give the lhs free dims as (3, 4) where the transpose gives (4, 3)
    %u = jx.prim "transpose"[8](%x) {permutation = "(2, 1, 0)"} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
    %v = jx.prim "dot_general"[9](%u, %c) {dimension_numbers = "(((2,), (0,)), ((), ()))", preferred_element_type = "float32"} : (tensor<4x3x2xf32>, tensor<2x5xf32>) -> tensor<4x3x5xf32>
    jx.yield %d, %et, %q, %s, %v : tensor<2x3x5xf32>, tensor<5x3xf32>, tensor<3x4x2xf32>, tensor<3x4xf32>, tensor<4x3x5xf32>
  }
  jx.func @views(%x: tensor<2x3x4xf32>, %k: tensor<2x1x4xf32>, %v: tensor<4xf32>, %y: tensor<3x4xf32>, %s: tensor<f32>, %p: tensor<3x4xi1>) -> (tensor<24xf32>, tensor<8xf32>, tensor<1x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>) {
    // a reshape (or squeeze) of a reshape (or squeeze) is one reshape (the same binding, key kept)
    %r1 = jx.prim "reshape"[10](%x) {new_sizes = "(6, 4)"} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
    %r2 = jx.prim "reshape"[11](%r1) {new_sizes = "(24,)"} : (tensor<6x4xf32>) -> tensor<24xf32>
    %sq = jx.prim "squeeze"[12](%k) {dimensions = "(1,)"} : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
    %r3 = jx.prim "reshape"[13](%sq) {new_sizes = "(8,)"} : (tensor<2x4xf32>) -> tensor<8xf32>
    // a broadcast that only inserts a size-1 dim is a reshape, a view
    %e = jx.prim "broadcast_in_dim"[14](%v) {shape = "(1, 4)", broadcast_dimensions = "(1,)"} : (tensor<4xf32>) -> tensor<1x4xf32>
    // broadcasts read only by ops that broadcast themselves: a view with size-1 dims, a scalar as is
    %bv = jx.prim "broadcast_in_dim"[15](%v) {shape = "(3, 4)", broadcast_dimensions = "(np.int64(1),)"} : (tensor<4xf32>) -> tensor<3x4xf32>
    %sum = jx.prim "add"[16](%y, %bv) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %bs = jx.prim "broadcast_in_dim"[17](%s) {shape = "(3, 4)", broadcast_dimensions = "()"} : (tensor<f32>) -> tensor<3x4xf32>
    %prod = jx.prim "mul"[18](%bs, %sum) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    // kept: select_n does not broadcast
    %bk = jx.prim "broadcast_in_dim"[19](%s) {shape = "(3, 4)", broadcast_dimensions = "()"} : (tensor<f32>) -> tensor<3x4xf32>
    %sel = jx.prim "select_n"[20](%p, %bk, %y) : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    // a reduction over size-1 dims is a reshape
    %red = jx.prim "reduce_sum"[21](%k) {axes = "(1,)"} : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
    jx.yield %r2, %r3, %e, %prod, %sel, %red : tensor<24xf32>, tensor<8xf32>, tensor<1x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>
  }
  jx.func @round_trips(%h: tensor<8xf16>, %f: tensor<8xf32>) -> (tensor<8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
    // f16 -> f32 -> f16 is exact and goes; f32 -> f16 -> f32 rounds and stays; stop_gradient goes,
    // and so does a copy of a value nothing else reads (a copy of one read elsewhere stays)
    %w = jx.prim "convert_element_type"[22](%h) {new_dtype = "float32", weak_type = "False"} : (tensor<8xf16>) -> tensor<8xf32>
    %n = jx.prim "convert_element_type"[23](%w) {new_dtype = "float16", weak_type = "False"} : (tensor<8xf32>) -> tensor<8xf16>
    %l = jx.prim "convert_element_type"[24](%f) {new_dtype = "float16", weak_type = "False"} : (tensor<8xf32>) -> tensor<8xf16>
    %m = jx.prim "convert_element_type"[25](%l) {new_dtype = "float32", weak_type = "False"} : (tensor<8xf16>) -> tensor<8xf32>
    %g = jx.prim "stop_gradient"[26](%f) : (tensor<8xf32>) -> tensor<8xf32>
    %k = jx.prim "neg"[28](%f) : (tensor<8xf32>) -> tensor<8xf32>
    %c = jx.prim "copy"[27](%k) : (tensor<8xf32>) -> tensor<8xf32>
    %d = jx.prim "copy"[27](%m) : (tensor<8xf32>) -> tensor<8xf32>
    jx.yield %n, %m, %g, %c, %d : tensor<8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
  jx.func @same_type(%x: tensor<4xf32>, %s: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
    // a conversion to its operand's own type (a weak type made strong) of a value the block does not
    // hand on is the value; of one it hands on, and of a constant, it stays
    %two = jx.const[0] "2.5" : tensor<f32>
    %t = jx.prim "convert_element_type"[22](%two) {new_dtype = "float32", weak_type = "False"} : (tensor<f32>) -> tensor<f32>
    %u = jx.prim "convert_element_type"[22](%s) {new_dtype = "float32", weak_type = "False"} : (tensor<f32>) -> tensor<f32>
    %v = jx.prim "convert_element_type"[22](%s) {new_dtype = "float32", weak_type = "False"} : (tensor<f32>) -> tensor<f32>
    %y = jx.prim "mul"[18](%x, %t) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %z = jx.prim "mul"[18](%y, %u) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    jx.yield %z, %v : tensor<4xf32>, tensor<f32>
  }
}

// CHECK-LABEL: jx.func @transposes
// CHECK-NEXT:    %d = jx.prim "dot_general"[29](%x, %w) {dimension_numbers = "(((2,), (1,)), ((), ()))", precision = "(Precision.HIGHEST, Precision.DEFAULT)", preferred_element_type = "float32"} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT:    %et = jx.prim "dot_general"[30](%b, %a) {dimension_numbers = "(((0,), (1,)), ((), ()))", precision = "(Precision.DEFAULT, Precision.HIGHEST)", preferred_element_type = "float32"} : (tensor<4x5xf32>, tensor<3x4xf32>) -> tensor<5x3xf32>
// CHECK-NEXT:    %q = jx.prim "transpose"[31](%x) {permutation = "(1, 2, 0)"} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT:    %u = jx.prim "transpose"[8](%x) {permutation = "(2, 1, 0)"}
// CHECK-NEXT:    %v = jx.prim "dot_general"[9](%u, %c) {dimension_numbers = "(((2,), (0,)), ((), ()))"
// CHECK-NEXT:    jx.yield %d, %et, %q, %a, %v

// CHECK-LABEL: jx.func @views
// CHECK-NEXT:    %r2 = jx.prim "reshape"[11](%x) {new_sizes = "(24,)"} : (tensor<2x3x4xf32>) -> tensor<24xf32>
// CHECK-NEXT:    %r3 = jx.prim "reshape"[13](%k) {new_sizes = "(8,)"} : (tensor<2x1x4xf32>) -> tensor<8xf32>
// CHECK-NEXT:    %e = jx.prim "reshape"[32](%v) {new_sizes = "(1, 4)"} : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %bv = jx.prim "reshape"[33](%v) {new_sizes = "(1, 4)"} : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %sum = jx.prim "add"[16](%y, %bv) : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %prod = jx.prim "mul"[18](%s, %sum) : (tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %bk = jx.prim "broadcast_in_dim"[19](%s)
// CHECK-NEXT:    %sel = jx.prim "select_n"[20](%p, %bk, %y)
// CHECK-NEXT:    %red = jx.prim "reshape"[34](%k) {new_sizes = "(2, 4)"} : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    jx.yield %r2, %r3, %e, %prod, %sel, %red

// CHECK-LABEL: jx.func @round_trips
// CHECK-NEXT:    %l = jx.prim "convert_element_type"[24](%f) {new_dtype = "float16", weak_type = "False"}
// CHECK-NEXT:    %m = jx.prim "convert_element_type"[25](%l) {new_dtype = "float32", weak_type = "False"}
// CHECK-NEXT:    %k = jx.prim "neg"[28](%f)
// CHECK-NEXT:    %d = jx.prim "copy"[27](%m)
// CHECK-NEXT:    jx.yield %h, %m, %f, %k, %d : tensor<8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>

// CHECK-LABEL: jx.func @same_type
// CHECK-NEXT:    %two = jx.const[0] "2.5" : tensor<f32>
// CHECK-NEXT:    %t = jx.prim "convert_element_type"[22](%two) {new_dtype = "float32", weak_type = "False"}
// CHECK-NEXT:    %v = jx.prim "convert_element_type"[22](%s) {new_dtype = "float32", weak_type = "False"}
// CHECK-NEXT:    %y = jx.prim "mul"[18](%x, %t)
// CHECK-NEXT:    %z = jx.prim "mul"[18](%y, %s)
// CHECK-NEXT:    jx.yield %z, %v
