# RUN: %python %s | filecheck %s
# A chain of cases inside a branch, each either handing its operand on or computing from it: the
# inner results are computed into the memory of the outer case's result, each in place of the one
# before, and that result views what the branch hands back (an argument, after no computing branch),
# where it had a slot of its own and a copy into it.
import jax.numpy as jnp
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.passes.assign import AssignBuffersPass


def chained(p, q, b):
    def computes(b):
        s = lax.cond(q, lambda v: v + 1.0, lambda v: v, b)
        v = lax.cond(p, lambda v: -v, lambda v: v, s)
        return v, v

    def other(b):
        x = jnp.minimum(b, b)
        return x, x

    z, y = lax.cond(p & q, other, computes, b)
    return y, z


module = jaxalloc.planned(chained, passes=("jx-dce",)).lower(jnp.bool_(True), jnp.bool_(False), jnp.float32(2.0)).clone()
AssignBuffersPass(include_outputs=True).apply(Context(), module)
print(module)

# CHECK-LABEL: jx.func @chained
# CHECK:         jx.case
# CHECK-SAME:      mem.slots = [#mem.slot<offset = [[OUT:[0-9]+]], size = 64>, #mem.slot<offset = {{[0-9]+}}, size = 64>], mem.phi = [array<i64: 0>, array<i64: 0, 1>]
# CHECK:           jx.case
# CHECK-SAME:        mem.slots = [#mem.slot<offset = [[OUT]], size = 64>], mem.phi = [array<i64: 0>]
# CHECK:             jx.prim "add"
# CHECK-SAME:          mem.slot = #mem.slot<offset = [[OUT]], size = 64>
# CHECK:           jx.case
# CHECK-SAME:        mem.slots = [#mem.slot<offset = [[OUT]], size = 64>], mem.phi = [array<i64: 0>]
# CHECK:             jx.prim "neg"
# CHECK-SAME:          mem.slot = #mem.slot<offset = [[OUT]], size = 64>
