"""`jx-canonicalize`: each rewrite gives `jax.jit`'s values, its new bindings print as they bind,
and every program it changes runs checked (the sanitizer) with a plan the static checker accepts."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax._src.ad_util import add_jaxvals_p

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.frontend.convert import parse_module, printable_params
from jaxalloc.frontend.types import dtype_of, element_type
from jaxalloc.passes.canonicalize import IMPLICIT_BROADCAST, MARKERS, canonicalize, exact_widening
from jaxalloc.passes.constant_folding import foldable
from jaxalloc.frontend.bindings import FusedBinding
from jaxalloc.testing.corpus import PROGRAMS as CORPUS
from jaxalloc.testing.differential import AS_TRACED, THOROUGH, check_program, check_random_program, sample
from jaxalloc.testing.random_programs import random_program

CANON = ("jx-dce", "jx-canonicalize")


def _lowered(fn, *args, passes=CANON):
    """The jx module of `fn(*args)` after `passes`, and its side table."""
    traced = jaxalloc.planned(fn, passes=passes)._traced(args, {})
    return traced.converted.module, traced.converted.table


def _primitives(module) -> list[str]:
    return [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp)]


def _is_prim(op, name: str) -> bool:
    return isinstance(op, jx.PrimOp) and op.primitive.data == name


def _checked(fn, *args, passes=CANON) -> jaxalloc.Planned:
    """The sanitizer run equals `jax.jit`, copies nothing, and the plan passes the static checker."""
    planned = check_program(fn, *args, mode="checked", passes=passes)
    assert planned.last_run.copied_bytes == 0
    planned.plan(*args).check()
    return planned


@functools.cache
def _changed_corpus() -> list:
    """The corpus programs in which `jx-canonicalize` changes something."""
    return [
        p for p in CORPUS
        if str(jaxalloc.planned(p.fn, passes=AS_TRACED).lower(*p.make_args())) != str(_lowered(p.fn, *p.make_args())[0])
    ]


# --- each rewrite, and the cases it must leave alone -------------------------------------------

X = jnp.linspace(-2.0, 2.0, 4 * 8 * 6).reshape(4, 8, 6)
W = jnp.linspace(-1.0, 1.0, 6 * 8).reshape(6, 8)


def test_a_transpose_feeding_matmuls_becomes_their_dimension_numbers():
    def fn(x, w):
        return x.transpose(0, 2, 1) @ w.T, x @ x.transpose(0, 2, 1)  # both operands; a batched one

    module, table = _lowered(fn, X, W)
    assert "transpose" not in _primitives(module)
    dots = [op for op in module.walk() if _is_prim(op, "dot_general")]
    assert [table[op.key.data].params["dimension_numbers"] for op in dots] == [
        (((1,), (1,)), ((), ())),
        (((2,), (2,)), ((0,), (0,))),
    ]
    _checked(fn, X, W)


def test_a_transpose_that_reorders_free_dimensions_stays():
    """dot_general keeps an operand's free dims in the operand's order: `x.transpose(2, 1, 0)`
    contracting its last dim has free dims (6, 8), which x itself would give as (8, 6)."""

    def fn(x, y):
        return lax.dot_general(x.transpose(2, 1, 0), y, (((2,), (0,)), ((), ())))

    y = jnp.linspace(0.0, 1.0, 4 * 3).reshape(4, 3)
    module, _ = _lowered(fn, X, y)
    assert _primitives(module).count("transpose") == 1
    _checked(fn, X, y)


def test_a_transposed_matmul_result_swaps_the_operands():
    def fn(a, b):
        return (a @ b).transpose(0, 2, 1), lax.dot_general(a[0], b[0], (((1,), (0,)), ((), ())), precision=(
            lax.Precision.HIGHEST, lax.Precision.DEFAULT)).T

    a, b = X[:, :, :3], jnp.linspace(-1.0, 1.0, 4 * 3 * 5).reshape(4, 3, 5)
    module, table = _lowered(fn, a, b)
    assert "transpose" not in _primitives(module)
    dots = [op for op in module.walk() if _is_prim(op, "dot_general")]
    assert [tuple(op.res[0].type.get_shape()) for op in dots] == [(4, 5, 8), (5, 8)]
    assert table[dots[0].key.data].params["dimension_numbers"] == (((1,), (2,)), ((0,), (0,)))
    assert table[dots[1].key.data].params["precision"] == (lax.Precision.DEFAULT, lax.Precision.HIGHEST)
    _checked(fn, a, b)


def test_transposes_of_transposes_compose_or_cancel():
    def fn(x):
        return x.transpose(1, 0, 2).transpose(0, 2, 1) * 2.0, x.transpose(2, 0, 1).transpose(1, 2, 0) + 1.0

    module, table = _lowered(fn, X)
    (transpose,) = [op for op in module.walk() if _is_prim(op, "transpose")]
    assert table[transpose.key.data].params["permutation"] == (1, 2, 0)
    _checked(fn, X)


def test_reshapes_of_reshapes_become_one_or_none():
    def fn(x):
        return x.reshape(8, 24).reshape(192) + 1.0, jnp.squeeze(x.reshape(1, 192)).reshape(4, 8, 6) * 3.0

    module, _ = _lowered(fn, X)
    assert _primitives(module).count("reshape") == 1 and "squeeze" not in _primitives(module)
    _checked(fn, X)


def test_a_squeeze_undoing_a_reshape_cancels_it():
    def fn(x):
        y = x.reshape(4, 48) * 2.0
        return lax.squeeze(y.reshape(4, 1, 48), (1,)) + 1.0

    module, _ = _lowered(fn, X)
    assert "squeeze" not in _primitives(module)
    _checked(fn, X)


@pytest.mark.parametrize(
    "source, wide",
    [(jnp.float16, jnp.float32), (jnp.bfloat16, jnp.float32), (jnp.int8, jnp.int32), (jnp.uint8, jnp.int16), (jnp.bool_, jnp.float32)],
)
def test_an_exact_round_trip_of_conversions_goes(source, wide):
    if jnp.issubdtype(source, jnp.floating):  # zeros of both signs, subnormals, the largest, inf, NaN
        x = jnp.asarray([0.0, -0.0, 1.5, -2.25, 6.1e-5, 3.0e-7, 65504.0, np.inf, -np.inf, np.nan], source)
    else:
        x = jnp.asarray({jnp.bool_: [0, 1, 1, 0], jnp.uint8: [0, 1, 255, 7]}.get(source, [0, 1, -1, 127, -128]), source)

    def fn(x):
        return x.astype(wide).astype(source)

    module, _ = _lowered(fn, x)
    assert "convert_element_type" not in _primitives(module)
    planned = _checked(fn, x)
    assert np.asarray(planned(x)).tobytes() == np.asarray(x).tobytes()  # bit for bit, NaN and -0.0 included


@pytest.mark.parametrize("source, narrow", [(jnp.float32, jnp.float16), (jnp.float32, jnp.bfloat16), (jnp.int32, jnp.float32)])
def test_a_lossy_round_trip_of_conversions_stays(source, narrow):
    x = jnp.asarray([1.0001, 3.0e-8, 70000.0, 1.0e39 / 1.0e10]) if source is jnp.float32 else jnp.asarray([16777217, -3], source)

    def fn(x):
        return x.astype(narrow).astype(source)

    module, _ = _lowered(fn, x)
    assert _primitives(module).count("convert_element_type") == 2
    planned = _checked(fn, x)
    assert not np.array_equal(np.asarray(planned(x)), np.asarray(x))


def test_exact_widening_table():
    f32, f64, f16, i32 = (element_type(np.dtype(t)) for t in (np.float32, np.float64, np.float16, np.int32))
    assert exact_widening(f32, f64) and exact_widening(f16, f32) and exact_widening(i32, f64)
    assert not exact_widening(f32, f16) and not exact_widening(i32, f32) and not exact_widening(f64, f32)


def test_a_broadcast_that_adds_unit_dims_is_a_view():
    def fn(x):
        return jnp.tanh(x.sum(-1)[:, :, None])  # (4, 8) -> (4, 8, 1)

    module, _ = _lowered(fn, X)
    assert "broadcast_in_dim" not in _primitives(module) and "reshape" in _primitives(module)
    _checked(fn, X)


def test_broadcasts_into_elementwise_ops_become_implicit():
    def fn(x, b, c):
        bias = x @ W + b  # b: (8,) -> (1, 8), read by add
        scaled = bias * jnp.full_like(bias, 2.0)  # a scalar's broadcast: the scalar itself
        return scaled, jnp.broadcast_to(b, (4, 8)) + jnp.broadcast_to(c, (4, 8))

    b, c = jnp.arange(8.0), jnp.arange(4.0)[:, None]
    module, _ = _lowered(fn, X[0, :4], b, c)
    shapes = [tuple(op.res[0].type.get_shape()) for op in module.walk() if _is_prim(op, "broadcast_in_dim")]
    assert shapes == [(4, 8)]  # the last sum must keep one full-shaped operand to keep its shape
    adds = [op for op in module.walk() if _is_prim(op, "add")]
    assert [tuple(v.type.get_shape()) for v in adds[0].args] == [(4, 8), (1, 8)]
    _checked(fn, X[0, :4], b, c)


def test_a_broadcast_squared_stays():
    """Both operands of `b * b` are the broadcast: made implicit, the product would be small."""

    def fn(v):
        b = jnp.broadcast_to(v, (4, 4))
        return b * b, (b * b).sum()

    module, _ = _lowered(fn, jnp.arange(4.0))
    assert "broadcast_in_dim" in _primitives(module)
    _checked(fn, jnp.arange(4.0))


def test_a_broadcast_into_select_stays():
    def fn(p, x, row):
        return jnp.where(p, x, jnp.broadcast_to(row, x.shape))

    args = (X[0] > 0, X[0], jnp.arange(6.0))
    module, _ = _lowered(fn, *args)
    assert "broadcast_in_dim" in _primitives(module)
    _checked(fn, *args)


@pytest.mark.parametrize("primitive", sorted(IMPLICIT_BROADCAST))
def test_each_implicitly_broadcasting_primitive_broadcasts(primitive):
    """The table is right: under tracing, as the executors bind it, each primitive takes a (1, 3)
    and a rank-0 operand beside a (4, 3) one."""
    integers = primitive in ("and", "or", "xor") or primitive.startswith("shift")
    full, row, scalar = (jax.ShapeDtypeStruct(s, np.int32 if integers else np.float32) for s in ((4, 3), (1, 3), ()))
    bind = getattr(lax, f"{primitive}_p").bind
    for a, b in ((full, row), (row, full), (full, scalar), (scalar, full)):
        assert jax.eval_shape(bind, a, b).shape == (4, 3)


def test_add_any_does_not_broadcast():
    with pytest.raises(AssertionError):
        jax.eval_shape(add_jaxvals_p.bind, jax.ShapeDtypeStruct((4, 3), np.float32), jax.ShapeDtypeStruct((), np.float32))


def test_a_reduction_over_unit_dims_is_a_view():
    def fn(x):
        y = x[:, :1, :]  # (4, 1, 6)
        return y.sum(1) * 2.0, y[:1, :, :1].max((0, 2)) + 1.0

    module, _ = _lowered(fn, X)
    assert not {"reduce_sum", "reduce_max"} & set(_primitives(module))
    _checked(fn, X)


def test_a_division_by_a_smaller_operand_is_a_product_with_its_reciprocal():
    def fn(x, s, v, n):
        return x / s, x / v[None, None, :], x / x, n // 2, (x / s).sum()

    n = jnp.arange(6, dtype=jnp.int32)
    module, _ = _lowered(fn, X, jnp.float32(3.3), X[0, 0] + 2.0, n)
    assert _primitives(module).count("div") == 2  # x / x, and the integer division
    assert _primitives(module).count("integer_pow") == 3
    _checked(fn, X, jnp.float32(3.3), X[0, 0] + 2.0, n)


def test_a_scaled_chain_fuses_whole_after_its_division_goes():
    def fn(g, norm):
        clipped = g / norm
        return clipped * 0.9 + (clipped * clipped) * 0.1

    g, norm = jnp.linspace(-1.0, 1.0, 4096).reshape(64, 64), jnp.float32(2.5)
    module, _ = _lowered(fn, g, norm, passes=(*CANON, "jx-fuse"))
    fused = [op for op in module.walk() if isinstance(op, jx.FusedOp)]
    assert len(fused) == 1 and not {"div", "mul", "add"} & {
        op.primitive.data for op in module.ops.first.body.block.ops if isinstance(op, jx.PrimOp)
    }
    _checked(fn, g, norm, passes=(*CANON, "jx-fuse"))


def test_stop_gradient_and_copies_of_values_read_nowhere_else_go():
    def fn(x):
        y = jnp.array(jnp.tanh(x), copy=True)
        return jax.nn.softmax(x, axis=-1), lax.stop_gradient(x) * 2.0, y.copy() + 1.0, jnp.copy(x)

    assert _primitives(jaxalloc.planned(fn, passes=AS_TRACED).lower(X)).count("copy") == 3
    module, _ = _lowered(fn, X)
    assert "stop_gradient" not in _primitives(module)
    # the copy of the argument stays: the caller's array and the output are two values
    (copy,) = [op for op in module.walk() if _is_prim(op, "copy")]
    assert copy.args[0] is module.ops.first.body.block.args[0]
    _checked(fn, X)


def test_equinox_markers_are_their_operands_and_unvmap_reductions_plain_reductions():
    import equinox.internal as eqxi

    def fn(x, flag):
        y = eqxi.nonbatchable(jnp.sin(x))
        any_positive = eqxi.unvmap_any(x > 0.0)  # over an array: a reduction of every dimension
        biggest = eqxi.unvmap_max(jnp.max(x))  # of a scalar: the scalar
        return jnp.where(any_positive & eqxi.unvmap_all(flag), y, -y) + biggest

    traced = _primitives(jaxalloc.planned(fn, passes=AS_TRACED).lower(X, True))
    assert {"nonbatchable", "unvmap_any", "unvmap_all", "unvmap_max"} <= set(traced)
    module, _ = _lowered(fn, X, True)
    primitives = _primitives(module)
    assert not {"nonbatchable", "unvmap_any", "unvmap_all", "unvmap_max"} & set(primitives)
    assert primitives.count("reduce_or") == 1
    _checked(fn, X, True)


def test_a_diffrax_solve_keeps_no_value_of_equinox_markers():
    """`select_if_vmap` is its first operand: the copies equinox's loops feed it go too. The solve's
    plan passes the static checker; it runs inside its arena in `tests/test_library_corpus.py` (after
    every default pass) and here with `JAXALLOC_THOROUGH=1` (the sanitizer's run takes some 15 s)."""
    from jaxalloc.testing.library import _neural_ode_args, diffrax_neural_ode

    args = _neural_ode_args()
    traced = _primitives(jaxalloc.planned(diffrax_neural_ode, passes=AS_TRACED).lower(*args))
    module, _ = _lowered(diffrax_neural_ode, *args)
    primitives = _primitives(module)
    assert "select_if_vmap" in traced and not set(MARKERS) & set(primitives)
    assert primitives.count("copy") < traced.count("copy") / 2
    if THOROUGH:
        _checked(diffrax_neural_ode, *args)
    else:
        assert jaxalloc.planned(diffrax_neural_ode, passes=CANON).plan(*args).check().copies == ()


def test_a_loop_result_that_is_always_its_init_operand_is_read_as_that_operand():
    """The inner loop hands back the outer carry `z` it was given, so its result is `z` after any
    number of rounds. Read as `z`, the outer loop yields its own carry unchanged where it yielded
    that result twice, and nothing is copied between rounds (16 bytes a checked run before)."""

    def fn(x, y, n):
        def outer(_, carry):
            a, _, z = carry
            _, b = lax.fori_loop(0, n, lambda i, s: (s[0] + 1.0, z), (a, z))
            return a * 0.5, b, b

        return lax.fori_loop(0, 3, outer, (x, y, y * 2.0))

    args = jnp.arange(4.0), jnp.ones(4), 2
    module, _ = _lowered(fn, *args)
    outer = next(op for op in module.walk() if isinstance(op, jx.WhileOp))
    body = outer.body.block
    assert list(body.last_op.operands[2:]) == [body.args[3]] * 2  # (counter, a, b, z): z twice
    _checked(fn, *args)
    assert check_program(fn, *args, mode="compiled", passes=CANON).last_run.copied_bytes == 0


def test_a_loop_position_handed_an_invariant_position_s_value_with_the_same_init_is_that_init():
    """The inner loop runs `(p, q) -> (q, q)` from `(z, z)`: `q` yields its carry unchanged (its
    condition reads it), and `p`, handed `q`'s value with the same init operand, holds `z` in every
    round too, however many rounds run. Read as `z`, the outer loop yields its own carry unchanged:
    its result is `x`, and the inner loop, whose results nothing reads then, goes. Kept, round 0
    copied the argument into the outer loop's ring (random program 22423)."""

    def fn(x, n):
        def outer(_, carry):
            a, z = carry
            _, p, _ = lax.while_loop(lambda s: (s[0] < n) & (jnp.sum(s[2]) < 100.0),
                                     lambda s: (s[0] + 1, s[2], s[2]), (0, z, z))
            return a * 0.5, p

        return lax.fori_loop(0, 3, outer, (x, x))

    args = jnp.arange(4.0), 2
    module, _ = _lowered(fn, *args)
    assert len([op for op in module.walk() if isinstance(op, jx.WhileOp)]) == 1
    func = module.ops.first
    assert func.body.block.last_op.operands[1] is func.body.block.args[0]  # the result z is x
    _checked(fn, *args)
    assert check_program(fn, *args, mode="compiled", passes=CANON).last_run.copied_bytes == 0
    program = random_program(22423)
    assert jaxalloc.planned(program.fn).plan(*program.args, include_outputs=True).check().copies == ()


@pytest.mark.parametrize("x", [jnp.arange(4.0), -jnp.arange(4.0)], ids=["runs", "stops"])
def test_a_loop_of_one_round_is_its_body_and_one_of_at_most_one_round_a_case(x):
    """A scan of length 1 runs its body once: no loop is left. A `while_loop` counting to 1 that may
    stop sooner (`at_most 1`, read through the conversion of its Python int counter's weak test to a
    strong bool) runs its body once or not at all: a case on its condition, tested on the init
    operands. A loop of two rounds stays."""

    def fn(x, y):
        c, ys = lax.scan(lambda c, v: (c * v, c + v), x, y[None])
        z = lax.while_loop(lambda s: (s[0] < 1) & (jnp.sum(s[1]) > 0), lambda s: (s[0] + 1, jnp.sin(s[1])), (0, x))[1]
        w = lax.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * 2.0), (0, y))[1]
        return c, ys, z, w

    args = x, jnp.ones(4)
    traced, _ = _lowered(fn, *args, passes=("jx-dce",))
    assert [op.said_rounds for op in traced.walk() if isinstance(op, jx.WhileOp)] == [(1, None), (None, 1), (2, None)]
    module, _ = _lowered(fn, *args)
    assert [op.said_rounds for op in module.walk() if isinstance(op, jx.WhileOp)] == [(2, None)]
    assert len([op for op in module.walk() if isinstance(op, jx.CaseOp)]) == 1
    _checked(fn, *args)


def test_a_copy_of_a_value_its_block_computes_goes_unless_the_block_hands_on_both():
    def fn(x):
        t, kept = jnp.tanh(x), jnp.sin(x)
        return jnp.copy(t), t * 2.0, kept, jnp.copy(kept)

    def looped(x):
        def body(_, carry):
            a, b = carry
            t = jnp.tanh(a)
            return jnp.copy(t), t * b

        return lax.fori_loop(0, 3, body, (x, x + 1.0))

    module, _ = _lowered(fn, X)
    (copy,) = [op for op in module.walk() if _is_prim(op, "copy")]
    assert _is_prim(copy.args[0].owner, "sin")  # the function hands on sin(x) and its copy: two values
    module, _ = _lowered(looped, X)
    assert "copy" not in _primitives(module)
    _checked(fn, X)
    _checked(looped, X)


# --- the programs it changes ----------------------------------------------------------------------


def test_new_bindings_print_as_they_bind_and_text_alone_gives_the_same_module():
    """Every op of a canonicalized corpus program shows its binding's parameters; canonicalizing the
    printed module without its side table (as `xdsl-opt` does) gives the same text, keys included,
    where no value is folded (text alone holds no constant's array to fold with)."""
    compared = 0
    for program in _changed_corpus():
        before = str(jaxalloc.planned(program.fn, passes=AS_TRACED).lower(*program.make_args()))
        module, table = _lowered(program.fn, *program.make_args())
        for op in module.walk():
            if isinstance(op, jx.PrimOp):
                binding = table[op.key.data]
                assert binding.primitive.name == op.primitive.data, program.name
                assert printable_params(binding.params) == {k: v.data for k, v in op.params.data.items()}, program.name
        alone = parse_module(before)
        if foldable(alone):
            continue
        canonicalize(alone)
        alone.verify()
        assert str(alone) == str(module), program.name
        compared += 1
    assert compared >= 20


@pytest.mark.parametrize("program", sample(_changed_corpus(), 4), ids=lambda p: p.name)
def test_changed_corpus_program_checked(program):
    """A quarter of the programs it changes, canonicalized alone (the suite's time budget:
    `test_corpus` checks every program after the default passes, which canonicalize)."""
    _checked(program.fn, *program.make_args())


@pytest.mark.parametrize("program", sample(_changed_corpus(), 8), ids=lambda p: p.name)
def test_changed_corpus_program_checked_after_fusion(program):
    """A few (the suite's time budget): `jx-fuse` then fuses the broadcasts made implicit."""
    _checked(program.fn, *program.make_args(), passes=CANON + ("jx-fuse",))


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_random_program_checked(seed):
    program = random_program(seed)
    planned = check_random_program(program, mode="checked", passes=CANON)
    planned.plan(*program.args).check()


def test_it_removes_what_it_promises_on_a_training_step():
    """The MLP training step's weight gradients, `(x.T @ g).T`, lose their transposes: the bound drops."""
    program = next(p for p in CORPUS if p.name == "mlp_train_step")
    plain = jaxalloc.planned(program.fn, passes=AS_TRACED).plan(*program.make_args(), include_outputs=True)
    canonical = jaxalloc.planned(program.fn, passes=CANON).plan(*program.make_args(), include_outputs=True)
    assert canonical.lower_bound < plain.lower_bound and len(canonical.buffers) < len(plain.buffers)


def test_a_canonicalized_training_step_runs_compiled():
    """The rebound matmuls run in the compiled arena too (here after `jx-fuse` as well)."""
    program = next(p for p in CORPUS if p.name == "mlp_train_step")
    planned = check_program(program.fn, *program.make_args(), mode="compiled", passes=CANON + ("jx-fuse",))
    assert planned.last_run.copied_bytes == 0


def test_fused_implicit_broadcasts_need_no_memory_of_their_own():
    """After `jx-canonicalize`, `jx-fuse` takes in the size-1 operands a broadcast left; XLA then
    broadcasts them inside the kernel, in no temp memory."""
    program = next(p for p in CORPUS if p.name == "layernorm_train_step")
    traced = jaxalloc.planned(program.fn, passes=CANON + ("jx-fuse",))._traced(program.make_args(), {})
    broadcasting = [
        op for op in traced.converted.module.walk()
        if isinstance(op, jx.FusedOp) and any(v.type.get_shape() not in ([], op.res[0].type.get_shape()) for v in op.args)
    ]
    assert broadcasting
    for op in broadcasting:
        operands = [jax.ShapeDtypeStruct(tuple(v.type.get_shape()), dtype_of(v.type.element_type)) for v in op.args]
        compiled = jax.jit(FusedBinding(op, traced.converted.table).bind).lower(*operands).compile()
        assert compiled.memory_analysis().temp_size_in_bytes == 0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
def test_a_division_by_a_constant_is_a_product_with_a_constant(dtype):
    """The reciprocal of a scalar constant is folded, as XLA folds it: no op of its own in the arena,
    and the products `jax.jit` computes."""
    def fn(x):
        return x / 3.0, x / np.asarray(0.1, dtype), x / np.asarray(-0.0, dtype), x / np.asarray(1e-3, dtype)

    x = X.astype(dtype)
    module, _ = _lowered(fn, x)
    assert "integer_pow" not in _primitives(module) and "div" not in _primitives(module)
    for ours, jits in zip(jaxalloc.planned(fn, passes=CANON)(x), jax.jit(fn)(x)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(jits))
    _checked(fn, x)


def test_a_conversion_to_its_own_type_is_its_operand():
    """A conversion that only changes a value's weak type (a Python scalar argument `k`) is the
    value, as XLA keeps no weak types."""
    def fn(x, k):
        return jnp.tanh(x) * k + 1.0

    module, _ = _lowered(fn, X, 3.0)
    assert "convert_element_type" not in _primitives(module)
    _checked(fn, X, 3.0)


def test_a_bfloat16_division_stays_a_division():
    """XLA divides a bfloat16 in float32 and rounds once, which a product with the reciprocal does
    not give."""
    def fn(x):
        return x / 3.0

    x = jnp.linspace(-2.0, 2.0, 4096).astype(jnp.bfloat16)
    module, _ = _lowered(fn, x)
    assert _primitives(module) == ["div"]
    np.testing.assert_array_equal(np.asarray(jaxalloc.planned(fn, passes=CANON)(x), np.float32), np.asarray(jax.jit(fn)(x), np.float32))


def test_a_division_of_a_constant_folds_whole_and_text_alone_folds_only_numbers():
    """XLA folds a constant's quotient whole, which a product with the reciprocal would not give;
    on IR text alone a constant that shows no number keeps its reciprocal an op."""
    c = np.linspace(-3.0, 3.0, 4096, dtype=np.float32)

    def fn(x):
        return jnp.asarray(c) / 3.0 + x

    x = jnp.zeros(4096)
    assert _primitives(_lowered(fn, x)[0]) == ["add"]
    np.testing.assert_array_equal(np.asarray(jaxalloc.planned(fn, passes=CANON)(x)), np.asarray(jax.jit(fn)(x)))
    module = parse_module('''builtin.module {
  jx.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %k = jx.const[0] "three" : tensor<f32>
    %y = jx.prim "div"[1](%x, %k) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    jx.yield %y : tensor<4xf32>
  }
}''')
    canonicalize(module)
    assert _primitives(module) == ["integer_pow", "mul"]


def _solve(x):
    """A loop whose step and scale only Python floats determine, as an ODE solver works them out
    before its steps: no slot of the arena holds them through the loop."""
    dt = (jnp.float32(1.0) - jnp.float32(0.0)) / 7.0
    scale = jnp.tanh(jnp.float32(0.3)) * jnp.exp(dt)
    return lax.fori_loop(0, 7, lambda i, y: y + dt * jnp.sin(y) * scale, x), jnp.sqrt(dt) + 1


def test_values_only_constants_determine_are_constants_as_xla_folds_them():
    module, table = _lowered(_solve, X)
    assert not [name for name in _primitives(module) if name in ("tanh", "exp", "sqrt", "div", "sub")]
    loop = next(op for op in module.walk() if isinstance(op, jx.WhileOp))
    outside = {v for op in loop.body.walk() for v in op.operands if not loop.is_ancestor(v.owner)}
    assert len(outside) >= 2 and all(isinstance(v.owner, jx.ConstOp) for v in outside), "the body reads constants"
    (_, ours), (_, jits) = jaxalloc.planned(_solve, passes=CANON, mode="compiled", arena="always")(X), jax.jit(_solve)(X)
    assert ours.dtype == jits.dtype and ours.weak_type == jits.weak_type and float(ours) == float(jits)
    _checked(_solve, X)
    plan = jaxalloc.planned(_solve, passes=CANON, arena="always").plan(X, include_outputs=True)
    assert plan.arena_bytes == 2 * X.nbytes + 64, "the carried value, its next round and the scalar output"


def test_a_folded_constant_is_the_value_xla_folds_it_to():
    """Folded by XLA's own evaluator, not by a compiled kernel of the op: bit for bit jit's."""
    def fn(x):
        c = jnp.asarray(np.linspace(0.1, 3.0, 257, dtype=np.float32))
        return x + (jnp.tanh(c) * jnp.exp(-c) + jnp.log1p(c) ** 1.7)

    x = jnp.zeros(257)
    assert _primitives(_lowered(fn, x)[0]) == ["add"]
    np.testing.assert_array_equal(np.asarray(jaxalloc.planned(fn, passes=CANON)(x)), np.asarray(jax.jit(fn)(x)))


def test_what_would_grow_a_constant_copy_or_call_back_still_runs():
    """A broadcast and an iota of constants would make constants larger than what they come from, a
    copy of a constant is a value the program updates, and a callback runs when the program does."""
    def fn(x):
        twos = jnp.broadcast_to(jnp.float32(2.0), x.shape)
        state = lax.fori_loop(0, 3, lambda i, s: s * 2.0 + i, lax.copy_p.bind(jnp.float32(1.0)))
        shown = jax.pure_callback(lambda v: np.asarray(v * 2, np.float32), jax.ShapeDtypeStruct((), np.float32), jnp.float32(3.0))
        return twos, x + jnp.arange(x.shape[-1], dtype=jnp.float32) + state + shown

    names = _primitives(_lowered(fn, X)[0])
    assert {"broadcast_in_dim", "iota", "copy", "pure_callback"} <= set(names)
    _checked(fn, X)


def test_a_collective_of_constants_still_runs():
    """A collective binds only inside its mesh axes (`shard_map` runs the planned function there); a
    reduction over dimensions folds."""
    module = parse_module('''builtin.module {
  jx.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %c = jx.const[0] : tensor<4xf32>
    %p = jx.prim "ppermute"[1](%c) {axis_name = "('x',)", perm = "((0, 1), (1, 0))"} : (tensor<4xf32>) -> tensor<4xf32>
    %m = jx.prim "pmax"[2](%c) {axes = "('x',)"} : (tensor<4xf32>) -> tensor<4xf32>
    %s = jx.prim "reduce_sum"[3](%c) {axes = "(0,)"} : (tensor<4xf32>) -> tensor<f32>
    %y = jx.prim "add"[4](%p, %m) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    jx.yield %y, %s : tensor<4xf32>, tensor<f32>
  }
}''')
    assert [op.primitive.data for op in foldable(module)] == ["reduce_sum"]


def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _min_pool(x):
    return lax.reduce_window(x, jnp.inf, lax.min, (1, 3, 3, 1), (1, 3, 3, 1), "VALID")


def _row_max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 4), (1, 4), "VALID")


def _pool_gradient(pool):
    return lambda x, g: jax.vjp(pool, x)[1](g)[0]


_POOLED = jnp.round(jax.random.normal(jax.random.key(0), (2, 12, 12, 3)) * 2.0)  # ties in most windows
_POOLED_EDGES = jax.nn.relu(_POOLED).at[0, 0, 0, 0].set(jnp.nan).at[0, 0, 1, 1].set(jnp.nan).at[1, 4, 4, 2].set(jnp.inf)


@pytest.mark.parametrize("pool, x", [
    (_max_pool, _POOLED), (_max_pool, _POOLED_EDGES), (_min_pool, _POOLED), (_min_pool, _POOLED_EDGES),
    (_row_max_pool, _POOLED.reshape(24, 36)),
], ids=["max 2x2", "max 2x2, ReLU zeros, NaN, inf", "min 3x3", "min 3x3, ReLU zeros, NaN, inf", "max 1x4 of rows"])
def test_the_gradient_of_a_pool_whose_windows_tile_its_input_is_selects(pool, x):
    """A max or min pool's gradient whose windows tile the input is the selects XLA fuses into one
    kernel, not `select_and_scatter_add` (which XLA's CPU expands into index arrays the size of the
    input): each window's gradient goes to the element XLA's order selects, ties and NaNs included,
    bit for bit."""
    fn = _pool_gradient(pool)
    g = jnp.linspace(-1.0, 1.0, math.prod(jax.eval_shape(pool, x).shape)).reshape(jax.eval_shape(pool, x).shape)
    module, _ = _lowered(fn, x, g)
    assert "select_and_scatter_add" not in _primitives(module)
    np.testing.assert_array_equal(np.asarray(jaxalloc.planned(fn, passes=CANON, arena="always")(x, g)), np.asarray(jax.jit(fn)(x, g)))
    _checked(fn, x, g)


@pytest.mark.parametrize("window, strides, padding", [((1, 2, 2, 1), (1, 1, 1, 1), "VALID"), ((1, 2, 2, 1), (1, 2, 2, 1), "SAME")])
def test_the_gradient_of_a_pool_of_overlapping_or_padded_windows_stays(window, strides, padding):
    """Where windows overlap or pad the input an element may be in several windows or none: the op stays."""
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding)

    x = _POOLED[:, :11, :11]
    fn = _pool_gradient(pool)
    g = jnp.ones(jax.eval_shape(pool, x).shape)
    assert "select_and_scatter_add" in _primitives(_lowered(fn, x, g)[0])


@pytest.mark.parametrize("shape, dtype", [((64, 32, 4), jnp.uint32), ((7,), jnp.uint32), ((3, 5, 1, 2), jnp.uint16), ((1000,), jnp.uint8)])
def test_random_bits_of_a_threefry_key_are_its_hash_spelled_out(shape, dtype):
    """Random bits are the Threefry hash round by round, which XLA fuses into their reader, where the
    CPU lowering loops with state the size of the draw: the same bits, and a dropout mask made from
    them equal to jit's."""
    def fn(key, x):
        bits = jax.random.bits(jax.random.split(key)[1], shape, dtype)
        return bits, jnp.where(bits < jnp.iinfo(dtype).max // 3, x, 0.0)

    key, x = jax.random.key(3), jnp.linspace(-1.0, 1.0, math.prod(shape)).reshape(shape)
    module, _ = _lowered(fn, key, x)
    assert "random_bits" not in _primitives(module) and "threefry2x32" not in _primitives(module)
    for got, want in zip(jaxalloc.planned(fn, passes=CANON, arena="always")(key, x), jax.jit(fn)(key, x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    _checked(fn, key, x)


def test_random_bits_of_another_key_stay():
    """An `rbg` key's bits are another generator's: the op stays."""
    def fn(key):
        return jax.random.bits(key, (16,))

    assert "random_bits" in _primitives(_lowered(fn, jax.random.key(0, impl="rbg"))[0])
