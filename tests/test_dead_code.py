"""The frontend emits no value nothing needs: dead ops, loop positions and case results go, effects stay."""

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.testing.differential import check_program

X4 = jnp.arange(4.0)


def _ops(fn, *args, kind=jx.PrimOp):
    return [op for op in jaxalloc.planned(fn).lower(*args).walk() if isinstance(op, kind)]


def handed_a_carry_nobody_reads(x, p):
    """Position `b` is handed `c`'s carry every round, and nothing reads `b`: it would need a copy
    whenever the branch hands `c` back."""

    def body(i, s):
        b, c = s
        return c, lax.cond(i % 2 == p, jnp.sin, lambda v: v, c)

    return lax.fori_loop(0, 4, body, (x * 1.0, x * 2.0))[1].sum()


def unused_ys(x):
    carry, ys = lax.scan(lambda c, r: (c + r, jnp.outer(c, r)), x, jnp.ones((3, 4)))
    return carry


def unused_case_result(x, p):
    a, b = lax.cond(p, lambda v: (jnp.sin(v), jnp.outer(v, v)), lambda v: (jnp.cos(v), jnp.outer(v, v) * 2.0), x)
    return a


def test_planning_the_jaxpr_as_traced_keeps_what_nothing_needs():
    (loop,) = [op for op in jaxalloc.planned(unused_ys, passes=()).lower(X4).walk() if isinstance(op, jx.WhileOp)]
    assert len(loop.inits) == 3  # the counter, the carry and the stacked ys
    check_program(unused_ys, X4, mode="checked", passes=())


@pytest.mark.parametrize("p", [0, 1])
def test_a_loop_position_nobody_reads_is_gone_and_nothing_is_copied(p):
    (loop,) = _ops(handed_a_carry_nobody_reads, X4, p, kind=jx.WhileOp)
    assert [v.type.get_shape() for v in loop.inits] == [(), (), (4,)]  # scan's counter, `i` and `c`
    for mode in ("arena", "checked"):
        planned = check_program(handed_a_carry_nobody_reads, X4, p, mode=mode)
        assert planned.last_run.copied_bytes == 0


def test_a_scan_output_nobody_reads_gets_no_stacked_buffer():
    (loop,) = _ops(unused_ys, X4, kind=jx.WhileOp)
    assert [v.type.get_shape() for v in loop.inits] == [(), (4,)]
    assert not any(op.primitive.data == "dot_general" for op in _ops(unused_ys, X4))
    check_program(unused_ys, X4, mode="checked")


def test_a_case_result_nobody_reads_is_gone_from_every_branch():
    (case,) = _ops(unused_case_result, X4, True, kind=jx.CaseOp)
    assert [r.type.get_shape() for r in case.results] == [(4,)]
    assert all(len(branch.block.ops) == 2 for branch in case.branches)  # sin or cos, and the yield
    for p in (True, False):
        check_program(unused_case_result, X4, p, mode="checked")


def test_ops_with_effects_and_the_loops_around_them_stay(capfd):
    def effects(x):
        def body(i, c):
            jax.debug.print("round {}", i, ordered=True)
            return c * 2.0

        lax.fori_loop(0, 2, body, x)  # its result is never read
        return x + 1.0

    jax.jit(effects)(X4)
    jax.effects_barrier()
    expected = capfd.readouterr().out
    assert expected.splitlines() == ["round 0", "round 1"]
    (callback,) = [op for op in _ops(effects, X4) if op.effect is not None]
    assert callback.primitive.data == "debug_print" and " effect" in str(callback)
    assert len(_ops(effects, X4, kind=jx.WhileOp)) == 1
    check_program(effects, X4, mode="checked")
    jax.effects_barrier()
    assert capfd.readouterr().out == expected * 2  # check_program runs jit once more
