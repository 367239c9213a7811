"""The differential check itself: its float tolerance and what it does where `jax.jit` is wrong."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxalloc.testing import differential
from jaxalloc.testing.corpus import BY_NAME
from jaxalloc.testing.differential import (
    FLOAT_TOLERANCE,
    JitDisagreement,
    assert_same,
    check_program,
    float_tolerance,
    mismatches,
    narrowest_float,
    program_tolerance,
)

# --- the tolerance ----------------------------------------------------------------------------


def _tolerance_of(name: str) -> dict[str, float]:
    program = BY_NAME[name]
    return program_tolerance(jax.make_jaxpr(program.fn)(*program.make_args()))


def _float16_math_in_float32(x, y):
    """float16_math as `jax.jit` computes it on a CPU with AVX512-FP16: the fused chain in float32,
    rounded to float16 only where an output is float16."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    z = x * y + np.float32(1.5)
    return (
        jnp.asarray(np.sqrt(np.abs(z)).astype(np.float16)),
        jnp.asarray(z.max().astype(np.float16)),
        jnp.asarray((z / (np.abs(y) + np.float32(1))).astype(np.float32)),
    )


def test_float16_program_tolerates_one_float16_ulp_on_a_float32_output():
    program = BY_NAME["float16_math"]
    args = program.make_args()
    tolerance = _tolerance_of("float16_math")
    assert narrowest_float(jax.make_jaxpr(program.fn)(*args)) == np.float16
    assert tolerance == float_tolerance(jnp.float16) == {"rtol": 4 * 2.0**-10, "atol": 4 * 2.0**-10}

    out = jax.jit(program.fn)(*args)
    ratio = out[2]
    assert ratio.dtype == jnp.float32
    ulp = np.spacing(np.abs(np.asarray(ratio).astype(np.float16))).astype(np.float32)  # one float16 ulp
    for sign in (1, -1):
        off = (out[0], out[1], ratio + sign * ulp)
        assert_same(off, out, tolerance)
        assert mismatches(off, out, FLOAT_TOLERANCE)  # float32's tolerance alone would not do


def test_float16_program_passes_against_float32_excess_precision(monkeypatch):
    """What fails on AVX512-FP16 CPUs: jit's float32 output is a float16 ulp or so off op-by-op rounding."""
    program = BY_NAME["float16_math"]
    args = program.make_args()
    simulated = _float16_math_in_float32(*args)
    with jax.disable_jit():
        op_by_op = program.fn(*args)
    assert mismatches(simulated, op_by_op, FLOAT_TOLERANCE)  # the simulation does differ, as on such CPUs
    monkeypatch.setattr(differential, "jit_reference", lambda fn, *a: simulated)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitDisagreement)  # within tolerance: no fallback, no warning
        for mode in ("arena", "eager"):
            assert check_program(program.fn, *args, mode=mode, name="float16_math").jit_disagreement is None


@pytest.mark.parametrize("name", ["scan_rnn", "nested_while_cond_scan", "switch", "user_custom_jvp", "inner_jit"])
def test_float32_programs_keep_the_tight_tolerance(name):
    assert narrowest_float(jax.make_jaxpr(BY_NAME[name].fn)(*BY_NAME[name].make_args())) == np.float32
    assert _tolerance_of(name) == FLOAT_TOLERANCE


def test_low_precision_programs():
    assert _tolerance_of("bf16_math") == {"rtol": 4 * 2.0**-7, "atol": 4 * 2.0**-7}
    assert _tolerance_of("weak_types") == float_tolerance(jnp.float16)
    assert _tolerance_of("int8_math") == FLOAT_TOLERANCE  # no float at all
    assert float_tolerance(jnp.float8_e4m3fn)["rtol"] == 0.5
    assert float_tolerance(jnp.float64) == float_tolerance(jnp.complex64) == FLOAT_TOLERANCE


def _half(v):
    return v.astype(jnp.float16).astype(jnp.float32)


@jax.custom_jvp
def _custom(x):
    return _half(x) * 2


_custom.defjvp(lambda primals, tangents: (_custom(*primals), tangents[0] * 2))


@jax.custom_vjp
def _custom_vjp(x):
    return _half(x) + 1


_custom_vjp.defvjp(lambda x: (_custom_vjp(x), None), lambda _, g: (g,))

_HALF_CONST = np.ones(3, np.float16)

_FLOAT16_SOMEWHERE = {  # float32 in and out; float16 only where the key says
    "scan body": lambda x: lax.scan(lambda c, r: (c + _half(r), None), x[0], x)[0],
    "while body": lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, _half(c[1])), (0, x))[1],
    "while cond": lambda x: lax.while_loop(lambda c: _half(c).sum() < 10, lambda c: c + 1, x),
    "cond branch": lambda x: lax.cond(x[0, 0] > 0, lambda v: _half(v), lambda v: v * 2, x),
    "switch branch": lambda x: lax.switch(1, [lambda v: v, lambda v: v + 1, lambda v: _half(v)], x),
    "inner jit": lambda x: jax.jit(_half)(x) + 1,
    "jit in scan in cond": lambda x: lax.cond(
        x[0, 0] > 0, lambda v: lax.scan(lambda c, r: (c + jax.jit(_half)(r), None), v[0], v)[0], lambda v: v[0], x
    ),
    "custom_jvp": lambda x: _custom(x) + 1,
    "custom_vjp": lambda x: _custom_vjp(x) * 3,
    "checkpoint": lambda x: jax.checkpoint(_half)(x) - 1,
    "fori_loop": lambda x: lax.fori_loop(0, 2, lambda i, c: _half(c) + 1, x),
    "closed-over constant": lambda x: x + _HALF_CONST,
    "input": None,
}


@pytest.mark.parametrize("where", list(_FLOAT16_SOMEWHERE))
def test_narrowest_float_looks_everywhere(where):
    x = jnp.ones((2, 3), jnp.float32)
    fn = _FLOAT16_SOMEWHERE[where]
    if fn is None:
        fn, x = (lambda v: v.astype(jnp.float32) * 2), x.astype(jnp.float16)
    closed = jax.make_jaxpr(fn)(x)
    assert narrowest_float(closed) == np.float16
    assert program_tolerance(closed) == float_tolerance(jnp.float16)
    outer = {v.aval.dtype for v in (*closed.jaxpr.invars, *closed.jaxpr.outvars)}
    assert where == "input" or outer == {np.dtype(np.float32)}


def test_narrowest_of_several():
    def fn(x):  # float16 outside, bfloat16 in a scan body: bfloat16 is the narrower
        return lax.scan(lambda c, r: (c + r.astype(jnp.bfloat16).astype(jnp.float32), None), x[0], x)[0] + _half(x[0])

    assert narrowest_float(jax.make_jaxpr(fn)(jnp.ones((2, 3)))) == jnp.bfloat16
    assert narrowest_float(jax.make_jaxpr(lambda i: i + 1)(jnp.int32(1))) is None


# --- where jax.jit is wrong -------------------------------------------------------------------


def zero_round_while(v):
    """Zero rounds (3 < 2 is false), so the answer is v; `jax.jit` on CPU says v + 1 (jax 0.10.2)."""
    return lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 2, c[1] + 1), (jnp.asarray(3, jnp.int32), v))[1]


@pytest.mark.parametrize("mode", ["eager", "arena"])
def test_jit_disagreement_warns_and_passes(mode, monkeypatch):
    monkeypatch.setattr(differential, "JIT_DISAGREEMENTS", [])
    with jax.disable_jit():
        assert int(zero_round_while(5)) == 5
    if int(jax.jit(zero_round_while)(5)) == 5:  # a jax whose jit gets this right: nothing to warn about
        with warnings.catch_warnings():
            warnings.simplefilter("error", JitDisagreement)
            assert check_program(zero_round_while, 5, mode=mode).jit_disagreement is None
        return
    with pytest.warns(JitDisagreement, match=r"zero_round_while \(" + mode + r"\): jax.jit disagrees") as caught:
        planned = check_program(zero_round_while, 5, mode=mode)
    assert int(planned(5)) == 5
    (warning,) = [w for w in caught if issubclass(w.category, JitDisagreement)]
    assert "output: max |difference| 1" in str(warning.message)
    record = planned.jit_disagreement
    assert differential.JIT_DISAGREEMENTS == [record]
    assert (record.program, record.mode, record.outputs) == ("zero_round_while", mode, ("output",))


def test_jit_disagreement_names_the_output(monkeypatch):
    """Any CPU: a stand-in jit that is wrong on one output of a pytree, the planned result right."""
    monkeypatch.setattr(differential, "JIT_DISAGREEMENTS", [])

    def two(x):
        return {"sum": x + 1.0, "count": jnp.int32(3)}

    x = jnp.arange(4.0)
    monkeypatch.setattr(differential, "jit_reference", lambda fn, *a: {"sum": x + 1.5, "count": jnp.int32(3)})
    with pytest.warns(JitDisagreement, match=r"two \(eager\)") as caught:
        planned = check_program(two, x, mode="eager")
    message = str(caught[0].message)
    assert "output['sum']: max |difference| 0.5" in message and "count" not in message.split("jax.jit:")[0]
    assert planned.jit_disagreement.outputs == ("output['sum']",)
    assert len(differential.JIT_DISAGREEMENTS) == 1


@pytest.mark.parametrize("mode", ["eager", "arena"])
def test_wrong_planned_result_still_fails(mode, monkeypatch):
    """Each trace adds one more: planned, jit and disable_jit all compute different answers."""
    monkeypatch.setattr(differential, "JIT_DISAGREEMENTS", [])
    traces = []

    def drifting(x):
        traces.append(None)
        return x + len(traces)

    with warnings.catch_warnings():
        warnings.simplefilter("error", JitDisagreement)
        with pytest.raises(AssertionError, match="matches neither jax.jit's nor jax.disable_jit") as info:
            check_program(drifting, jnp.arange(3.0), mode=mode)
    text = str(info.value)
    assert "planned:\n    output float32[3]: [1. 2. 3.]" in text
    assert "jax.jit:\n    output float32[3]: [2. 3. 4.]" in text
    assert "jax.disable_jit():\n    output float32[3]: [3. 4. 5.]" in text
    assert differential.JIT_DISAGREEMENTS == []


def test_wrong_planned_result_fails_even_where_jit_is_wrong(monkeypatch):
    """The zero-round loop against a planned function that computes v + 2: neither 6 (jit) nor 5."""
    monkeypatch.setattr(differential, "jit_reference", lambda fn, *a: jnp.asarray(6))  # weak, as jit's
    real = differential.jaxalloc.planned
    monkeypatch.setattr(
        differential.jaxalloc, "planned", lambda fn, **kw: real(lambda v: zero_round_while(v) + 2, **kw)
    )
    with pytest.raises(AssertionError, match="matches neither") as info:
        check_program(zero_round_while, 5, mode="eager")
    assert "~int32[]: 7" in str(info.value) and "~int32[]: 6" in str(info.value) and "~int32[]: 5" in str(info.value)


# --- the compiled kernel's effects --------------------------------------------------------------


def test_the_compiled_check_counts_each_callback_as_the_kernel_traces_it():
    """A callback in a loop's condition is traced twice into the kernel (before the loop and at the
    end of each round), one in the body or a branch once: `check_program` passes them all. A trace
    that leaves a callback behind (a conditional traced again, the first left in the kernel) would
    run it twice, and the count of each callback tells (`_jaxpr_effects`)."""
    calls = []

    def f(x):
        def cond(c):
            jax.debug.callback(calls.append, c[0])
            return c[0] < 3

        def body(c):
            jax.debug.callback(calls.append, c[1])

            def doubled(v):
                jax.debug.callback(calls.append, v)
                return v * 2
            return c[0] + 1, lax.cond(c[1].ravel()[0] > 0, doubled, lambda v: -v, c[1])

        return lax.while_loop(cond, body, (0, x))

    for x, counts in ((jnp.full(256, 1.5), [1, 1, 2]), (jnp.float32(1.5), [1, 1, 1])):  # in an arena, in none
        planned = check_program(f, x, mode="compiled")
        (traced,) = planned._cache.values()
        (kernel,) = traced.kernels.values()
        assert bool(kernel.arena_bytes) == (x.size > 1)
        effects = differential._module_effects(kernel.module, kernel.functions.table, bool(kernel.arena_bytes))
        assert effects == differential._jaxpr_effects(kernel.jaxpr.jaxpr) and sorted(effects.values()) == counts

    def left_behind(x):
        def branch(v):
            jax.debug.callback(calls.append, v)
            return v

        lax.cond(x > 0, branch, lambda v: v, x)  # a first trace, its result dropped
        return lax.cond(x > 0, branch, lambda v: v, x)

    assert list(differential._jaxpr_effects(jax.make_jaxpr(left_behind)(1.0).jaxpr).values()) == [2]
