# RUN: %python %s | filecheck %s
# A next value that may be either of two values of the body alive together: a branch computes
# `j @ j.T` from `j` while another hands `j` on (a third hands back the carried value). Each goes
# to a free slot of its own of the position's toggle ring, `j` to the second (`#mem.next<1, 1>`),
# so the ring has three slots: the current value's and one for each.
import jax.numpy as jnp
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.passes.assign import AssignBuffersPass


def handed_on_or_computed_from(x, ks):
    def body(carry, k):
        j = lax.cummax(x, axis=1)
        return lax.switch(k, [lambda: j @ j.T, lambda: j, lambda: carry]), None

    return lax.scan(body, x * 2, ks)[0]


module = jaxalloc.planned(handed_on_or_computed_from, passes=("jx-dce",)).lower(
    jnp.ones((3, 3)), jnp.zeros(4, jnp.int32)).clone()
AssignBuffersPass().apply(Context(), module)
print(module)

# CHECK-LABEL: jx.func @handed_on_or_computed_from
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [], yielded, slots = [#mem.slot<offset = {{[0-9]+}}, size = 64>, #mem.slot<offset = {{[0-9]+}}, size = 64>, #mem.slot<offset = {{[0-9]+}}, size = 64>]>
# CHECK:           jx.prim "cummax"
# CHECK-SAME:        mem.slot = #mem.next<1, 1>
# CHECK:           jx.case
# CHECK-SAME:        mem.slots = [#mem.next<1>], mem.phi = [array<i64: 1, 2>]
# CHECK:             jx.prim "dot_general"
# CHECK-SAME:          mem.slot = #mem.next<1>
