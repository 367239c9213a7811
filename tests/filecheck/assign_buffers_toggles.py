# RUN: %python %s | filecheck %s
# Toggle rings: a carried value that a round may hand back is read where the body yielded it. Where
# the body computes the next value in place, one slot holds both (`yielded` with one slot); an inner
# loop that starts from the carried value, whose ring has two slots (a transpose each round), makes
# the position toggle between two slots each as large as that ring, which lies in the next one.
import jax.numpy as jnp
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.passes.assign import AssignBuffersPass


def show(fn, *args):
    module = jaxalloc.planned(fn, passes=("jx-dce",)).lower(*args).clone()
    AssignBuffersPass().apply(Context(), module)
    print(module)


def handed_back(x, xs):
    def body(c, s):
        c = lax.cond(s > 0.0, lambda v: v, lambda v: -v, c)
        c = lax.cond(s > 1.0, lambda v: v * 0.5, lambda v: v, c)
        return c, c.sum()

    return lax.scan(body, x, xs)[1]


def transposed(x, n):
    return lax.fori_loop(0, 2, lambda i, c: lax.fori_loop(0, n, lambda j, y: y.T, c), x @ x)


show(handed_back, jnp.ones((4, 4)), jnp.arange(3.0))
show(transposed, jnp.ones((4, 4)), 3)

# CHECK-LABEL: jx.func @handed_back
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [1], yielded, slots = [#mem.slot<offset = {{[0-9]+}}, size = 64>]>
# CHECK:           jx.case
# CHECK-SAME:        mem.slots = [#mem.next<1>]
# CHECK:             jx.prim "neg"
# CHECK-SAME:          mem.slot = #mem.next<1>
# CHECK-LABEL: jx.func @transposed
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [], yielded, slots = [#mem.slot<offset = {{[0-9]+}}, size = 128>, #mem.slot<offset = {{[0-9]+}}, size = 128>]>
# CHECK:           jx.while
# CHECK-SAME:        #mem.views<initial = [2], slots = [#mem.next<1>, #mem.next<1>]>
# CHECK:             jx.prim "transpose"
# CHECK-SAME:          mem.slot = #mem.next<2>
