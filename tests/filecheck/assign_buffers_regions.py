# RUN: %python %s | filecheck %s
# Planned IR of sub-graphs: a case's branches share one block and compute their result in the case
# result's slot; a loop carry gets a multi-view (x = f(x): two slots after the init operand read in
# place, the body computing the next round's value straight into its next view); scan's stacked ys
# is updated in place in one slot that is the init buffer itself; a
# rotation of four carries shares one ring of four slots.
import jax.numpy as jnp
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.passes.assign import AssignBuffersPass


def show(fn, *args):
    module = jaxalloc.planned(fn, passes=("jx-dce",)).lower(*args).clone()
    AssignBuffersPass().apply(Context(), module)
    print(module)


def branches(p, x):
    r = lax.cond(p, lambda x: jnp.sin(x @ x).sum(0), lambda x: jnp.cos(x).sum(0), x)
    return r @ r


def carry(x, w):
    return lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c @ w), x).sum()


def stacked(x):
    return lax.scan(lambda c, _: (c, c * 2.0), x, None, length=5)[1].sum()


def rotate(a, b, c, d):
    return sum(lax.fori_loop(0, 6, lambda i, s: (s[1], s[2], s[3], s[0] * 2.0), (a, b, c, d)))


show(branches, True, jnp.ones((16, 16)))
show(carry, jnp.ones((16, 16)), jnp.ones((16, 16)))
show(stacked, jnp.ones(16))
show(rotate, *[jnp.ones(16)] * 4)

# CHECK-LABEL: jx.func @branches
# CHECK:         %[[R:.*]] = jx.case(%{{.*}}) : (tensor<i32>) -> tensor<16xf32> attributes {mem.slots = [#mem.slot<offset = [[RES:[0-9]+]], size = 64>]} {
# CHECK-NEXT:      jx.prim "cos"{{.*}} attributes {mem.slot = #mem.slot<offset = [[T:[0-9]+]], size = 1024>}
# CHECK-NEXT:      jx.prim "reduce_sum"{{.*}} attributes {mem.slot = #mem.slot<offset = [[RES]], size = 64>}
# CHECK:         }, {
# CHECK-NEXT:      jx.prim "dot_general"{{.*}} attributes {mem.slot = #mem.slot<offset = [[T]], size = 1024>}
# CHECK-NEXT:      jx.prim "sin"{{.*}} attributes {mem.slot = #mem.slot<offset = [[T]], size = 1024>}
# CHECK-NEXT:      jx.prim "reduce_sum"{{.*}} attributes {mem.slot = #mem.slot<offset = [[RES]], size = 64>}

# CHECK-LABEL: jx.func @carry
# CHECK:         jx.while
# CHECK-SAME:      mem.views = [#mem.views<initial = [0], slots = [#mem.slot<offset = {{[0-9]+}}, size = 64>]>, #mem.views<initial = [1], slots = [#mem.slot<offset = [[S0:[0-9]+]], size = 1024>, #mem.slot<offset = {{[0-9]+}}, size = 1024>]>]
# CHECK:         } do {
# CHECK:           jx.prim "dot_general"{{.*}} attributes {mem.slot = #mem.next<1>}
# CHECK-NEXT:      jx.prim "tanh"{{.*}} attributes {mem.slot = #mem.next<1>}
# CHECK:           jx.prim "add"{{.*}} attributes {mem.slot = #mem.next<0>}

# CHECK-LABEL: jx.func @stacked
# CHECK:         %[[YS:.*]] = jx.prim "broadcast_in_dim"{{.*}} attributes {mem.slot = #mem.slot<offset = [[B:[0-9]+]], size = 320>}
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [], slots = [#mem.slot<offset = [[B]], size = 320>]>]

# CHECK-LABEL: jx.func @rotate
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [1, 2, 3, 4], slots = [#mem.slot<offset = [[A:[0-9]+]], size = 64>, #mem.slot<offset = [[B:[0-9]+]], size = 64>, #mem.slot<offset = [[C:[0-9]+]], size = 64>, #mem.slot<offset = [[D:[0-9]+]], size = 64>]>
# CHECK-SAME:      #mem.views<initial = [4], slots = [#mem.slot<offset = [[A]], size = 64>, #mem.slot<offset = [[B]], size = 64>, #mem.slot<offset = [[C]], size = 64>, #mem.slot<offset = [[D]], size = 64>]>]
