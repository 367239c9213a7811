"""Offsets and rounds while the kernel is traced: Python ints where the plan fixes them, traced int32
scalars where they depend on the round; the multi-view rule evaluated on them (`TRACED`); windows
of values.

Offsets and rounds are int32 scalars at least 0, traced by the ops below rather than jnp's
operators: jnp makes a jitted call of each operator on a tracer (some 900 in the kernel of the
transformer training step), and its `//`, `%` and indexing correct for negative numbers in five
more ops each, which XLA compiles into every loop round that computes a slot's offset."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxalloc.dialects.mem import Arithmetic
from jaxalloc.execution.compiled.kinds import At, Either


def same(a, b) -> bool:
    """Whether two offsets are known, while tracing, to be equal."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def int32(offset) -> jax.Array:
    return jnp.asarray(offset, jnp.int32)


def plus(a, b):
    """`a + b`; an int32 constant added stays a literal of the `add` (`offsets_as_arguments`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return lax.add(*(np.int32(v) if isinstance(v, int) else v for v in (a, b)))


def over(offset, width: int):
    """`offset // width`, of a width that is a power of 2: a shift."""
    return offset // width if isinstance(offset, int) else lax.shift_right_logical(offset, np.int32(width.bit_length() - 1))


def modulo(round_, n: int):
    """`round_ % n`, as unsigned numbers: XLA's signed remainder corrects for signs too."""
    if isinstance(round_, int):
        return round_ % n
    return lax.convert_element_type(lax.rem(lax.convert_element_type(round_, np.uint32), np.uint32(n)), np.int32)


def entry(values: Sequence[Any], index):
    """`values[index]` at a traced index within them: selects, which XLA fuses into their readers."""
    if all(isinstance(v, int) for v in values) and len(set(values)) == 1:
        return values[0]
    return lax.select_n(index, *(np.asarray(v, np.bool_ if isinstance(v, bool) else np.int32) if isinstance(v, int) else v for v in values))


class _Traced:
    """The multi-view rule's ops (`mem.Arithmetic`) on rounds and offsets that are traced int32 scalars,
    or Python ints where the plan fixes them, traced by the ops above. A flag whether a value lies
    in a slot is known where both offsets are ints, else traced; the value is `At` or `Either` (in
    the arena where its flag holds), or an array (outside the arena)."""

    def later(self, round_, n: int):
        # the constant subtracted: an int32 constant added would be taken for an offset (`offsets_as_arguments`)
        return round_ + n if isinstance(round_, int) else lax.sub(round_, np.int32(-n))

    def remainder(self, round_, n: int):
        return modulo(round_, n)

    def minimum(self, round_, n: int):
        return min(round_, n) if isinstance(round_, int) else lax.min(round_, np.int32(n))

    def at_least(self, round_, n: int):
        return round_ >= n

    def entry(self, values: Sequence[Any], index):
        return values[index] if isinstance(index, int) else entry(values, index)

    def lies_in(self, value, slot, size: int):
        if not isinstance(value, At | Either):
            return False
        offset = value.offset
        if isinstance(offset, int) and isinstance(slot, int):
            inside = slot <= offset < slot + size
        else:  # a traced offset, or a slot of a ring in an enclosing loop's next view
            start, at = (np.int32(x) if isinstance(x, int) else x for x in (slot, offset))
            inside = lax.bitwise_and(lax.le(start, at), lax.lt(at, lax.add(start, np.int32(size))))
        if isinstance(value, Either):
            inside = inside & value.inside
        return bool(inside) if isinstance(inside, bool | np.bool_) else inside

    def or_(self, a, b):
        return lax.bitwise_or(a, b)

    def unless(self, busy, taken, free):
        if busy is None or same(taken, free):
            return free
        return lax.select(busy, np.int32(taken) if isinstance(taken, int) else taken, np.int32(free) if isinstance(free, int) else free)


TRACED: Arithmetic = _Traced()
"""The multi-view rule (`mem.MultiView`) evaluated while the kernel is traced."""


def contiguous(shape: Sequence[int], sizes: Sequence[int]) -> bool:
    """Whether a window of `sizes` is one run of a row-major value of `shape`: ones, then any size,
    then whole dimensions."""
    k = next((j for j, n in enumerate(sizes) if n != 1), len(sizes))
    return all(n == m for n, m in zip(sizes[k + 1:], shape[k + 1:]))


def window_start(shape: Sequence[int], sizes: Sequence[int], starts: Sequence[jax.Array]) -> jax.Array | None:
    """The window's first element, counted in the value's elements: each start clamped as
    `dynamic_slice` clamps it, into the value (not into the arena). None for a window of the whole
    value, which starts at its first element."""
    index = None
    for j, (n, size, start) in enumerate(zip(shape, sizes, starts)):
        if size < n:
            clamped = lax.clamp(np.int32(0), lax.convert_element_type(start, jnp.int32), np.int32(n - size))
            term = lax.mul(clamped, np.int32(math.prod(shape[j + 1:])))
            index = term if index is None else lax.add(index, term)
    return index
