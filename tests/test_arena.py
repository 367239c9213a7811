"""Arena mode: programs run with every planned value at its offset in one arena.

The proof that the arena is really used is the negative test: the same module with two
conflicting values moved onto each other computes a different answer (and the checker says
why). The other tests pin down the multi-views round by round, the byte layout of every
dtype, the in-place updates of the arena, and the memory a run really takes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from xdsl.context import Context
from xdsl.utils.exceptions import DiagnosticException

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.errors import UnsupportedProgramError
from jaxalloc.execution.arena import Arena, from_bytes, layout_of, to_bytes
from jaxalloc.execution.interpreter import ArenaFunctions, make_interpreter
from jaxalloc.frontend.convert import convert
from jaxalloc.frontend.types import byte_size, tensor_type
from jaxalloc.passes.assign import VerifyPlanPass
from jaxalloc.planning.plan import make_plan
from jaxalloc.testing.corpus import BY_NAME
from jaxalloc.testing.differential import AS_TRACED, THOROUGH, assert_same, memory_figures


def run_in_arena(module, table, *args, listeners=()):
    functions = ArenaFunctions(table)
    func = next(iter(module.ops))
    outputs = make_interpreter(module, functions, listeners).call_op(func.sym_name.data, args)
    return outputs, functions


# --- the negative test -------------------------------------------------------------------------


def two_live_values(x):
    a = jnp.sin(x)
    b = jnp.cos(x)
    return jnp.sum(a * b + a)


def test_a_corrupted_plan_gives_a_wrong_answer_and_the_checker_names_it():
    x = jnp.linspace(0.0, 1.0, 256, dtype=jnp.float32)
    converted = convert(jax.make_jaxpr(two_live_values)(x), "two_live_values")
    plan = make_plan(converted.module)
    expected = jax.jit(two_live_values)(x)

    (good,), functions = run_in_arena(plan.module, converted.table, x)
    np.testing.assert_allclose(good, expected, rtol=1e-6)
    assert functions.copied_bytes == 0

    ops = {op.primitive.data: op for op in plan.module.walk() if isinstance(op, jx.PrimOp)}
    sin, cos = ops["sin"], ops["cos"]
    assert sin.attributes["mem.slot"] != cos.attributes["mem.slot"]  # both live at the mul
    cos.attributes["mem.slot"] = sin.attributes["mem.slot"]  # cos now overwrites sin's bytes

    (bad,), _ = run_in_arena(plan.module, converted.table, x)
    np.testing.assert_allclose(bad, jnp.sum(jnp.cos(x) * jnp.cos(x) + jnp.cos(x)), rtol=1e-5)  # sin read as cos
    assert not np.allclose(bad, expected)
    with pytest.raises(DiagnosticException, match=r"invalid plan of @two_live_values: %\w+ \(sin .*\) is read by .* but %\w+ \(cos .*\) was written over"):
        VerifyPlanPass().apply(Context(), plan.module)


# --- multi-views, round by round ---------------------------------------------------------------


@pytest.mark.parametrize("rounds", [0, 1, 2, 3, 4, 7])
def test_a_two_slot_ring_ends_in_the_right_slot_for_every_round_count(rounds):
    def loop(n, x, w):
        return lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, jnp.tanh(s[1].T * w)), (0, x))[1]

    x = jnp.linspace(-1.0, 1.0, 64 * 64, dtype=jnp.float32).reshape(64, 64)
    w = jnp.eye(64, dtype=jnp.float32) * 0.9 + 0.01
    f = jaxalloc.planned(loop, arena="always")
    assert_same(f(rounds, x, w), jax.jit(loop)(rounds, x, w))
    assert f.last_run.copied_bytes == 0
    (views,) = [op.attributes["mem.views"] for op in f.plan(rounds, x, w).module.walk() if isinstance(op, jx.WhileOp)]
    x_view = views.data[1]
    assert x_view.repeat == 2 and [i.data for i in x_view.initial] == [1]  # round 0 reads x where it is


def test_a_rotation_reads_each_init_operand_in_place_then_its_ring():
    def rotate(a, b, c, d):
        return lax.fori_loop(0, 9, lambda i, s: (s[1], s[2], s[3], s[0] * 2.0 + s[1]), (a, b, c, d))

    args = [jnp.full(256, float(k), jnp.float32) for k in range(4)]
    f = jaxalloc.planned(rotate, arena="always")
    assert_same(f(*args), jax.jit(rotate)(*args))
    assert f.last_run.copied_bytes == 0


def test_scan_outputs_are_written_into_their_stacked_buffer_in_place():
    def cumulative(xs):
        return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(128), xs)

    xs = jnp.arange(12 * 128, dtype=jnp.float32).reshape(12, 128) / 100
    f = jaxalloc.planned(cumulative)
    assert_same(f(xs), jax.jit(cumulative)(xs))
    assert f.last_run.copied_bytes == 0


def test_case_results_are_written_by_the_branch_or_viewed_without_copies():
    def pick(p, x):
        y = jnp.sin(x)
        r = lax.cond(p, lambda y: y, lambda y: jnp.cos(y) @ y, y)  # branch 1 hands back y
        return (r * 2.0) @ x

    x = jnp.linspace(0.0, 1.0, 32 * 32, dtype=jnp.float32).reshape(32, 32)
    f = jaxalloc.planned(pick, arena="always")
    for p in (True, False):
        assert_same(f(p, x), jax.jit(pick)(p, x))
        assert f.last_run.copied_bytes == 0


def test_a_loop_body_handing_back_its_init_operand_reads_it_in_place_every_round():
    def keep(x, z):
        return lax.fori_loop(0, 3, lambda i, c: (c[0] * c[1], z), (x, z))  # z is also the init

    x, z = jnp.ones(64), jnp.full(64, 2.0)
    f = jaxalloc.planned(keep)
    assert_same(f(x, z), jax.jit(keep)(x, z))
    assert f.last_run.copied_bytes == 0


def test_a_loop_body_yielding_an_outside_value_reads_it_where_it_is():
    def reset(x, z):
        y = z * 3.0  # in the arena
        r = lax.fori_loop(0, 3, lambda i, c: (c[1], y, jnp.full(64, 7.0)), (x, x * 2.0, x))
        return r, y * 2.0  # y is read after the loop, but the results may be y: not in place

    x, z = jnp.ones(64), jnp.full(64, 5.0)
    traced = jaxalloc.planned(reset)._traced((x, z), {})
    plan = make_plan(traced.converted.module)  # the loop's result outside the arena, as `yielded`
    assert "yielded>" in str(plan.module)
    functions = ArenaFunctions(traced.converted.table)
    outputs = make_interpreter(plan.module, functions).call_op("reset", (x, z))
    for got, expected in zip(outputs, jax.tree_util.tree_leaves(jax.jit(reset)(x, z)), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert functions.copied_bytes == 0 and plan.check().copies == ()


# --- storage -----------------------------------------------------------------------------------

DTYPES = [
    jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32, jnp.int16, jnp.int8, jnp.uint32, jnp.uint8,
    jnp.bool_, jnp.complex64, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_survives_the_arena_bit_for_bit(dtype):
    values = np.random.default_rng(0).integers(0, 7, size=(3, 5))
    x = jnp.asarray(values).astype(dtype) if dtype != jnp.complex64 else jnp.asarray(values + 1j * values[::-1])
    layout = layout_of(tensor_type(jax.typeof(x)))
    data = jax.jit(lambda x: to_bytes(x, layout))(x)
    assert data.dtype == jnp.uint8 and data.shape == (layout.nbytes,) == (byte_size(tensor_type(jax.typeof(x))),)
    back = jax.jit(lambda d: from_bytes(d, layout))(data)
    assert back.dtype == x.dtype and back.shape == x.shape
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


@pytest.mark.parametrize("count", [4, 0])
def test_keys_survive_the_arena(count):
    keys = jax.random.split(jax.random.key(3), 4)[:count]
    layout = layout_of(tensor_type(jax.typeof(keys)))
    back = jax.jit(lambda k: from_bytes(to_bytes(k, layout), layout))(keys)
    np.testing.assert_array_equal(jax.random.key_data(back), jax.random.key_data(keys))


def test_the_arena_is_updated_in_place_not_copied_per_op():
    class Pointers:
        def __init__(self, functions):
            self.functions, self.seen = functions, set()

        def will_interpret_op(self, op, args):
            pass

        def did_interpret_op(self, op, results):
            if isinstance(op, jx.PrimOp):
                self.seen.add(self.functions.arena.bytes.unsafe_buffer_pointer())

    def chain(x, w):
        return jnp.tanh(jnp.tanh(x @ w) @ w).sum()

    x = jnp.ones((32, 32))
    converted = convert(jax.make_jaxpr(chain)(x, x), "chain")
    plan = make_plan(converted.module)
    assert plan.arena_bytes > 0
    functions = ArenaFunctions(converted.table)
    pointers = Pointers(functions)
    make_interpreter(plan.module, functions, [pointers]).call_op("chain", (x, x))
    assert len(pointers.seen) == 1


def test_an_arena_too_large_for_32_bit_offsets_is_a_clear_error():
    with pytest.raises(UnsupportedProgramError, match="mode='eager'"):
        Arena(2**31)


def test_modes_and_options():
    f = jaxalloc.planned(jnp.sin)
    assert f.mode == "compiled"
    x = jnp.ones(200)
    assert_same(f(x), jnp.sin(x))
    assert (f.last_run.mode, f.last_run.ops, f.last_run.copied_bytes) == ("compiled", 0, 0)
    assert f.last_run.arena_bytes == f.plan(x).arena_bytes == 0  # the output, computed where the caller receives it
    assert f.plan(x, include_outputs=True).arena_bytes == 832
    with pytest.raises(ValueError, match="unknown mode"):
        jaxalloc.planned(jnp.sin, mode="lazy")
    with pytest.raises(jaxalloc.JaxallocError, match="unknown allocator"):
        jaxalloc.planned(jnp.sin, allocator="nope")
    g = jaxalloc.planned(lambda x: jnp.sin(x) * jnp.cos(x), mode="arena", allocator="greedy-size", alignment=256,
                         passes=AS_TRACED)
    assert_same(g(x), jnp.sin(x) * jnp.cos(x))
    plan = g.plan(x)
    assert (plan.allocator, plan.alignment) == ("greedy-size", 256)
    assert g.last_run.arena_bytes == plan.arena_bytes == 1024  # sin, 800 bytes padded; cos and the product go to the output


# --- memory ------------------------------------------------------------------------------------

MEMORY_CHECKED = [
    "mlp_train_step", "attention_train_step", "scan_rnn", "scan_reverse", "nested_scan_while_switch", "switch",
    "large_closed_constant", "elementwise_chain",
] + ["convnet_train_step", "grad_through_fori_loop", "random_in_scan"] * THOROUGH
"""A sample of the corpus for CI (`JAXALLOC_THOROUGH=1`: three more); `benchmarks/arena_memory.py`
measures every program."""


@pytest.mark.parametrize("name", MEMORY_CHECKED)
def test_a_run_takes_no_more_than_arena_outputs_and_one_op(name):
    program = BY_NAME[name]
    figures = memory_figures(program.fn, *program.make_args())
    assert figures.measured <= figures.allowed, figures
