"""`jx-fuse`: elementwise chains as one `jx.fused` op, planned as one value and run as one kernel
that needs no memory beyond its operands and results."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from xdsl.context import Context

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.frontend.types import dtype_of
from jaxalloc.frontend.bindings import FusedBinding
from jaxalloc.passes.fusion import FusePass
from jaxalloc.passes.schedule import module_bound
from jaxalloc.testing import library as library_programs
from jaxalloc.testing.corpus import BY_NAME
from jaxalloc.testing.corpus import PROGRAMS as CORPUS
from jaxalloc.testing.differential import AS_TRACED, check_program, check_random_program, sample
from jaxalloc.testing.random_programs import random_program

FUSE = ("jx-dce", "jx-fuse")


def _gelu_mlp(x, w1, w2):
    h = x @ w1
    h = 0.5 * h * (1.0 + jnp.tanh(0.7978845608 * (h + 0.044715 * h**3)))
    return jnp.exp(jnp.sin(h @ w2) * 2.0 - 1.0).sum()


GELU_ARGS = (jnp.linspace(-1.0, 1.0, 32 * 64).reshape(32, 64), jnp.eye(64) * 0.3, jnp.eye(64) * 0.2)


@functools.cache
def _fused_corpus() -> list:
    """The corpus programs in which `jx-fuse` fuses something."""
    found = []
    for program in CORPUS:
        module = jaxalloc.planned(program.fn, passes=FUSE).lower(*program.make_args())
        if any(isinstance(op, jx.FusedOp) for op in module.walk()):
            found.append(program)
    return found


def test_a_chain_becomes_one_planned_value():
    fused = jaxalloc.planned(_gelu_mlp, passes=FUSE)
    module = fused.lower(*GELU_ARGS)
    assert sum(isinstance(op, jx.FusedOp) for op in module.walk()) == 2
    unfused = jaxalloc.planned(_gelu_mlp, passes=AS_TRACED)
    assert fused.plan(*GELU_ARGS, include_outputs=True).arena_bytes < unfused.plan(*GELU_ARGS, include_outputs=True).arena_bytes


@pytest.mark.parametrize("mode", ["eager", "arena", "checked", "compiled"])
def test_fused_programs_equal_jit(mode):
    planned = check_program(_gelu_mlp, *GELU_ARGS, mode=mode, passes=FUSE)
    assert planned.last_run.copied_bytes == 0


def test_a_fused_kernel_needs_no_memory_of_its_own():
    for program in _fused_corpus()[:8]:
        planned = jaxalloc.planned(program.fn, passes=FUSE)
        traced = planned._traced(program.make_args(), {})
        for op in traced.converted.module.walk():
            if isinstance(op, jx.FusedOp):
                operands = [jax.ShapeDtypeStruct(tuple(v.type.get_shape()), dtype_of(v.type.element_type)) for v in op.args]
                binding = FusedBinding(op, traced.converted.table)
                analysis = jax.jit(binding.bind).lower(*operands).compile().memory_analysis()
                assert analysis.temp_size_in_bytes == 0, program.name


@pytest.mark.parametrize("program", sample(_fused_corpus(), 6), ids=lambda p: p.name)
def test_fused_corpus_program_checked(program):
    """A sixth of the programs that fuse, fused alone (the suite's time budget; `test_compiled` runs
    all of the corpus fused, against jit, and `test_corpus` checks all after the default passes,
    which fuse)."""
    planned = check_program(program.fn, *program.make_args(), mode="checked", name=program.name, passes=FUSE)
    assert planned.last_run.copied_bytes == 0


@pytest.mark.parametrize("seed", range(8))
def test_fused_random_program_checked(seed):
    check_random_program(random_program(seed), mode="checked", passes=FUSE)


def test_an_unknown_pass_is_named():
    with pytest.raises(ValueError, match="unknown pass .jx-fuzz.; choose from jx-dce, jx-canonicalize, jx-fuse"):
        jaxalloc.planned(_gelu_mlp, passes=("jx-fuzz",))


def _moments(g, scale, m, v):
    """An optimizer's moments of one clipped gradient: `g * scale` feeds both, as in optax."""
    clipped, e = g * scale, jnp.exp(g)
    return 0.9 * m + 0.1 * clipped, 0.99 * v + 0.01 * clipped * clipped, e * m, e * v


MOMENT_ARGS = (jnp.linspace(-1.0, 1.0, 64 * 32).reshape(64, 32), jnp.float32(0.5), jnp.ones((64, 32)), jnp.ones((64, 32)) * 2.0)


def test_a_cheap_value_read_by_several_fusions_is_computed_in_each():
    module = jaxalloc.planned(_moments, passes=FUSE).lower(*MOMENT_ARGS)
    outer = [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp) and not isinstance(op.parent_op(), jx.FusedOp)]
    inner = [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp) and isinstance(op.parent_op(), jx.FusedOp)]
    # g * scale is computed inside each moment's fusion, never planned; exp(g), expensive, is computed
    # once and read by the two products outside fusions
    assert sum(isinstance(op, jx.FusedOp) for op in module.walk()) == 2
    assert sorted(outer) == ["exp", "mul", "mul"] and "exp" not in inner


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_recomputed_values_equal_jit(mode):
    check_program(_moments, *MOMENT_ARGS, mode=mode, passes=FUSE)


def _dropout(key, x):
    keep = jax.random.bernoulli(key, 0.75, x.shape)
    return jnp.where(keep, x / 0.75, 0.0)


DROPOUT_ARGS = (jax.random.key(3), jnp.linspace(-1.0, 1.0, 64 * 64).reshape(64, 64))


def test_a_random_mask_is_one_fusion_from_its_key():
    """Random bits join the one fusion that reads them, their conversion to floats too: a dropout
    mask is computed from the key where it is read, as XLA computes it, never 4 bytes of bits and
    then of floats per element (the flax nnx conv+BN training step's arena held 1 MiB of them)."""
    module = jaxalloc.planned(_dropout, passes=FUSE).lower(*DROPOUT_ARGS)
    outer = [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp) and not isinstance(op.parent_op(), jx.FusedOp)]
    inner = [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp) and isinstance(op.parent_op(), jx.FusedOp)]
    assert "random_bits" in inner and "bitcast_convert_type" in inner
    assert not {"random_bits", "bitcast_convert_type", "shift_right_logical"} & set(outer)


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled"])
def test_a_random_mask_fused_equals_jit(mode):
    check_program(_dropout, *DROPOUT_ARGS, mode=mode, passes=FUSE)


def _split_gates(xs, h, w):
    def step(h, x):
        z, r, n = jnp.split(w @ (x + h), 3)
        h = (1.0 - jax.nn.sigmoid(z)) * h + jax.nn.sigmoid(z) * jnp.tanh(jax.nn.sigmoid(r) * n)
        return h, None

    return lax.scan(step, h, xs)[0]


SPLIT_ARGS = (jnp.linspace(-1.0, 1.0, 48).reshape(6, 8), jnp.zeros(8), jnp.linspace(-0.5, 0.5, 192).reshape(24, 8))
CANONICAL_FUSE = ("jx-dce", "jx-canonicalize", "jx-fuse")


def test_the_parts_of_a_split_are_read_where_their_fusions_run():
    """A GRU's gates, split from one product: each part is a slice the fusion reading it computes, as
    XLA reads a slice in place inside a fusion, so the product outlives its parts and no part takes
    memory of its own (the equinox GRU scan's plan: from 704 to 512 bytes)."""
    module = jaxalloc.planned(_split_gates, passes=CANONICAL_FUSE).lower(*SPLIT_ARGS)
    (loop,) = [op for op in module.walk() if isinstance(op, jx.WhileOp)]
    alone = [op.primitive.data for op in loop.body.block.ops if isinstance(op, jx.PrimOp)]
    inner = [op.primitive.data for op in loop.body.walk() if isinstance(op, jx.PrimOp) and isinstance(op.parent_op(), jx.FusedOp)]
    assert "split" not in alone and "slice" not in alone and inner.count("slice") == 3
    bounds = [jaxalloc.planned(_split_gates, passes=p).plan(*SPLIT_ARGS, include_outputs=True).lower_bound
              for p in (("jx-dce", "jx-canonicalize"), CANONICAL_FUSE)]
    assert bounds[1] < bounds[0]


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled"])
def test_the_parts_of_a_split_fused_equal_jit(mode):
    check_program(_split_gates, *SPLIT_ARGS, mode=mode, passes=CANONICAL_FUSE)


def _scanned_rows(x, scales, biases):
    def layer(x, row):
        scale, bias = row
        return jnp.tanh(x * scale + bias), None

    return lax.scan(layer, x, (scales, biases))[0]


def _computed_rows(x, scales, biases):
    return _scanned_rows(x, jnp.sin(scales), biases)


ROWS_ARGS = (jnp.ones((4, 8)), jnp.linspace(0.0, 1.0, 24).reshape(3, 8), jnp.linspace(-1.0, 1.0, 24).reshape(3, 8))


def _loop_ops(fn, args) -> tuple[list[str], list[str]]:
    """The primitives of the loop body's own ops, and those inside its fused ops."""
    (loop,) = [op for op in jaxalloc.planned(fn).lower(*args).walk() if isinstance(op, jx.WhileOp)]
    alone = [op.primitive.data for op in loop.body.block.ops if isinstance(op, jx.PrimOp)]
    inner = [op.primitive.data for op in loop.body.walk() if isinstance(op, jx.PrimOp) and isinstance(op.parent_op(), jx.FusedOp)]
    return alone, inner


def test_a_window_of_an_argument_is_read_where_its_fusion_runs():
    """Each round of a scan over stacked rows (an `nnx.scan` over layers' scales and biases) reads a
    row of each with a `dynamic_slice`, which its readers broadcast: as XLA reads a dynamic slice
    inside the fusion that reads it, the rows join that fusion and take no memory of their own (the
    flax nnx layers scanned over: from 832 to 704 bytes, under XLA's 816). A window of a value the
    function computes stays an op, which the compiled kernel reads alone."""
    alone, inner = _loop_ops(_scanned_rows, ROWS_ARGS)
    assert "dynamic_slice" not in alone and inner.count("dynamic_slice") == 2
    alone, inner = _loop_ops(_computed_rows, ROWS_ARGS)
    assert alone.count("dynamic_slice") == 1 and inner.count("dynamic_slice") == 1
    plans = [jaxalloc.planned(fn).plan(*ROWS_ARGS, include_outputs=True) for fn in (_scanned_rows, _computed_rows)]
    assert plans[0].arena_bytes < plans[1].arena_bytes
    program = library_programs.BY_NAME["nnx_scan_over_layers"]
    assert jaxalloc.planned(program.fn).plan(*program.make_args(), include_outputs=True).arena_bytes == 704


def test_a_fusion_never_overwrites_what_it_reads_a_window_of():
    """A fusion that reads a window of an operand reads it wherever the window is: only its other
    operands of the result's shape may take the result's place."""
    from jaxalloc.analysis.inplace import in_place_candidates

    def shifted(x, rows, i):  # a window of the result's shape
        return jnp.tanh(x + lax.dynamic_slice(rows, (i, 0), x.shape))

    module = jaxalloc.planned(shifted).lower(jnp.ones((4, 8)), jnp.ones((4, 8)), jnp.int32(1))
    (fused,) = [op for op in module.walk() if isinstance(op, jx.FusedOp) and any(
        isinstance(inner, jx.PrimOp) and inner.primitive.data == "dynamic_slice" for inner in op.body.block.ops)]
    windowed = {k for k, arg in enumerate(fused.body.block.args)
                if any(isinstance(use.operation, jx.PrimOp) and use.operation.primitive.data == "dynamic_slice" for use in arg.uses)}
    assert windowed and set(in_place_candidates(fused)) == {k for k, v in enumerate(fused.operands) if v.type == fused.results[0].type} - windowed


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled"])
def test_windows_of_arguments_fused_equal_jit(mode):
    check_program(_scanned_rows, *ROWS_ARGS, mode=mode)
    check_program(_computed_rows, *ROWS_ARGS, mode=mode)


def _clamped_rows(x, biases):
    """Rows past the last one, which `dynamic_slice` clamps to the last."""
    return lax.fori_loop(0, 4, lambda i, x: jnp.tanh(x + lax.dynamic_slice_in_dim(biases, i + 2, 1)), x)


WIDE_ROWS_ARGS = (jnp.ones((4, 256)), jnp.linspace(0.0, 1.0, 768).reshape(3, 256), jnp.linspace(-1.0, 1.0, 768).reshape(3, 256))
"""Rows past the 512 bytes of a small value: a donated argument of them lies in the arena."""


@pytest.mark.parametrize("fn, args", [(_scanned_rows, WIDE_ROWS_ARGS), (_clamped_rows, WIDE_ROWS_ARGS[::2])], ids=["scan", "clamped"])
def test_a_fused_window_of_a_donated_argument_in_the_arena_equals_jit(fn, args):
    """A donated argument lies in the arena, where a fusion that reads a window of it reads it whole
    behind a barrier, as the kernel reads the operand of every op that indexes one (`guards.INDEXED`):
    rows past the last are the last, not the bytes after it."""
    expected = jax.jit(fn)(*args)
    donating = jaxalloc.planned(fn, donate_argnums=tuple(range(1, len(args))), arena="always")
    result = donating(args[0], *(jnp.copy(a) for a in args[1:]))
    assert donating.last_run.arena_bytes > 0 and donating.last_run.copied_bytes == 0
    assert jnp.allclose(result, expected, rtol=1e-6, atol=1e-6)


def test_fusion_never_raises_the_bound():
    """The equinox training step, where fusing every chain kept softplus operands alive into the
    backward pass, and the corpus programs that fuse: the bound after `jx-fuse` is never higher."""
    programs = [(library_programs.eqx_mlp_train_step, library_programs._eqx_mlp_train_args())]
    programs += [(p.fn, p.make_args()) for p in _fused_corpus()]
    for fn, args in programs:
        bounds = [jaxalloc.planned(fn, passes=passes).plan(*args, include_outputs=True).lower_bound for passes in (AS_TRACED, FUSE)]
        assert bounds[1] <= bounds[0], fn.__name__


def _adaptive_steps(x, h):
    def body(_, carry):
        x, h = carry
        error = jnp.abs(jnp.sin(x)).sum()
        h_next = jnp.minimum(h * jnp.clip(0.9 * error, 0.2, 5.0), 1.0)
        return x + h_next * jnp.cos(x), h_next

    return lax.fori_loop(0, 10, body, (x, h))


ADAPTIVE_ARGS = (jnp.linspace(0.0, 1.0, 8), jnp.float32(0.1))


def test_a_loop_body_fuses_up_to_its_own_peak():
    """In a loop body a step may hold more than before fusion, up to the body's peak, which its plan
    takes whatever the other steps hold: the step-size chain fuses whole, `min` included, and the
    bound does not rise."""
    module = jaxalloc.planned(_adaptive_steps, passes=FUSE).lower(*ADAPTIVE_ARGS)
    (loop,) = [op for op in module.walk() if isinstance(op, jx.WhileOp)]
    alone = [op.primitive.data for op in loop.body.block.ops if isinstance(op, jx.PrimOp)]
    assert "min" not in alone and "mul" not in alone
    bounds = [jaxalloc.planned(_adaptive_steps, passes=p).plan(*ADAPTIVE_ARGS, include_outputs=True).lower_bound
              for p in (AS_TRACED, FUSE)]
    assert bounds[1] <= bounds[0]
    check_program(_adaptive_steps, *ADAPTIVE_ARGS, mode="checked", passes=FUSE)


def _fused_with(program_name: str, library: bool):
    """A corpus program's module after `jx-dce` and `jx-fuse{library=...}`."""
    program = BY_NAME[program_name]
    module = jaxalloc.planned(program.fn, passes=("jx-dce",)).lower(*program.make_args()).clone()
    FusePass(library=library).apply(Context(), module)
    return module


def _convolutions(module) -> tuple[int, int]:
    """The convolutions of a module: (inside fused ops, outside them)."""
    convs = [op for op in module.walk() if isinstance(op, jx.PrimOp) and op.primitive.data == "conv_general_dilated"]
    inside = sum(isinstance(op.parent_op(), jx.FusedOp) for op in convs)
    return inside, len(convs) - inside


def test_a_cnn_is_one_library_graph_on_the_cpu():
    """XLA's CPU backend hands a CNN's convolutions, biases, ReLUs and pools, up to the mean's sum, to
    its library as one graph: `library=true` makes them one fused op, whose inner values (megabytes
    in a real CNN) are never planned; without it the convolutions stay ops of their own."""
    library, plain = _fused_with("pooled_cnn", True), _fused_with("pooled_cnn", False)
    assert _convolutions(plain) == (0, 2)
    assert _convolutions(library) == (2, 0)
    assert [_convolutions(op) for op in library.walk() if isinstance(op, jx.FusedOp)] == [(2, 0), (0, 0)]
    assert module_bound(library) < module_bound(plain)


def test_only_what_the_library_computes_joins_its_graph():
    """An NCHW convolution is not the library's (it stays an op of its own), and a convolution whose
    result the backward pass reads again is not fused away."""
    assert _convolutions(_fused_with("convnet", True))[0] == 0
    module = _fused_with("pooled_cnn_train_step", True)
    for op in module.walk():
        if isinstance(op, jx.PrimOp) and op.primitive.data == "conv_general_dilated" and isinstance(op.parent_op(), jx.FusedOp):
            assert all(use.operation.parent_op() is op.parent_op() for use in op.results[0].uses)


@pytest.mark.parametrize("mode", ["arena", "checked", "compiled"])
def test_a_library_graph_equals_jit(mode):
    program = BY_NAME["pooled_cnn"]
    planned = check_program(program.fn, *program.make_args(), mode=mode, name=program.name)
    assert planned.last_run.copied_bytes == 0


def _layer_norm(h):
    mean = h.mean(-1, keepdims=True)
    return (h - mean) / jnp.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5)


def _residual_norms(x, w1, w2, w3):
    """Two layer norms, each after a residual add, as in a transformer's layers after the first."""
    h = x + jnp.tanh(x @ w1) @ w2
    h = h + _layer_norm(h) @ w3
    return _layer_norm(h)


RESIDUAL_ARGS = (jnp.linspace(-1.0, 1.0, 16 * 32).reshape(16, 32), jnp.eye(32) * 0.3, jnp.eye(32) * 0.2, jnp.eye(32) * 0.1)


def test_a_cut_that_no_step_needs_is_undone():
    """Moving the residual add into the four fusions that read it raises steps, and the cuts blamed
    every move whose operands live across them, `x - mean` (twice) among them: once the add is cut,
    those cuts are undone, and no `x - mean` is planned. The bound does not rise."""
    module = jaxalloc.planned(_residual_norms).lower(*RESIDUAL_ARGS)
    alone = [op.primitive.data for op in module.walk() if isinstance(op, jx.PrimOp) and not isinstance(op.parent_op(), jx.FusedOp)]
    assert "sub" not in alone and "integer_pow" not in alone
    bounds = [jaxalloc.planned(_residual_norms, passes=p).plan(*RESIDUAL_ARGS, include_outputs=True).lower_bound
              for p in (("jx-dce", "jx-canonicalize"), ("jx-dce", "jx-canonicalize", "jx-fuse"))]
    assert bounds[1] <= bounds[0]


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_undone_cuts_equal_jit(mode):
    check_program(_residual_norms, *RESIDUAL_ARGS, mode=mode)


def test_undone_cuts_that_raise_the_bound_are_made_again():
    """In the nnx LSTM's scan body, undoing the cuts keeps every step within the body's own peak, but
    the plan's bound rises by a slot: the pass falls back to the cuts as made, and still fuses (it
    fused nothing when undoing was all it tried)."""
    program = library_programs.BY_NAME["nnx_lstm_rnn"]
    module = jaxalloc.planned(program.fn, passes=("jx-dce",)).lower(*program.make_args()).clone()
    before = module_bound(module)
    FusePass().apply(Context(), module)
    assert sum(isinstance(op, jx.FusedOp) for op in module.walk()) == 5
    assert module_bound(module) <= before
