# RUN: %python %s | filecheck %s
# scan becomes a counted jx.while: the counter is carried first, xs[i] is read with a
# dynamic_slice, ys[i] is written in place into the carried stacked buffer.
import jax.numpy as jnp
from jax import lax

import jaxalloc


def forward(c, xs):
    return lax.scan(lambda c, x: (c + x, c * x), c, xs)


def backward(c, xs):
    return lax.scan(lambda c, x: (c + x, c * x), c, xs, reverse=True)


args = (jnp.zeros(3), jnp.ones((5, 3)))
print(jaxalloc.planned(forward, passes=("jx-dce",)).lower(*args))
print(jaxalloc.planned(backward, passes=("jx-dce",)).lower(*args))

# CHECK-LABEL: jx.func @forward(%a: tensor<3xf32>, %b: tensor<5x3xf32>) -> (tensor<3xf32>, tensor<5x3xf32>)
# CHECK:         %i = jx.const[{{[0-9]+}}] "0" : tensor<i32>
# CHECK:         %[[YS:.*]] = jx.prim "broadcast_in_dim"
# CHECK-SAME:      -> tensor<5x3xf32>
# CHECK:         %{{.*}}, %[[C:.*]], %[[Y:.*]] = jx.while(%i, %a, %[[YS]]) : (tensor<i32>, tensor<3xf32>, tensor<5x3xf32>) -> (tensor<i32>, tensor<3xf32>, tensor<5x3xf32>) rounds 5 cond {
# CHECK-NEXT:    ^{{.*}}(%[[I0:.*]]: tensor<i32>, %{{.*}}: tensor<3xf32>, %{{.*}}: tensor<5x3xf32>):
# CHECK-NEXT:      %[[N:.*]] = jx.const[{{[0-9]+}}] "5" : tensor<i32>
# CHECK-NEXT:      %[[P:.*]] = jx.prim "lt"[{{[0-9]+}}](%[[I0]], %[[N]])
# CHECK-NEXT:      jx.yield %[[P]] : tensor<i1>
# CHECK-NEXT:    } do {
# CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: tensor<i32>, %[[CARRY:.*]]: tensor<3xf32>, %[[STACK:.*]]: tensor<5x3xf32>):
# CHECK:           %[[ROW:.*]] = jx.prim "dynamic_slice"[{{[0-9]+}}](%b, %[[I]], %{{.*}}) {slice_sizes = "(1, 3)"}
# CHECK:           %[[X:.*]] = jx.prim "reshape"[{{[0-9]+}}](%[[ROW]])
# CHECK:           jx.prim "add"[{{[0-9]+}}](%[[CARRY]], %[[X]])
# CHECK:           jx.prim "dynamic_update_slice"[{{[0-9]+}}](%[[STACK]], %{{.*}}, %[[I]], %{{.*}})
# CHECK:           jx.yield
# CHECK-NEXT:    }
# CHECK-NEXT:    jx.yield %[[C]], %[[Y]] : tensor<3xf32>, tensor<5x3xf32>

# In reverse, round i reads and writes row 4 - i.
# CHECK-LABEL: jx.func @backward
# CHECK:         } do {
# CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: tensor<i32>, %{{.*}}: tensor<3xf32>, %{{.*}}: tensor<5x3xf32>):
# CHECK-NEXT:      %[[LAST:.*]] = jx.const[{{[0-9]+}}] "4" : tensor<i32>
# CHECK-NEXT:      %[[R:.*]] = jx.prim "sub"[{{[0-9]+}}](%[[LAST]], %[[I]])
# CHECK:           jx.prim "dynamic_slice"[{{[0-9]+}}](%b, %[[R]], %{{.*}})
# CHECK:           jx.prim "dynamic_update_slice"[{{[0-9]+}}](%{{.*}}, %{{.*}}, %[[R]], %{{.*}})
