"""JAX transformations of a program, applied alike to its planned function and to `jax.jit` of it.

`TRANSFORMATIONS` maps a name to `apply(f, args)`: the result of that transformation of `f` on the
program's example arguments. The derivatives are taken with respect to every floating-point leaf of
the arguments (the others are held), of the sum of the floating-point outputs; `vmap` maps over two
copies of the arguments, the second one's floats scaled.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import jaxalloc
from jaxalloc import planned_call
from jaxalloc.api import DEFAULT_PASSES, ModeRunner, PlanOptions
from jaxalloc.testing.differential import assert_same, mismatches, program_tolerance


def _is_float(x) -> bool:
    return jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)


def _floats_apart(args):
    """The floating-point leaves of `args`, and the function putting new ones back among the others."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    where = [i for i, x in enumerate(leaves) if _is_float(x)]

    def rebuild(floats):
        merged = list(leaves)
        for i, x in zip(where, floats):
            merged[i] = x
        return jax.tree_util.tree_unflatten(tree, merged)

    return [leaves[i] for i in where], rebuild


def _total(out) -> jax.Array:
    """The sum of every floating-point output, in float32: a loss to differentiate."""
    return sum((jnp.sum(x.astype(jnp.float32)) for x in jax.tree_util.tree_leaves(out) if _is_float(x)), jnp.float32(0))


def _loss(f: Callable, args) -> tuple[Callable, list]:
    floats, rebuild = _floats_apart(args)
    return (lambda floats: _total(f(*rebuild(floats)))), floats


def _float_outputs(f: Callable, args) -> tuple[Callable, list]:
    floats, rebuild = _floats_apart(args)
    return (lambda floats: [x for x in jax.tree_util.tree_leaves(f(*rebuild(floats))) if _is_float(x)]), floats


def _stacked(args):
    """Two copies of `args` along a new leading axis, the second's floats scaled by 0.9."""
    return jax.tree_util.tree_map(lambda x: jnp.stack([x, x * 0.9 if _is_float(x) else x]), args)


def _grad(f, args):
    loss, floats = _loss(f, args)
    return jax.grad(loss)(floats)


def _value_and_grad(f, args):
    loss, floats = _loss(f, args)
    return jax.value_and_grad(loss)(floats)


def _vjp(f, args):
    outputs, floats = _float_outputs(f, args)
    out, pullback = jax.vjp(outputs, floats)
    return out, pullback([jnp.ones_like(x) for x in out])


def _jvp(f, args):
    outputs, floats = _float_outputs(f, args)
    return jax.jvp(outputs, (floats,), ([jnp.full_like(x, 0.5) for x in floats],))


def _vmap(f, args):
    return jax.vmap(lambda args: f(*args))(_stacked(args))


def _vmap_of_grad(f, args):
    return jax.vmap(lambda args: _grad(f, args))(_stacked(args))


def _grad_of_vmap(f, args):
    floats, rebuild = _floats_apart(_stacked(args))
    return jax.grad(lambda floats: _total(jax.vmap(lambda a: f(*a))(rebuild(floats))))(floats)


def _scan(f, args):
    """`f` as a `lax.scan` body over two rounds, once per stacked copy of the arguments."""
    return lax.scan(lambda carry, a: (carry, f(*a)), jnp.int32(0), _stacked(args))[1]


TRANSFORMATIONS: dict[str, Callable] = {
    "grad": _grad,
    "value_and_grad": _value_and_grad,
    "vjp": _vjp,
    "jvp": _jvp,
    "jit": lambda f, args: jax.jit(f)(*args),
    "jit_of_grad": lambda f, args: jax.jit(lambda *a: _grad(f, a))(*args),
    "vmap": _vmap,
    "vmap_of_grad": _vmap_of_grad,
    "grad_of_vmap": _grad_of_vmap,
    "scan": _scan,
}


def differentiable(args) -> bool:
    """Whether the arguments have a floating-point leaf to differentiate by."""
    return bool(_floats_apart(args)[0])


DERIVATIVES = frozenset({"grad", "value_and_grad", "vjp", "jvp", "jit_of_grad", "vmap_of_grad", "grad_of_vmap"})
"""The transformations that differentiate: they need a floating-point argument."""


GRADIENT_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
"""Derivatives go through other fusions than `jax.jit`'s: float32 sums in another order."""


@contextlib.contextmanager
def every_program_running(plan: PlanOptions | None) -> Iterator[None]:
    """Every runner's plan `plan` for the duration (None: each mode's own): the programs a
    transformation derives are planned by runners of their own, which no argument reaches."""
    saved = ModeRunner.plan_options
    ModeRunner.plan_options = saved if plan is None else plan
    try:
        yield
    finally:
        ModeRunner.plan_options = saved


def check_transformed(fn: Callable, args, transformation: str, mode: str, passes=DEFAULT_PASSES,
                      plan: PlanOptions | None = None) -> tuple[int, ...]:
    """`transformation` of `planned(fn)` against the same of `jax.jit(fn)`: equal within the
    program's tolerance, or else to the same transformation run op by op (`jax.disable_jit()`,
    where jit's fusions are the ones off), or both raising the same error where JAX cannot
    transform it; every
    program it planned (each running `plan`, by default its mode's own) accepted by the static
    checker with no copy, none of its runs copying a byte; and the plain planned call still equal
    to `jax.jit`'s afterwards. Returns the arena bytes of each program it planned (none where JAX
    cannot transform `fn`)."""
    with every_program_running(plan):
        return _check_transformed(fn, args, transformation, mode, passes)


def _check_transformed(fn: Callable, args, transformation: str, mode: str, passes) -> tuple[int, ...]:
    apply = TRANSFORMATIONS[transformation]
    planned = jaxalloc.planned(fn, mode=mode, passes=passes, arena="always")
    try:
        expected = apply(jax.jit(fn), args)
    except Exception as e:  # JAX itself cannot: reverse mode through a while_loop, forward mode of a custom_vjp
        with pytest.raises(type(e), match=re.escape(str(e).splitlines()[0])):
            apply(planned, args)
        return ()
    got = apply(planned, args)
    tolerance = program_tolerance(planned.trace(*args))
    if transformation in DERIVATIVES:
        tolerance = {k: max(v, GRADIENT_TOLERANCE[k]) for k, v in tolerance.items()}
    if mismatches(got, expected, tolerance):  # unless jit is the one that is off: then it equals op by op
        with jax.disable_jit():
            op_by_op = apply(fn, args)
        assert_same(got, op_by_op, tolerance)

    runners = planned_call.programs(jax.make_jaxpr(lambda a: apply(planned, a))(args).jaxpr)
    for runner in runners:
        assert runner.plan.check().copies == (), f"{runner.name}: the checker finds copies"
        if runner.planned.last_run is not None:
            assert runner.planned.last_run.copied_bytes == 0, f"{runner.name}: its run copied bytes"
    assert_same(planned(*args), jax.jit(fn)(*args), tolerance)
    return tuple(runner.plan.arena_bytes for runner in runners)
