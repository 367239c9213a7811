"""`planned` takes what `jax.jit` takes, and refuses bad input with one clear line."""

from __future__ import annotations

import gc
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxalloc
from jaxalloc.testing.differential import assert_same


def tile(x, n, *, axis=0):
    return jnp.repeat(x, n, axis=axis, total_repeat_length=None) * 2.0


@pytest.mark.parametrize(
    "options, call",
    [
        (dict(static_argnums=1), lambda f, x: f(x, 3)),
        (dict(static_argnums=-1), lambda f, x: f(x, 3)),
        (dict(static_argnames="n"), lambda f, x: f(x, n=3)),
        (dict(static_argnames=("n", "axis")), lambda f, x: f(x, 3, axis=1)),
    ],
    ids=["argnums", "negative", "argnames", "keyword-only"],
)
def test_static_arguments_as_in_jax_jit(options, call):
    x = jnp.ones((2, 2))
    planned = jaxalloc.planned(tile, **options)
    expected = call(jax.jit(tile, **options), x)
    np.testing.assert_array_equal(call(planned, x), expected)
    assert call(planned.plan, x).arena_bytes >= 0


def test_static_values_are_part_of_the_signature():
    f = jaxalloc.planned(tile, static_argnums=1)
    x = jnp.ones(2)
    assert f(x, 2).shape == (4,) and f(x, 3).shape == (6,)
    assert len(f._cache) == 2
    f(x, 3)
    assert len(f._cache) == 2
    comparison = f.plan(x, 3).compare_xla()
    assert comparison.xla[0].output_size_in_bytes == 24  # XLA gets n = 3 too
    assert "jaxalloc, no reuse" in str(comparison)


def test_static_arguments_must_be_hashable():
    with pytest.raises(jaxalloc.UnsupportedProgramError, match="static arguments must be hashable"):
        jaxalloc.planned(tile, static_argnums=1)(jnp.ones(2), [3])


def test_python_int_in_a_shape_suggests_static_argnames():
    with pytest.raises(jaxalloc.UnsupportedProgramError) as info:
        jaxalloc.planned(tile)(jnp.ones(2), 3)
    message = str(info.value)
    assert "argument n" in message and "planned(tile, static_argnames='n')" in message
    assert "\n" not in message and info.value.__cause__ is None


def test_a_call_of_jax_arrays_finds_its_trace_by_their_types():
    f = jaxalloc.planned(lambda x, y: x * y)
    x = jnp.arange(3.0)
    assert_same(f(x, jnp.float32(2)), x * 2)
    assert_same(f(x + 1, jnp.float32(3)), (x + 1) * 3)  # the same types: found without tracing again
    assert (len(f._cache), len(f._by_arrays)) == (1, 1)
    assert_same(f(x, 2.0), x * 2)  # a Python float is weakly typed: another signature
    assert_same(f(x, jnp.asarray(2.0)), x * 2)  # a weakly typed array: that one, found by its types
    assert (len(f._cache), len(f._by_arrays)) == (2, 2)
    keys = jaxalloc.planned(lambda k: jax.random.key_data(jax.random.split(k)))
    assert_same(keys(jax.random.key(0)), jax.random.key_data(jax.random.split(jax.random.key(0))))
    assert len(keys._by_arrays) == 1


def test_calling_with_shape_dtype_structs_says_to_lower_or_plan():
    f = jaxalloc.planned(lambda x, y: x + y)
    spec = jax.ShapeDtypeStruct((2,), jnp.float32)
    with pytest.raises(jaxalloc.UnsupportedProgramError, match=r"argument 1 is a jax.ShapeDtypeStruct.*\.lower\(...\) / \.plan\(...\)"):
        f(jnp.ones(2), spec)
    assert f.plan(spec, spec).arena_bytes == 0  # abstract arguments are what plan() is for


ALIGNMENT_ERROR = "alignment must be a positive integer number of bytes (any, not only a power of two), got "


@pytest.mark.parametrize("bad", [0, -5, "64", 2.0, True])
def test_one_alignment_check_everywhere(bad, tmp_path, capsys):
    from xdsl.context import Context
    from xdsl.utils.exceptions import DiagnosticException

    from jaxalloc.cli import main
    from jaxalloc.passes.assign import AssignBuffersPass

    f = lambda x: jnp.sin(x) * 2  # noqa: E731
    x = jax.ShapeDtypeStruct((4,), jnp.float32)
    message = ALIGNMENT_ERROR + repr(bad)
    with pytest.raises(jaxalloc.JaxallocError) as info:
        jaxalloc.planned(f, alignment=bad)
    assert str(info.value) == message
    with pytest.raises(jaxalloc.JaxallocError) as info:
        jaxalloc.planned(f).plan(x, alignment=bad)
    assert str(info.value) == message
    with pytest.raises(DiagnosticException, match="alignment must be a positive integer"):
        AssignBuffersPass(alignment=bad).apply(Context(), jaxalloc.planned(f).lower(x))
    if isinstance(bad, int) and not isinstance(bad, bool):
        trace = tmp_path / "t.csv"
        trace.write_text("id,lower,upper,size\na,0,1,4\n")
        model = tmp_path / "m.py"
        model.write_text("def f(x):\n    return x * 2\n")
        for argv in (["trace", str(trace)], ["plan", f"{model}:f", "f32[4]"]):
            assert main([*argv, "--alignment", str(bad)]) == 2
            assert capsys.readouterr().err.strip().endswith(message)


def test_a_first_call_leaves_the_garbage_collector_as_it_found_it():
    """A first call pauses Python's cyclic collector while it traces, plans and compiles; it runs
    again after, after a failed call too, and stays off where the caller had turned it off."""
    x, collecting = jnp.ones(3), []

    def double(x):
        collecting.append(gc.isenabled())
        return x * 2.0

    assert gc.isenabled()
    assert_same(jaxalloc.planned(double, mode="compiled")(x), x * 2.0)
    assert collecting == [False] and gc.isenabled()

    def broken(x):
        raise ValueError("no program")

    with pytest.raises(jaxalloc.errors.UnsupportedProgramError, match="no program"):
        jaxalloc.planned(broken)(x)
    assert gc.isenabled()
    gc.disable()
    try:
        jaxalloc.planned(lambda x: x + 1.0, mode="compiled")(x)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_program_whose_values_xla_keeps_skips_the_passes():
    """Every value small (or a product's, or an output): the kernel's plan places nothing, with or
    without the passes, so they do not run for it; a plan that holds the outputs runs them."""
    x = jnp.arange(3.0)
    f = jaxalloc.planned(lambda x: jnp.sin(x) * jnp.cos(x) + 1.0)
    check = jax.jit(lambda x: jnp.sin(x) * jnp.cos(x) + 1.0)(x)
    assert jnp.allclose(f(x), check) and f.last_run.arena_bytes == 0
    assert list(f.last_run.phases) == ["trace", "convert", "plan", "kernel trace", "lower", "XLA compile"]
    assert f.plan(x, include_outputs=True).arena_bytes > 0
    f(x)
    assert list(f.last_run.phases) == [*jaxalloc.api.DEFAULT_PASSES, "plan"]


def test_a_first_call_says_where_its_time_went():
    """`last_run.phases`: the first call's trace, conversion, passes, plan and, compiled, the kernel's
    trace, lowering and XLA compile, together its whole time; a later call did none of it. Work
    that `.lower()` did before the first call is reported by that call."""
    x = jnp.arange(256.0)
    f = jaxalloc.planned(lambda x: jnp.sin(x) * jnp.cos(x) + 1.0, mode="compiled")
    start = time.perf_counter()
    f(x)
    whole = time.perf_counter() - start
    phases = f.last_run.phases
    assert list(phases) == ["trace", "convert", *jaxalloc.api.DEFAULT_PASSES, "plan", "kernel trace", "lower", "XLA compile"]
    assert all(seconds > 0 for seconds in phases.values()) and sum(phases.values()) <= whole
    assert sum(phases.values()) > 0.5 * whole  # what is left: flattening the arguments, the collector
    f(x)
    assert f.last_run.phases == {}

    g = jaxalloc.planned(lambda x: x + 1.0, mode="arena", passes=("jx-dce",))
    x = jnp.arange(3.0)
    g.lower(x)
    g(x)
    assert list(g.last_run.phases) == ["trace", "convert", "jx-dce", "plan"]
