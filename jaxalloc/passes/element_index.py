"""Each element's row-major number as jax ops, for the rewrites that spell out what XLA expands."""

from __future__ import annotations

from collections.abc import Sequence

from jax import lax


def row_major_index(shape: tuple[int, ...], axes: Sequence[int], dtype):
    """Each element's number in row-major order over `axes` of `shape` (the others ignored): a sum
    of iotas, each scaled by the sizes of the later axes; zeros where every axis has size 1."""
    index, stride = None, 1
    for axis in reversed(axes):
        if shape[axis] > 1:
            term = lax.broadcasted_iota(dtype, shape, axis)
            term = term * dtype(stride) if stride > 1 else term
            index = term if index is None else index + term
        stride *= shape[axis]
    return lax.full(shape, 0, dtype) if index is None else index
