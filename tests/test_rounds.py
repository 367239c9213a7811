"""`said_rounds_proven`: what a loop's own ops prove of the rounds it says it runs."""

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from xdsl.dialects.builtin import IntAttr

from jaxalloc.analysis.rounds import said_rounds_proven
from jaxalloc.dialects import jx
from jaxalloc.frontend.convert import convert


def _loop(f, *args):
    converted = convert(jax.make_jaxpr(f)(*args))
    loop = next(op for op in converted.func.walk() if isinstance(op, jx.WhileOp))
    return loop, converted.table


def _counting(x):
    return lax.fori_loop(2, 7, lambda i, x: x * 0.5 + i, x)


def _stopping_early(x):
    def cond(state):
        i, x = state
        return (i < 6) & (jnp.sum(x) > 0.1)

    return lax.while_loop(cond, lambda s: (s[0] + 1, s[1] * 0.5), (0, x))[1]


def _counting_by_two(x):
    return lax.while_loop(lambda s: s[0] < 6, lambda s: (s[0] + 2, s[1] * 0.5), (0, x))[1]


def test_a_loop_counting_from_a_constant_to_a_constant_proves_its_rounds():
    loop, constants = _loop(_counting, jnp.ones(4))
    assert loop.said_rounds == (5, None)
    assert said_rounds_proven(loop, constants)


def test_a_loop_that_also_stops_on_a_value_proves_its_at_most():
    loop, constants = _loop(_stopping_early, jnp.ones(4))
    assert loop.said_rounds == (None, 6)
    assert said_rounds_proven(loop, constants)
    loop.at_most = IntAttr(5)  # fewer than its ops allow: they prove nothing
    assert not said_rounds_proven(loop, constants)


@pytest.mark.parametrize("said", [4, 6])
def test_rounds_the_ops_do_not_count_are_not_proven(said):
    loop, constants = _loop(_counting, jnp.ones(4))
    loop.rounds = IntAttr(said)
    assert not said_rounds_proven(loop, constants)


def test_a_loop_that_does_not_count_by_one_proves_no_rounds():
    loop, constants = _loop(_counting_by_two, jnp.ones(4))
    assert loop.said_rounds == (None, None)
    assert said_rounds_proven(loop, constants)  # it says nothing to prove
    loop.rounds = IntAttr(3)  # 3 is right, but adding 2 is not what the proof reads
    assert not said_rounds_proven(loop, constants)
