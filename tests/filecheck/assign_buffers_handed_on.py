# RUN: %python %s | filecheck %s
# Carried positions the body does not compute: a value from outside the loop, another position's
# value from outside and a constant are read where they are (`yielded` views, no ring); one value
# yielded at two positions is one ring for both.
import jax.numpy as jnp
import numpy as np
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.passes.assign import AssignBuffersPass


def show(fn, *args):
    module = jaxalloc.planned(fn, passes=("jx-dce",)).lower(*args).clone()
    AssignBuffersPass().apply(Context(), module)
    print(module)


def handed_on(x, n):
    y = jnp.sin(x)
    r = lax.fori_loop(0, n, lambda i, c: (y, c[0], np.zeros(16, np.float32)), (x, x * 2.0, x))
    return (r[0] + r[1] + r[2]).sum()


def twice(x, n):
    r = lax.fori_loop(0, n, lambda i, c: (jnp.tanh(c[0] @ c[1]),) * 2, (x, x * 2.0))
    return (r[0] + r[1]).sum()


show(handed_on, jnp.ones(16), 3)
show(twice, jnp.ones((16, 16)), 3)

# CHECK-LABEL: jx.func @handed_on
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [2], yielded>, #mem.views<initial = [3], yielded>, #mem.views<initial = [4], yielded>]
# CHECK-LABEL: jx.func @twice
# CHECK:         jx.while
# CHECK-SAME:      #mem.views<initial = [2], slots = [#mem.slot<offset = [[A:[0-9]+]], size = 1024>, #mem.slot<offset = [[B:[0-9]+]], size = 1024>]>, #mem.views<initial = [3], slots = [#mem.slot<offset = [[A]], size = 1024>, #mem.slot<offset = [[B]], size = 1024>]>]
