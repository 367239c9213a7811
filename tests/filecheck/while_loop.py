# RUN: %python %s | filecheck %s
# while_loop becomes jx.while: the condition region yields an i1 scalar, the body yields
# the next carried values; loop constants are used directly from the enclosing block.
import jax.numpy as jnp
from jax import lax

import jaxalloc


def halve_until_small(x, limit):
    return lax.while_loop(lambda x: jnp.sum(x) > limit, lambda x: x * 0.5, x)


print(jaxalloc.planned(halve_until_small, passes=("jx-dce",)).lower(jnp.ones(4), jnp.float32(0.1)))

# CHECK-LABEL: jx.func @halve_until_small(%a: tensor<4xf32>, %b: tensor<f32>) -> tensor<4xf32>
# CHECK-NEXT:    %[[R:.*]] = jx.while(%a) : (tensor<4xf32>) -> tensor<4xf32> cond {
# CHECK-NEXT:    ^{{.*}}(%[[X:.*]]: tensor<4xf32>):
# CHECK-NEXT:      %[[S:.*]] = jx.prim "reduce_sum"[{{[0-9]+}}](%[[X]]) {axes = "(0,)"}
# CHECK-NEXT:      %[[P:.*]] = jx.prim "gt"[{{[0-9]+}}](%[[S]], %b) : (tensor<f32>, tensor<f32>) -> tensor<i1>
# CHECK-NEXT:      jx.yield %[[P]] : tensor<i1>
# CHECK-NEXT:    } do {
# CHECK-NEXT:    ^{{.*}}(%[[Y:.*]]: tensor<4xf32>):
# CHECK-NEXT:      %[[H:.*]] = jx.const[{{[0-9]+}}] "0.5" : tensor<f32>
# CHECK-NEXT:      %[[Z:.*]] = jx.prim "mul"[{{[0-9]+}}](%[[Y]], %[[H]])
# CHECK-NEXT:      jx.yield %[[Z]] : tensor<4xf32>
# CHECK-NEXT:    }
# CHECK-NEXT:    jx.yield %[[R]] : tensor<4xf32>


# A loop counting from a constant to a constant says how many rounds it runs; one that runs none
# is its init operands.
def count_to_three(x):
    _, y = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0), (jnp.int32(0), x))
    _, z = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 2.0), (jnp.int32(5), y))
    return z


print(jaxalloc.planned(count_to_three, passes=("jx-dce",)).lower(jnp.ones(4)))

# CHECK-LABEL: jx.func @count_to_three(%a: tensor<4xf32>) -> tensor<4xf32>
# CHECK:         %{{.*}}, %[[Y:.*]] = jx.while(%{{.*}}, %a) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) rounds 3 cond {
# CHECK-NOT:     jx.while
# CHECK:         jx.yield %[[Y]] : tensor<4xf32>


# A result that is always a value from before the loop is that value: a carry the body keeps, a
# swap run a known number of rounds, a value from outside the loop handed to a position.
def handed_back(x, y, n):
    kept, _ = lax.while_loop(lambda s: s[1] < n, lambda s: (s[0], s[1] + 1), (x, 0))
    swapped = lax.fori_loop(0, 3, lambda i, c: (c[1], c[0]), (x, y))
    outside = lax.fori_loop(0, 2, lambda i, c: y, x)
    return kept, swapped, outside


print(jaxalloc.planned(handed_back, passes=("jx-dce",)).lower(jnp.ones(4), jnp.zeros(4), 3))

# CHECK-LABEL: jx.func @handed_back(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<i32>)
# CHECK:         jx.yield %a, %b, %a, %b : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
