"""The corpus through the differential check, and focused tests of the conversion rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src import core
from xdsl.dialects.builtin import TensorType

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.execution.interpreter import JxFunctions, LiveBytesSampler, make_interpreter
from jaxalloc.frontend.convert import convert, scan_counts
from jaxalloc.testing.corpus import BY_NAME, LARGE_CONST, LARGE_JAX_CONST, PROGRAMS
from jaxalloc.testing.differential import (
    AS_TRACED,
    assert_deterministic_args,
    assert_same,
    check_program,
    check_roundtrip,
    sample,
)


def _lower(name: str):
    program = BY_NAME[name]
    return jaxalloc.planned(program.fn).lower(*program.make_args())


def _ops(module, kind):
    return [op for op in module.walk() if isinstance(op, kind)]


def _prims(module) -> list[str]:
    return [op.primitive.data for op in _ops(module, jx.PrimOp)]


def _jaxpr_primitives(jaxpr: core.Jaxpr) -> set[str]:
    """Every primitive name in `jaxpr`, nested jaxprs included."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in core.jaxprs_in_params(eqn.params):
            names |= _jaxpr_primitives(sub)
    return names


# --- the corpus -------------------------------------------------------------------------------


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_corpus_program(program):
    """After the default passes, in the arena under the sanitizer."""
    args = program.make_args()
    planned = check_program(program.fn, *args, mode="checked", name=program.name)
    assert f"jx.func @{program.fn.__name__}(%a: " in str(planned.lower(*args))  # name hints from jaxpr vars
    run = planned.last_run
    assert (run.mode, run.copied_bytes) == ("checked", 0)
    assert run.arena_bytes == planned.plan(*args).arena_bytes


@pytest.mark.parametrize("program", sample(PROGRAMS, 4), ids=lambda p: p.name)
def test_corpus_program_eager(program):
    """One in four (eager runs hold no plan to check; `JAXALLOC_THOROUGH=1` runs every program)."""
    check_program(program.fn, *program.make_args(), mode="eager", name=program.name)


def test_corpus_table():
    assert len(PROGRAMS) >= 32
    assert len(BY_NAME) == len(PROGRAMS)
    for program in PROGRAMS:
        assert_deterministic_args(program.make_args)


# --- loops ------------------------------------------------------------------------------------


def test_zero_length_scan_shapes():
    c, xs = BY_NAME["scan_zero_length_xs"].make_args()
    carry, (ys1, ys2) = jaxalloc.planned(BY_NAME["scan_zero_length_xs"].fn)(c, xs)
    assert float(carry) == 1.5
    assert ys1.shape == ys2.shape == (0, 3) and ys1.dtype == ys2.dtype == jnp.float32

    (c,) = BY_NAME["scan_zero_length_no_xs"].make_args()
    carry, ys = jaxalloc.planned(BY_NAME["scan_zero_length_no_xs"].fn)(c)
    np.testing.assert_array_equal(carry, c)
    assert ys.shape == (0, 2, 3) and ys.dtype == jnp.float32


@pytest.mark.parametrize("name", ["scan_rnn", "scan_reverse", "fori_loop_static", "scan_multi"])
def test_scan_becomes_while(name):
    program = BY_NAME[name]
    jaxpr = jax.make_jaxpr(program.fn)(*program.make_args()).jaxpr
    (scan,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]
    num_carry = scan_counts(scan.params)[1]
    num_ys = len(scan.outvars) - num_carry
    module = _lower(name)
    (loop,) = _ops(module, jx.WhileOp)
    assert "scan" not in _prims(module)
    assert loop.inits[0].type == TensorType(jx._I32, [])  # the explicit counter comes first
    assert len(loop.inits) == 1 + num_carry + num_ys  # ys are loop-carried stacked buffers
    assert _prims(loop.body).count("dynamic_update_slice") == num_ys  # ys[i] = y, one per ys
    assert "jx.while" in str(module)


def test_scan_reads_xs_rows_with_the_counter():
    (loop,) = _ops(_lower("scan_rnn"), jx.WhileOp)
    (read,) = [op for op in _ops(loop.body, jx.PrimOp) if op.primitive.data == "dynamic_slice"]
    assert read.args[1] is loop.body.block.args[0]  # xs[i]: row start is the counter


@pytest.mark.parametrize("name", ["newton_sqrt", "fori_loop_dynamic"])
def test_while_loop_becomes_while(name):
    module = _lower(name)
    assert len(_ops(module, jx.WhileOp)) == 1
    assert "while" not in _prims(module)


def test_nested_control_flow_three_deep():
    module = _lower("nested_while_cond_scan")
    (outer,) = [op for op in module.walk() if isinstance(op, jx.WhileOp) and isinstance(op.parent_op(), jx.FuncOp)]
    (case,) = _ops(outer.body, jx.CaseOp)
    assert len(_ops(case.branches[1], jx.WhileOp)) == 1  # the scan, in the true branch
    assert not _ops(case.branches[0], jx.WhileOp)


# --- branches ---------------------------------------------------------------------------------


def test_cond_becomes_case_with_two_branches():
    module = _lower("cond_bool")
    (case,) = _ops(module, jx.CaseOp)
    assert len(case.branches) == 2
    assert "cond" not in _prims(module)
    assert "mul" in _prims(case.branches[1]) and "sub" in _prims(case.branches[0])  # branch 0 is false


def test_switch_becomes_case_with_every_branch():
    module = _lower("switch")
    (case,) = _ops(module, jx.CaseOp)
    assert len(case.branches) == 4
    assert "cond" not in _prims(module)


def test_a_platform_dependent_cond_becomes_the_branch_of_the_default_backend():
    """`lax.platform_dependent` (`jnp.diagonal`'s mask for Pallas on TPUs, its gather elsewhere): the
    branch jit's lowering picks is inlined, and what only another branch reads is dead."""
    def on_this_platform(x):
        return lax.platform_dependent(x, cpu=jnp.sin, cuda=jnp.cos, rocm=jnp.cos, default=jnp.tanh) * 2.0

    x = jnp.linspace(-1.0, 1.0, 64)
    module = jaxalloc.planned(on_this_platform).lower(x)
    assert not _ops(module, jx.CaseOp) and "platform_index" not in _prims(module)
    assert len({"sin", "cos", "tanh"} & set(_prims(module))) == 1
    check_program(on_this_platform, x)  # the branch jit runs
    module = jaxalloc.planned(lambda a: jnp.diagonal(a) * 2.0).lower(jnp.ones((8, 8)))
    assert not _ops(module, jx.CaseOp) and "gather" in _prims(module) and "eq" not in _prims(module)  # no mask


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_both_directions(sign):
    x, y = BY_NAME["cond_bool"].make_args()
    check_program(BY_NAME["cond_bool"].fn, sign * jnp.abs(x), y)


@pytest.mark.parametrize("index", [-5, -1, 0, 1, 2, 3, 4, 100])
def test_switch_clamps_index(index):
    _, x = BY_NAME["switch"].make_args()
    check_program(BY_NAME["switch"].fn, jnp.int32(index), x)


# --- calls, custom derivatives, opaque primitives ---------------------------------------------

_CALLS = ("jit", "pjit", "remat2", "checkpoint", "custom_jvp_call", "custom_vjp_call", "closed_call", "custom_lin")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("inner_jit", "jit"),
        ("checkpoint_forward", "remat2"),
        ("checkpoint_grad", "remat2"),
        ("checkpoint_policy_grad", "remat2"),
        ("nn_relu_gelu", "custom_jvp_call"),
        ("user_custom_jvp", "custom_jvp_call"),
        ("user_custom_vjp", "custom_vjp_call"),
        ("random_key_arg", "jit"),
    ],
)
def test_call_primitives_are_inlined(name, expected):
    program = BY_NAME[name]
    assert expected in _jaxpr_primitives(jax.make_jaxpr(program.fn)(*program.make_args()).jaxpr)
    module = _lower(name)
    assert not set(_prims(module)) & set(_CALLS)
    text = str(module)
    assert not any(f'jx.prim "{call}"' in text for call in _CALLS)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("custom_reduce", ["reduce", "abs", "reduce"]),
        ("linear_solve", ["custom_linear_solve"]),
        ("host_callback", ["pure_callback", "add"]),
    ],
)
def test_unknown_higher_order_primitive_stays_one_prim(name, expected):
    module = _lower(name)
    assert _prims(module) == expected  # nothing of the nested computations was inlined
    assert not _ops(module, jx.WhileOp) and not _ops(module, jx.CaseOp)


def test_unused_outputs_and_dropvars():
    """Unused equation outputs (printed `_`) convert and run; so do real DropVars.

    jax 0.10 makes DropVars only in old-style partial evaluation, so the test also puts them
    in by hand where the corpus program leaves outputs unused.
    """
    program = BY_NAME["unused_outputs"]
    args = program.make_args()
    closed = jax.make_jaxpr(program.fn)(*args)
    used = {v for eqn in closed.jaxpr.eqns for v in eqn.invars if isinstance(v, core.Var)}
    used |= {v for v in closed.jaxpr.outvars if isinstance(v, core.Var)}
    eqns = [
        eqn.replace(outvars=[v if v in used else core.DropVar(v.aval) for v in eqn.outvars])
        for eqn in closed.jaxpr.eqns
    ]
    dropped = closed.replace(jaxpr=closed.jaxpr.replace(eqns=eqns))
    assert sum(isinstance(v, core.DropVar) for eqn in dropped.jaxpr.eqns for v in eqn.outvars) == 3
    core.check_jaxpr(dropped.jaxpr)
    converted = convert(dropped, "unused_outputs")
    check_roundtrip(converted.module)
    flat = jax.tree_util.tree_leaves(args)
    outputs = make_interpreter(converted.module, JxFunctions(converted.table)).call_op("unused_outputs", tuple(flat))
    assert_same(list(outputs), jax.tree_util.tree_leaves(jax.jit(program.fn)(*args)))


# --- constants, names, literals ----------------------------------------------------------------


def test_large_closed_constants_stay_out_of_the_ir():
    program = BY_NAME["large_closed_constant"]
    module = jaxalloc.planned(program.fn).lower(*program.make_args())
    text = str(module)
    assert len(text) < 1500, text
    consts = {tuple(op.res.type.get_shape()) for op in _ops(module, jx.ConstOp)}
    assert {(128, 64), (64, 128)} <= consts
    for value in (*LARGE_CONST[0, :4], *np.asarray(LARGE_JAX_CONST)[0, :4]):
        assert f"{value:.4f}"[:-1] not in text


def test_small_constants_are_shown():
    program = BY_NAME["closed_over_constants"]
    text = str(jaxalloc.planned(program.fn, passes=()).lower(*program.make_args()))
    assert '%b = jx.const[0] "[ 0.5, -1. ,  2. ]" : tensor<3xf32>' in text  # closed-over numpy array
    assert '%c = jx.const[1] "[0. , 0.5, 1. ]" : tensor<3xf32>' in text  # closed-over jax array


def test_name_hints_come_from_jaxpr_vars():
    def f(x, y):
        return jnp.sin(x) * y + 1.0

    args = (jnp.ones(3), jnp.ones(3))
    jaxpr_text = str(jax.make_jaxpr(f)(*args))
    assert all(line in jaxpr_text for line in ("c:f32[3] = sin a", "d:f32[3] = mul c b", "e:f32[3] = add d 1.0"))
    text = str(jaxalloc.planned(f, passes=AS_TRACED).lower(*args))
    assert "@f(%a: tensor<3xf32>, %b: tensor<3xf32>)" in text
    assert '%c = jx.prim "sin"' in text and '%d = jx.prim "mul"' in text and '%e = jx.prim "add"' in text


def test_forwarded_argument_keeps_its_name():
    def identity_call(x):
        return jax.jit(lambda v: v)(x) + 1.0

    text = str(jaxalloc.planned(identity_call).lower(jnp.ones(2)))
    assert "@identity_call(%a: tensor<2xf32>)" in text and '= jx.prim "add"[1](%a, %0)' in text


def test_weak_typed_scalar_arguments():
    program = BY_NAME["weak_types"]
    jaxpr = jaxalloc.planned(program.fn).trace(*program.make_args())
    # x is a float16 array; 2.5 and 3 are weak; a Python bool is never weak
    assert [v.aval.weak_type for v in jaxpr.jaxpr.invars] == [False, True, True, False]


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [lambda x: jnp.nonzero(x), lambda x: x[x > 0], lambda x: x if x.sum() > 0 else -x],
    ids=["nonzero", "boolean_mask", "python_if"],
)
def test_data_dependent_shape_is_a_clear_error(fn):
    with pytest.raises(jaxalloc.UnsupportedProgramError, match="depends on input values") as info:
        jaxalloc.planned(fn)(jnp.arange(4.0))
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no deep JAX traceback


@pytest.mark.parametrize("bad", ["a string", object(), [1, "x"]], ids=["str", "object", "list_with_str"])
def test_non_array_argument_is_a_clear_error(bad):
    with pytest.raises(jaxalloc.UnsupportedProgramError, match="not an array"):
        jaxalloc.planned(lambda x, y: x)(jnp.ones(2), bad)


# --- the API ----------------------------------------------------------------------------------


def test_cache_traces_once_per_signature():
    traces = []

    def f(x, scale):
        traces.append(x.shape)
        return x * scale

    f_p = jaxalloc.planned(f)
    f_p(jnp.ones(3), 2.0)
    f_p(jnp.asarray(np.full(3, 5.0, np.float32)), 3.0)  # same shapes, dtypes and weak types
    assert len(traces) == 1 and len(f_p._cache) == 1
    out = f_p(jnp.ones((2, 2)), 2.0)  # a new shape traces again
    assert len(traces) == 2 and len(f_p._cache) == 2
    np.testing.assert_array_equal(out, np.full((2, 2), 2.0, np.float32))
    f_p(jnp.ones(3, jnp.int32), 2.0)  # and a new dtype
    assert len(traces) == 3 and len(f_p._cache) == 3


def test_decorators():
    @jaxalloc.planned
    def f(x):
        return x + 1

    @jaxalloc.planned(mode="eager")
    def g(x):
        return x * 2

    assert isinstance(f, jaxalloc.Planned) and isinstance(g, jaxalloc.Planned)
    assert f.__name__ == "f" and g.mode == "eager"
    np.testing.assert_array_equal(g(f(jnp.arange(3))), np.array([2, 4, 6], np.int32))
    assert g.last_run.ops == 2  # the literal 2 (a jx.const) and the mul


def test_pytree_outputs_keep_their_structure():
    program = BY_NAME["pytrees"]
    out = jaxalloc.planned(program.fn)(*program.make_args())
    assert set(out) == {"sum", "nested", "scalar"}
    assert isinstance(out["nested"]["list"], list) and len(out["nested"]["list"]) == 2
    assert isinstance(out["nested"]["tuple"], tuple) and out["nested"]["tuple"][1] is None
    assert_same(out, program.fn(*program.make_args()))


# --- memory -----------------------------------------------------------------------------------


def test_long_elementwise_chain_keeps_live_bytes_low():
    mib = 1 << 20

    def chain(x):
        for i in range(200):
            x = x * np.float32(0.999) if i % 2 else x + np.float32(0.001)
        return x

    x = jnp.asarray(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
    assert x.nbytes == mib
    converted = jaxalloc.planned(chain)._traced((x,), {}).converted
    assert len(list(converted.func.body.block.ops)) > 200
    sampler = LiveBytesSampler()
    interpreter = make_interpreter(converted.module, JxFunctions(converted.table), listeners=[sampler])
    (out,) = interpreter.call_op(converted.func.sym_name.data, (x,))
    peak = sampler.peak - sampler.before
    assert mib <= peak < 4 * mib, f"peak {peak / mib:.1f} MiB above the baseline"
    np.testing.assert_allclose(out, jax.jit(chain)(x), rtol=2e-5, atol=2e-6)
