"""The gradient of a max (or min) pool whose windows tile its operand, as selects that XLA fuses.

JAX differentiates `reduce_window_max` into `select_and_scatter_add`: each window's gradient goes
to the element the window selected. XLA's CPU backend expands that op into a reduction over every
window of each element's value and its index in each dimension (an index array the size of the
operand per dimension, and the reduction's result of five parts), then a scatter: the gradient of
a CNN's 16x32x32x32 pool holds 11 MiB of XLA's temp and takes 2.7 ms. Where the windows tile the
operand (strides equal to the window, no padding) each element is in one window, so its gradient
is the window's, where the window selected it, else zero: the window's choice is found by
comparing its elements in XLA's order (the first selected, each later one taking its place
where `select(chosen, later)` is false), and the gradient is one elementwise select over the
operand's shape. XLA fuses that whole: no temp, 0.09 ms, the same bits (NaNs and ties included).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from jax import lax

from jaxalloc.passes.element_index import row_major_index

SELECTS = {"ge": lax.ge, "le": lax.le}
"""The select functions of max and min pools: JAX binds `ge` for a max, `le` for a min."""

MOST_POSITIONS = 16
"""The largest window rewritten: each of its positions is a comparison of the pooled shape."""


def tiles(source: tuple[int, ...], operand: tuple[int, ...], window, strides, padding) -> bool:
    """Whether the windows tile the operand: each element is in exactly one window."""
    return (
        window is not None and tuple(window) == tuple(strides or ())
        and all(tuple(p) == (0, 0) for p in padding or ())
        and len(operand) == len(window) == len(source)
        and all(p * k == d for p, k, d in zip(source, window, operand))
        and math.prod(window) <= MOST_POSITIONS
    )


def routed_gradient(source, operand, *, window: tuple[int, ...], select: str):
    """`select_and_scatter_add(source, operand)` for windows that tile `operand` (`tiles`)."""
    pooled = source.shape
    blocks_shape = tuple(d for p, k in zip(pooled, window) for d in (p, k))
    blocks = lax.reshape(operand, blocks_shape)  # each window dimension beside its pooled one

    def element(position):
        """The element at `position` of every window, in the pooled shape."""
        start = tuple(v for a in position for v in (0, a))
        limit = tuple(v for p, a in zip(pooled, position) for v in (p, a + 1))
        return lax.reshape(lax.slice(blocks, start, limit), pooled)

    positions = list(itertools.product(*(range(k) for k in window)))  # XLA's order: row-major
    if len(positions) == 1:  # windows of one element: each is its own gradient
        return lax.reshape(source, operand.shape)
    chosen, index = element(positions[0]), lax.full(pooled, 0, np.int32)
    for n, position in enumerate(positions[1:], 1):
        later = element(position)
        keep = SELECTS[select](chosen, later)
        index = lax.select(keep, index, lax.full(pooled, n, np.int32))
        if n < len(positions) - 1:
            chosen = lax.select(keep, chosen, later)
    # each element's position in its window, numbered as `positions`
    place = row_major_index(blocks_shape, range(1, 2 * len(window), 2), np.int32)
    pooled_dims = tuple(range(0, 2 * len(window), 2))
    hit = lax.broadcast_in_dim(index, blocks_shape, pooled_dims) == place
    spread = lax.broadcast_in_dim(source, blocks_shape, pooled_dims)
    return lax.reshape(lax.select(hit, spread, lax.full(blocks_shape, 0, source.dtype)), operand.shape)
