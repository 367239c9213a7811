// RUN: xdsl-opt %s --verify-diagnostics --split-input-file | filecheck %s
// The jx verifiers name what is wrong.

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %i = jx.const[0] "0" : tensor<i64>
    %r = jx.case(%i) : (tensor<i64>) -> tensor<3xf32> {
      jx.yield %x : tensor<3xf32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.case index must be one i32 scalar (tensor<i32>)

// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %i = jx.const[0] "0" : tensor<i32>
    %r = jx.case(%i) : (tensor<i32>) -> tensor<3xf32> {
      jx.yield %x : tensor<3xf32>
    }, {
      jx.yield %i : tensor<i32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.case branch 1 yields (tensor<i32>) but (tensor<3xf32>) is expected

// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %r = jx.while(%x) : (tensor<3xf32>) -> tensor<3xf32> cond {
    ^bb0(%a: tensor<3xf32>):
      jx.yield %a : tensor<3xf32>
    } do {
    ^bb0(%b: tensor<3xf32>):
      jx.yield %b : tensor<3xf32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.while condition yields (tensor<3xf32>) but (tensor<i1>) is expected

// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %r = jx.while(%x) : (tensor<3xf32>) -> tensor<3xf32> cond {
    ^bb0(%a: tensor<3xf32>, %n: tensor<i32>):
      %p = jx.const[0] "True" : tensor<i1>
      jx.yield %p : tensor<i1>
    } do {
    ^bb0(%b: tensor<3xf32>):
      jx.yield %b : tensor<3xf32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.while condition arguments must have the types of the loop-carried operands

// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %c = jx.const[0] "1" : tensor<i32>
    jx.yield %c : tensor<i32>
  }
}
// CHECK: jx.func body yields (tensor<i32>) but (tensor<3xf32>) is expected


// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %r = jx.while(%x) : (tensor<3xf32>) -> tensor<3xf32> rounds -1 cond {
    ^bb0(%a: tensor<3xf32>):
      %p = jx.const[0] "True" : tensor<i1>
      jx.yield %p : tensor<i1>
    } do {
    ^bb0(%b: tensor<3xf32>):
      jx.yield %b : tensor<3xf32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.while cannot run -1 rounds

// -----

builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %r = jx.while(%x) : (tensor<3xf32>) -> tensor<3xf32> rounds 2 at_most 3 cond {
    ^bb0(%a: tensor<3xf32>):
      %p = jx.const[0] "True" : tensor<i1>
      jx.yield %p : tensor<i1>
    } do {
    ^bb0(%b: tensor<3xf32>):
      jx.yield %b : tensor<3xf32>
    }
    jx.yield %r : tensor<3xf32>
  }
}
// CHECK: jx.while at_most must count rounds (0 or more), on a loop without `rounds`
