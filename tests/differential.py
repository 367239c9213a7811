"""The differential check every test program goes through.

Convert, print, parse back, verify, print identically; interpret the parsed module (inside
its planned arena, or eagerly) and compare with `jax.jit`: exact for integer, bool and key
outputs, tight tolerance for floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.frontend import Converted, parse_module
from jaxalloc.types import byte_size

# Op-by-op and jitted runs must agree to float32 rounding; GPUs multiply float32 matrices in
# TF32 by default, which differs between kernels far more than that.
jax.config.update("jax_default_matmul_precision", "highest")

FLOAT_TOLERANCE = {"rtol": 2e-5, "atol": 2e-6}
LOW_PRECISION_TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}


def assert_same(actual, expected) -> None:
    """Pytree-equal: same structure, exact integers/bools/keys, close floats."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"output structure {a_tree} != {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        if jax.dtypes.issubdtype(e.dtype, jax.dtypes.prng_key):
            a, e = jax.random.key_data(a), jax.random.key_data(e)
        assert jax.typeof(a).weak_type == jax.typeof(e).weak_type, f"weak type {jax.typeof(a)} != {jax.typeof(e)}"
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape and a.dtype == e.dtype, f"{a.shape}/{a.dtype} != {e.shape}/{e.dtype}"
        if jax.dtypes.issubdtype(e.dtype, np.inexact):
            tolerance = FLOAT_TOLERANCE if e.dtype.itemsize >= 4 else LOW_PRECISION_TOLERANCE
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), **tolerance)
        else:
            np.testing.assert_array_equal(a, e)


def check_roundtrip(module) -> str:
    """Print, parse back, verify and print again: both texts must be equal. Returns the text."""
    module.verify()
    text = str(module)
    parsed = parse_module(text)
    parsed.verify()
    assert str(parsed) == text, "the printed module does not print identically after parsing"
    return text


def check_program(fn, *args, mode: str = "arena") -> jaxalloc.Planned:
    """The whole differential check for `fn(*args)` run in `mode`; returns the planned function."""
    planned = jaxalloc.planned(fn, mode=mode)
    traced = planned._traced(args, {})
    text = check_roundtrip(traced.converted.module)
    parsed = Converted(parse_module(text), traced.converted.table)
    planned._cache = {k: type(v)(v.closed_jaxpr, v.out_tree, parsed) for k, v in planned._cache.items()}
    assert_same(planned(*args), jax.jit(fn)(*args))
    return planned


@dataclass(frozen=True)
class MemoryFigures:
    """What an arena run of a program measurably took, against what its plan allows.

    Where the device counts its own bytes in use (`memory_stats()`), every buffer is counted as
    its allocator holds it: rounded up to the allocator's 256-byte granule.
    """

    arena: int
    outputs: int
    largest_op: int
    """An upper bound on what one op holds besides the arena: its operands and results (a loop's
    operands stay referenced while it runs, so its carried values outside the arena count twice)."""
    measured: int
    """Peak bytes in use during the run, less those in use before it (the arguments among them)."""

    @property
    def allowed(self) -> int:
        return self.arena + self.outputs + self.largest_op


def memory_figures(fn, *args) -> MemoryFigures:
    """Run `fn` in its arena with memory sampling after every op."""
    stats = jax.devices()[0].memory_stats() or {}
    granule = 256 if "bytes_in_use" in stats else 1
    held = lambda nbytes: -(-nbytes // granule) * granule  # noqa: E731
    planned = jaxalloc.planned(fn, measure_memory=True)
    outputs = planned(*args)
    run = planned.last_run
    ops = [op for op in planned.plan(*args).module.walk() if isinstance(op, jx.PrimOp | jx.WhileOp | jx.CaseOp)]
    largest = max((sum(held(byte_size(v.type)) for v in (*op.operands, *op.results)) for op in ops), default=0)
    output_bytes = sum(held(o.nbytes) for o in jax.tree_util.tree_leaves(outputs))
    return MemoryFigures(held(run.arena_bytes), output_bytes, largest, run.peak_live_bytes - run.live_bytes_before)
