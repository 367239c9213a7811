"""`planned(f, donate_argnums=..., donate_argnames=...)`: a donated argument is a row of the arena from
the start to its last use, written there as the call starts, so later values and the outputs may
take its bytes, as XLA aliases an output with a donated buffer. Results match
`jax.jit(f, donate_argnums=...)` in every mode, both checkers know the argument is written at entry,
and `compare_xla` compiles XLA with the same donation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, Builtin
from xdsl.parser import Parser

import jaxalloc
from jaxalloc.checks.plan_check import check_planned
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import MEM
from jaxalloc.testing.differential import AS_TRACED
from jaxalloc.xla.memory import FUSION_OFF

N = 4096
FUSED = ("jx-dce", "jx-fuse")
"""XLA computes `params - lr * grad` as one fusion; planned as one op, the update runs in place."""
TOLERANCE = dict(rtol=2e-5, atol=2e-6)
"""Op by op rounds between ops where jit may fuse (README: results agree within float tolerance)."""


def sgd(params, grad, lr):
    return params - lr * grad


def reads_after_output(p, g):
    """`p` is read again after the output `out` is written: `out` must not take its bytes."""
    out = p * 2.0
    return out, jnp.sin(out) + p * g


def fori(x, y):
    return lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * y, x)


def tree_step(params, x):
    return jax.tree.map(lambda p: p - 0.1 * jnp.tanh(p * x.sum()), params)


def _args():
    return jnp.linspace(-1.0, 1.0, N), jnp.linspace(0.0, 2.0, N), 0.1


def _func(plan: jaxalloc.Plan) -> jx.FuncOp:
    return next(iter(plan.module.ops))


def _op(plan: jaxalloc.Plan, primitive: str) -> jx.PrimOp:
    return next(op for op in _func(plan).walk() if isinstance(op, jx.PrimOp) and op.primitive.data == primitive)


def test_the_updated_params_take_the_donated_params_bytes():
    params, grad, lr = _args()
    kept = jaxalloc.planned(sgd, passes=FUSED).plan(params, grad, lr, include_outputs=True)
    donated = jaxalloc.planned(sgd, passes=FUSED, donate_argnums=0).plan(params, grad, lr, include_outputs=True)
    func = _func(donated)
    (update,) = [op for op in func.body.block.ops if isinstance(op, jx.FusedOp)]
    assert func.attributes["mem.args"].data[0] == update.attributes["mem.slot"]  # computed in place
    assert donated.donated == (0,) and "mem.args" not in _func(kept).attributes
    # without donation the caller holds the params beside the arena; with it the arena is all
    assert donated.arena_bytes == kept.arena_bytes
    saved = kept.arena_bytes + params.nbytes - donated.arena_bytes
    assert saved == params.nbytes
    # unfused, `lr * grad` is live with the params, so the arena holds both: nothing is saved
    unfused = jaxalloc.planned(sgd, donate_argnums=0, passes=AS_TRACED).plan(params, grad, lr, include_outputs=True)
    assert unfused.arena_bytes == 2 * params.nbytes + 64
    assert _func(unfused).attributes["mem.args"].data[0] == _op(unfused, "sub").attributes["mem.slot"]


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled", "eager"])
@pytest.mark.parametrize("passes", [("jx-dce",), FUSED], ids=["unfused", "fused"])
def test_results_equal_jit_with_donation_and_the_params_are_deleted(mode, passes):
    params, grad, lr = _args()
    expected = jax.jit(sgd, donate_argnums=0)(jnp.array(params), grad, lr)
    planned = jaxalloc.planned(sgd, donate_argnums=0, mode=mode, passes=passes, arena="always")
    for _ in range(3):  # the fused kernels run from the third call on
        mine = jnp.array(params)
        np.testing.assert_allclose(planned(mine, grad, lr), expected, **TOLERANCE)
        assert mine.is_deleted() and not grad.is_deleted()
    assert planned.last_run.copied_bytes == 0


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled", "eager"])
@pytest.mark.parametrize("fn, args", [
    (reads_after_output, (jnp.linspace(0.0, 1.0, 256), jnp.ones(256))),
    (fori, (jnp.linspace(0.0, 1.0, 256), jnp.full(256, 0.5))),  # the argument is the ring's first slot
], ids=["reads_after_output", "fori"])
def test_a_donated_argument_read_late_is_kept_until_its_last_read(fn, args, mode):
    expected = jax.jit(fn, donate_argnums=0)(jnp.array(args[0]), *args[1:])
    planned = jaxalloc.planned(fn, donate_argnums=0, mode=mode, arena="always")
    for _ in range(3):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOLERANCE), planned(jnp.array(args[0]), *args[1:]), expected)
    for inside in (False, True):
        plan = planned.plan(*args, include_outputs=inside)
        assert plan.buffers[0].label == "argument" and plan.buffers[0].start == 0
        assert plan.check().copies == ()


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled", "eager"])
def test_a_small_donated_argument_is_left_to_xla_as_its_loop_s_carry(mode):
    """A donated argument of at most `SMALL_BYTES` carried by a loop: the loop's small carry is XLA's
    loop state, so the argument stays outside the arena with it, where in a row of the arena the
    argument was the ring's first slot and every round's carry was copied into it."""
    args = jnp.linspace(0.0, 1.0, 32), jnp.full(32, 0.5)
    planned = jaxalloc.planned(fori, donate_argnums=0, mode=mode)
    np.testing.assert_allclose(planned(jnp.array(args[0]), args[1]), jax.jit(fori)(*args), **TOLERANCE)
    assert planned.last_run.copied_bytes == 0
    plan = planned.plan(*args)
    assert plan.buffers == () and plan.check().copies == ()


def test_a_donated_argument_not_read_after_an_output_is_written_is_not_taken():
    p, g = jnp.linspace(0.0, 1.0, 16), jnp.ones(16)
    plan = jaxalloc.planned(reads_after_output, donate_argnums=0, passes=AS_TRACED).plan(p, g, include_outputs=True)
    arg = _func(plan).attributes["mem.args"].data[0]
    out = _op(plan, "mul").attributes["mem.slot"]  # the first mul: the output, p still to be read
    assert out.offset.data + out.size.data <= arg.offset.data or arg.offset.data + arg.size.data <= out.offset.data


def test_the_static_checker_catches_a_plan_writing_over_a_donated_argument_before_its_last_read():
    p, g = jnp.linspace(0.0, 1.0, 16), jnp.ones(16)
    plan = jaxalloc.planned(reads_after_output, donate_argnums=0, passes=AS_TRACED).plan(p, g, include_outputs=True)
    func = _func(plan)
    check_planned(func)
    _op(plan, "mul").attributes["mem.slot"] = func.attributes["mem.args"].data[0]
    with pytest.raises(jaxalloc.PlanViolation, match=r"%a \(argument\) is read by %\w+ \(mul test_donation.py:\d+\), "
                       r"but %\w+ \(mul test_donation.py:\d+\) was written over its bytes"):
        check_planned(func)


def test_the_checkers_catch_two_donated_arguments_in_one_slot():
    a, b = jnp.ones(256), jnp.ones(256)
    plan = jaxalloc.planned(lambda x, y: jnp.sin(x) * y, donate_argnums=(0, 1), passes=AS_TRACED).plan(a, b)
    func = _func(plan)
    first, second = func.attributes["mem.args"].data
    assert first != second
    func.attributes["mem.args"] = ArrayAttr([first, first])
    with pytest.raises(jaxalloc.PlanViolation, match=r"%a \(argument\) is read by .* but %b \(argument\) was written over"):
        check_planned(func)


def test_the_sanitizer_catches_a_plan_writing_over_a_donated_argument_before_its_last_read():
    p, g = jnp.linspace(0.0, 1.0, 256), jnp.ones(256)
    planned = jaxalloc.planned(reads_after_output, donate_argnums=0, mode="checked", passes=AS_TRACED)
    planned(jnp.array(p), g)
    plan, _, layouts = next(iter(next(iter(planned._cache.values())).plans.values()))
    func = _func(plan)
    # sin, computed after the output and before `p * g`, put onto the donated argument's bytes
    _op(plan, "sin").attributes["mem.slot"] = func.attributes["mem.args"].data[0]
    layouts.clear()
    with pytest.raises(jaxalloc.PlanViolation, match=r"reads %a \(a donated argument, written as the call starts\) "
                       r"at bytes \[\d+, \d+\), but %\w+ \(sin test_donation.py:\d+\) was written over"):
        planned(jnp.array(p), g)
    with pytest.raises(jaxalloc.PlanViolation, match=r"%a \(argument\) is read by"):
        check_planned(func)


def test_every_leaf_of_a_donated_pytree_is_donated_by_position_or_by_name():
    params = {"w": jnp.ones((8, 8)), "b": jnp.zeros(8)}
    x = jnp.ones(8)
    expected = jax.jit(tree_step)(params, x)
    for options, call in [
        (dict(donate_argnums=0), lambda f, p: f(p, x)),
        (dict(donate_argnames="params"), lambda f, p: f(p, x)),
        (dict(donate_argnums=0), lambda f, p: f(params=p, x=x)),  # by keyword: the name jax.jit infers
    ]:
        planned = jaxalloc.planned(tree_step, **options)
        assert call(planned.plan, params).donated == (0, 1)
        mine = jax.tree.map(jnp.array, params)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOLERANCE), call(planned, mine), expected)
        assert all(leaf.is_deleted() for leaf in jax.tree.leaves(mine)) and not x.is_deleted()


def test_a_donated_plan_prints_and_parses_back():
    plan = jaxalloc.planned(sgd, donate_argnums=0, passes=AS_TRACED).plan(*_args())
    text = str(plan.module)
    assert "mem.args = [#mem.slot<offset = 0, size = 16384>, #mem.slot<offset = 0, size = 0>" in text
    ctx = Context()
    for dialect in (Builtin, jx.JX, MEM):
        ctx.load_dialect(dialect)
    parsed = Parser(ctx, text).parse_module()
    assert str(parsed) == text
    check_planned(next(iter(parsed.ops)))


def two(x, n):
    return x * n


@pytest.mark.parametrize("options, message", [
    (dict(donate_argnums="x"), r"^donate_argnums must be an int or a sequence of ints, got 'x'"),
    (dict(donate_argnums=2), r"planned\(two\): two has donate_argnums=\(2,\), but only accepts 2 positional arguments"),
    (dict(donate_argnames="y"), r"planned\(two\): two has invalid argnames \{'y'\} in donate_argnames"),
    (dict(donate_argnames=3), r"^donate_argnames must be a str or a sequence of strs, got 3"),
    (dict(static_argnums=1, donate_argnums=1), r"planned\(two\): argument 1 is both static and donated"),
    (dict(static_argnames="n", donate_argnames="n"), r"planned\(two\): static_argnames and donate_argnames cannot intersect"),
    (dict(static_argnums=1, donate_argnames="n"), r"planned\(two\): static_argnames and donate_argnames cannot intersect"),
], ids=["not-int", "out-of-range", "unknown-name", "not-str", "static-number", "static-name", "static-mixed"])
def test_bad_donation_arguments_are_one_clear_line(options, message):
    with pytest.raises(jaxalloc.JaxallocError, match=message) as info:
        jaxalloc.planned(two, **options)
    assert "\n" not in str(info.value)


def test_a_donated_array_passed_twice_is_refused_as_jit_refuses_it():
    x = jnp.ones(4)
    with pytest.raises(jaxalloc.JaxallocError, match=r"argument 0 is donated, but the same array is passed as another argument too"):
        jaxalloc.planned(lambda a, b: a + b, donate_argnums=0)(x, x)
    assert not x.is_deleted()


def test_a_negative_index_donated_with_a_static_one_is_refused_at_the_call():
    f = jaxalloc.planned(lambda *a: a[0] * a[1], static_argnums=1, donate_argnums=-1)
    for _ in range(2):  # refused again: nothing was cached
        with pytest.raises(jaxalloc.JaxallocError, match=r"argument 1 is both static and donated"):
            f(jnp.ones(2), 3)


def test_compare_xla_compiles_with_the_same_donation():
    params, grad, lr = _args()
    plan = jaxalloc.planned(sgd, donate_argnums=0, passes=FUSED).plan(params, grad, lr)
    comparison = plan.compare_xla()
    for memory, options in zip(comparison.xla, [None, FUSION_OFF]):
        stats = jax.jit(sgd, donate_argnums=0).lower(params, grad, lr).compile(compiler_options=options).memory_analysis()
        assert (memory.argument_size_in_bytes, memory.output_size_in_bytes, memory.alias_size_in_bytes,
                memory.temp_size_in_bytes) == (stats.argument_size_in_bytes, stats.output_size_in_bytes,
                                               stats.alias_size_in_bytes, stats.temp_size_in_bytes)
        assert memory.donated_size_in_bytes == params.nbytes and stats.alias_size_in_bytes == params.nbytes
        assert comparison.xla_bytes(memory) == (stats.temp_size_in_bytes + stats.output_size_in_bytes
                                                - stats.alias_size_in_bytes + params.nbytes)
    # the arena holds the outputs and the donated params, one in the other's place
    assert comparison.arena_bytes == params.nbytes + 64
    assert comparison.donated == params.nbytes and "temp + output - alias + donated" in str(comparison)
    kept = jaxalloc.planned(sgd, passes=FUSED).plan(params, grad, lr).compare_xla()
    assert kept.xla[0].alias_size_in_bytes == 0 and kept.xla[0].donated_size_in_bytes == 0
    assert "donated" not in str(kept)


@pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")
@pytest.mark.parametrize("mode", ["compiled", "arena", "checked", "eager"])
@pytest.mark.parametrize("fn, x", [
    (lambda x, y: (x * 2).sum() + y, jnp.ones(4)),
    (lambda x, y: jnp.ones(3) + y, jnp.ones(0)),
    (lambda x, y: x + y, jnp.ones(0)),
    (lambda x, y: x.astype(jnp.int32) + 1, jnp.ones(4)),
    (lambda x, y: y * 2, jnp.ones(3)),
], ids=["no output can take it", "of no bytes, unread", "of no bytes, an output's", "an output of another dtype", "never read"])
def test_a_donated_array_is_deleted_where_jit_deletes_it(fn, x, mode):
    """`jax.jit` keeps a donated array that no output can take, or that the function never reads,
    and deletes the others, even of no bytes."""
    theirs = x.copy()
    jax.jit(fn, donate_argnums=0)(theirs, jnp.float32(1.0))
    mine = x.copy()
    jaxalloc.planned(fn, donate_argnums=0, mode=mode)(mine, jnp.float32(1.0))
    assert mine.is_deleted() == theirs.is_deleted()
