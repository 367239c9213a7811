"""Planned functions under JAX's transformations, against the same transformations of `jax.jit`.

Each cell takes a corpus or library program, a transformation (`transformations.TRANSFORMATIONS`:
grad, value_and_grad, vjp, jvp, jit, jit of grad, vmap, vmap of grad, grad of vmap, scan over the
function) and a mode, and checks that:
- the result equals the transformation of `jax.jit(fn)` within the program's tolerance;
- every program the transformation planned (the forward, backward, JVP and batched programs) has a
  plan the static checker accepts, with no copy on any path, and its last run copied no byte;
- afterwards the plain planned call still runs, and equals `jax.jit`'s.
Where JAX cannot transform the program (reverse mode through a `while_loop`, forward mode through a
`custom_vjp`), the planned function raises the same error as `jax.jit`'s.
`SAMPLE` names the programs of the suite: every construct of the corpus (loops, branches, scans,
custom rules, keys, pytrees, integer programs) and one program of each library; eight random
programs go through five of the transformations. `JAXALLOC_THOROUGH=1` runs every program of both
corpora in both modes, and `benchmarks/soak.py --transform NAME` many random programs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jaxalloc
from jaxalloc import planned_call
from jaxalloc.testing.corpus import PROGRAMS as CORPUS
from jaxalloc.testing.differential import SMALL_VALUES_PLACED, THOROUGH, assert_same
from jaxalloc.testing.library import PROGRAMS as LIBRARY
from jaxalloc.testing.random_programs import random_program
from jaxalloc.testing.transformations import (
    DERIVATIVES, TRANSFORMATIONS, check_transformed, differentiable, every_program_running,
)


@pytest.fixture(autouse=True)
def _no_persistent_compilation_cache():
    """The programs here compile without JAX's persistent compilation cache: after hundreds of
    compilations a worker sharing it died inside it, writing or reading an executable back
    (`compilation_cache.put_executable_and_time`, `get_executable_and_time`), on cells that pass
    alone."""
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", True)


SAMPLE = {
    "mlp_train_step", "convnet", "attention_grad", "layernorm", "scan_rnn", "scan_reverse", "newton_sqrt",
    "fori_loop_dynamic", "cond_bool", "switch", "nested_while_cond_scan", "grad_through_scan", "checkpoint_grad",
    "user_custom_vjp", "random_key_arg", "pytrees", "integer_math", "gather_scatter", "dynamic_slicing",
    "eqx_mlp", "nnx_lstm_rnn", "haiku_mlp_train_step", "linen_attention", "diffrax_heun_t1", "optax_sgd_momentum_step",
}
COPYING = {("diffrax_euler_saveat_ts", name): "the backward program's transposed step loop copies a carried value "
           "in its first rounds (the body yields it elsewhere): 24 bytes a run"
           for name in ("grad", "value_and_grad", "vjp", "jit_of_grad", "grad_of_vmap")}
"""Cells whose backward program the planner cannot yet place without copies: the answers are
jit's, and the test fails on the copies (strictly: a cell that stops copying must leave this list)."""

CHECKED = ("grad", "jit", "vmap")
"""The transformations run in checked mode too (op by op under the sanitizer: the slowest mode)."""

def _cells():
    for program in CORPUS + LIBRARY:
        if not THOROUGH and program.name not in SAMPLE:
            continue
        for name in TRANSFORMATIONS:
            for mode in ("compiled", "checked"):
                if THOROUGH or mode == "compiled" or name in CHECKED:
                    reason = COPYING.get((program.name, name))
                    marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
                    yield pytest.param(program, name, mode, id=f"{program.name}-{name}-{mode}", marks=marks)


@pytest.mark.parametrize("program, transformation, mode", list(_cells()))
def test_a_transformed_planned_function_equals_the_transformed_jit(program, transformation, mode):
    args = program.make_args()
    if transformation in DERIVATIVES and not differentiable(args):
        pytest.skip("no floating-point argument to differentiate by")
    check_transformed(program.fn, args, transformation, mode)


def test_grad_of_a_planned_function_is_jax_s():
    """The minimal form of the silent wrong gradient: zeros, where the arena's bitcasts stopped it."""
    f = lambda x: jnp.sum(jnp.sin(x) * x)  # noqa: E731
    x = jnp.arange(4.0)
    for mode in ("compiled", "arena", "checked", "eager"):
        assert_same(jax.grad(jaxalloc.planned(f, mode=mode))(x), jax.grad(f)(x))
        assert_same(jax.jvp(jaxalloc.planned(f, mode=mode), (x,), (jnp.ones(4),)), jax.jvp(f, (x,), (jnp.ones(4),)))


def _cumsum_loss(w, x):
    return jnp.sum(jnp.cumsum(jnp.tanh(x @ w), axis=0) ** 2)


def _scan_loss(w, x):
    def cell(h, xt):
        h = jnp.tanh(h @ w + xt)
        return h, h

    return jnp.sum(lax.scan(cell, jnp.zeros((8, 64)), x.reshape(8, 8, 64))[1] ** 2)


@pytest.mark.parametrize("loss, on_xla", [(_cumsum_loss, False), (_scan_loss, True)], ids=["the arena", "XLA's buffers"])
def test_each_derived_program_runs_the_kernel_that_holds_less(loss, on_xla):
    """Each program `jax.grad` derives chooses its kernel as a plain call does (`arena="smaller"`):
    the gradient is jax's, each program's run reports its choice, and `arena="always"` runs every
    program's plan in its arena. The backward program of the cumulative sum holds less in its
    arena, the scan's programs on XLA's buffers."""
    w, x = jnp.full((64, 64), 0.01), jnp.ones((64, 64))
    chosen = {}
    for arena in ("smaller", "always"):
        grad = jax.grad(jaxalloc.planned(loss, arena=arena))
        assert_same(grad(w, x), jax.grad(loss)(w, x))
        runners = planned_call.programs(jax.make_jaxpr(grad)(w, x).jaxpr)
        assert runners and all(r.planned.last_run is not None for r in runners)
        chosen[arena] = {r.name: (r.planned.last_run.xla_buffers, r.planned.last_run.arena_bytes) for r in runners}
    assert not any(on_xla for on_xla, _ in chosen["always"].values())
    assert any(arena > 0 for _, arena in chosen["always"].values()), "a program with an arena to choose against"
    for name, (xla_buffers, arena) in chosen["smaller"].items():
        assert arena == (0 if xla_buffers else chosen["always"][name][1])
    assert chosen["smaller"][f"{loss.__name__}_lin_bwd"][0] == on_xla


def test_make_jaxpr_shows_one_planned_call_with_its_arena():
    planned = jaxalloc.planned(lambda x: jnp.tanh(x) * 2.0)
    jaxpr = jax.make_jaxpr(planned)(jnp.ones(16))
    (eqn,) = jaxpr.eqns
    assert eqn.primitive is planned_call.planned_call_p
    assert f"arena_bytes={planned.plan(jnp.ones(16)).arena_bytes}" in str(jaxpr)
    assert jax.eval_shape(planned, jnp.ones(16)).shape == (16,)


def test_a_transformation_keeps_no_tracer_in_the_planned_function():
    """A wrapper that traces once (`eval_shape`, `make_jaxpr`, `jit`) leaves nothing behind that a
    later plain call would read."""
    planned = jaxalloc.planned(lambda x: jnp.cumsum(x) * 3.0)
    x = jnp.arange(5.0)
    jax.eval_shape(planned, x)
    jax.make_jaxpr(planned)(x)
    jax.jit(planned)(x)
    jax.lax.scan(lambda c, _: (planned(c), None), x, length=2)
    assert_same(planned(x), jnp.cumsum(x) * 3.0)


def test_the_gradient_runs_two_planned_kernels():
    """`jax.grad` of a planned loss plans the forward program (which also returns the residuals)
    and the backward program, and `jaxalloc.plans` shows both, each accepted by the checker."""

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w, x = jnp.ones((8, 4)), jnp.ones((16, 8))
    found = jaxalloc.plans(jax.grad(jaxalloc.planned(loss)), w, x)
    assert sorted(found) == ["loss_fwd", "loss_lin_bwd"]
    for plan in found.values():
        assert plan.check().copies == ()
    # every value of the forward program is an output (the loss or a residual), computed where the
    # caller receives it; the backward program's intermediate is its matrix product's operand, in
    # XLA's buffer
    assert (found["loss_fwd"].arena_bytes, found["loss_lin_bwd"].arena_bytes) == (0, 0)
    assert jaxalloc.planned(loss).plan(w, x).arena_bytes == 0  # the plan a call runs: the same rule
    assert jaxalloc.planned(loss).plan(w, x, include_outputs=True).arena_bytes > 0  # every value in the arena


def test_a_function_closing_over_a_traced_value_takes_it_as_an_argument():
    def outer(x, y):
        return jaxalloc.planned(lambda x: jnp.sin(x) * y)(x)

    x, y = jnp.arange(3.0), jnp.float32(2.0)
    assert_same(jax.jit(outer)(x, y), jnp.sin(x) * y)
    assert_same(jax.grad(lambda y: outer(x, y).sum())(y), jnp.sin(x).sum())


def test_a_planned_function_inside_another_is_planned_with_it():
    inner = jaxalloc.planned(lambda x: jnp.sin(x) * 2.0)
    outer = jaxalloc.planned(lambda x: inner(x) + 1.0)
    x = jnp.arange(3.0)
    assert_same(outer(x), jnp.sin(x) * 2.0 + 1.0)
    assert "planned_call" not in str(outer.lower(x))


RANDOM_SEEDS = range(8)
"""Random programs checked here under transformations; `benchmarks/soak.py --transform NAME` runs many more."""


def test_random_programs_under_a_transformation_run_their_small_values_in_the_arena():
    """Every value of a random program is small: with the kernel's own plan, no program a
    transformation derives from one would have an arena to check. Their runners plan them with the
    small values placed (`every_program_running`), as the random programs themselves run."""
    derived = []
    for seed in RANDOM_SEEDS:
        program = random_program(seed)
        if not differentiable(program.args):
            continue
        with every_program_running(SMALL_VALUES_PLACED):
            grad = TRANSFORMATIONS["grad"]
            planned = jaxalloc.planned(program.fn, arena="always")
            grad(planned, program.args)
            jaxpr = jax.make_jaxpr(lambda a: grad(planned, a))(program.args).jaxpr
            derived += [runner.plan.arena_bytes for runner in planned_call.programs(jaxpr)]
    assert len(derived) >= 10 and sum(arena > 0 for arena in derived) >= len(derived) // 2


@pytest.mark.parametrize("transformation", ["grad", "jvp", "jit", "vmap", "scan"])
@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_a_transformed_random_program_equals_the_transformed_jit(seed, transformation):
    program = random_program(seed)
    if transformation in DERIVATIVES and not differentiable(program.args):
        pytest.skip("no floating-point argument to differentiate by")
    check_transformed(program.fn, program.args, transformation, "compiled", plan=SMALL_VALUES_PLACED)
