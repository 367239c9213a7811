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


# A loop that also stops on a value it computes says the most rounds it can run: the least of its
# counters' bounds; one that can run none is its init operands.
def count_or_settle(x):
    def cond(s):
        return (s[0] < 4) & ((jnp.sum(s[2]) > 1.0) & (s[1] < 6))

    _, _, y = lax.while_loop(cond, lambda s: (s[0] + 1, s[1] + 1, s[2] * 0.5), (jnp.int32(0), jnp.int32(3), x))
    _, z = lax.while_loop(lambda s: (s[0] < 2) & (jnp.sum(s[1]) > 1.0), lambda s: (s[0] + 1, s[1] * 0.5),
                          (jnp.int32(2), y))
    return z


print(jaxalloc.planned(count_or_settle, passes=("jx-dce",)).lower(jnp.ones(4)))

# CHECK-LABEL: jx.func @count_or_settle(%a: tensor<4xf32>) -> tensor<4xf32>
# CHECK:         %{{.*}}, %{{.*}}, %[[Y:.*]] = jx.while(%{{.*}}, %{{.*}}, %a) : ({{.*}}) -> ({{.*}}) at_most 3 cond {
# CHECK-NOT:     jx.while
# CHECK:         jx.yield %[[Y]] : tensor<4xf32>


# A fori_loop up to a bound it is handed says the most rounds it can run where the ops before it
# tell the bound's most (a clip, a minimum with a constant); one it cannot tell says nothing.
def count_to_clipped(x, n):
    y = lax.fori_loop(0, jnp.clip(n, 0, 2), lambda i, c: c * 2.0, x)
    return lax.fori_loop(0, n, lambda i, c: c * 2.0, y)


print(jaxalloc.planned(count_to_clipped, passes=("jx-dce",)).lower(jnp.ones(4), 3))

# CHECK-LABEL: jx.func @count_to_clipped(%a: tensor<4xf32>, %b: tensor<i32>) -> tensor<4xf32>
# CHECK:         jx.while({{.*}}) : ({{.*}}) -> ({{.*}}) at_most 2 cond {
# CHECK:         jx.while({{.*}}) : ({{.*}}) -> ({{.*}}) cond {


# A while_loop whose condition computes its bound from values from outside (`jnp.clip`, an inlined
# call of `min`, `max` and conversions) says the most rounds it can run too.
def count_to_a_bound_it_computes(x, n):
    _, y = lax.while_loop(lambda s: s[0] < jnp.clip(n, 0, 3), lambda s: (s[0] + 1, s[1] * 2.0), (0, x))
    _, z = lax.while_loop(lambda s: s[0] < jnp.maximum(n, 2), lambda s: (s[0] + 1, s[1] * 2.0), (0, y))
    return z


print(jaxalloc.planned(count_to_a_bound_it_computes, passes=("jx-dce",)).lower(jnp.ones(4), 3))

# CHECK-LABEL: jx.func @count_to_a_bound_it_computes(%a: tensor<4xf32>, %b: tensor<i32>) -> tensor<4xf32>
# CHECK:         jx.while({{.*}}) : ({{.*}}) -> ({{.*}}) at_most 3 cond {
# CHECK:         jx.while({{.*}}) : ({{.*}}) -> ({{.*}}) cond {


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
